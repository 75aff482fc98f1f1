"""Presenting a Diagnosis: terminal text (colour only on a TTY) and markdown for bots.

Pure formatting: no diagnosis logic lives here. The one-line diagnosis comes first, then the fix,
then the evidence (short unless verbose), as people reading at 3 a.m. want it.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from advisor.models import Diagnosis, RankRow, TimeoutReport, fact_text

_RESET = "\x1b[0m"


@dataclass
class Style:
    color: bool = False

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}{_RESET}" if self.color else text

    def bold(self, t: str) -> str:
        return self._wrap("1", t)

    def dim(self, t: str) -> str:
        return self._wrap("2", t)

    def red(self, t: str) -> str:
        return self._wrap("31;1", t)

    def green(self, t: str) -> str:
        return self._wrap("32", t)

    def yellow(self, t: str) -> str:
        return self._wrap("33", t)

    def cyan(self, t: str) -> str:
        return self._wrap("36", t)


# what a log line starts with before its message: a torchrun rank prefix, a glog header
# (`[E217 14:55:02.441 ProcessGroupNCCL.cpp:616]`), a Python logging time stamp
_LOG_PREFIX = re.compile(
    r"(?:\[(?:rank|default)\d+\]:\s*)?"
    r"(?:\[?[IWEF]\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?(?: +\d+)? [\w./-]+:\d+\]\s*)?"
    r"(?:\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?\]?\s*(?:-\s*)?)?"
)


def evidence_lines(text: str, width: int, max_lines: int) -> list[str]:
    """A matched log line for a narrow column: its message first (the prefixes of time and place
    dropped), wrapped rather than cut, at most `max_lines` lines."""
    message = text[_LOG_PREFIX.match(text[:200]).end():].strip() or text.strip()
    return textwrap.wrap(message, width=max(width, 20), max_lines=max_lines, placeholder=" ...",
                         break_on_hyphens=False) or [""]


def standing(d: Diagnosis) -> str:
    """Where the diagnosis stands between two questions, in words no stronger than its status."""
    top = next((c for c in d.causes if not c.benign), None)
    if top is None or d.status == "no-match":
        return "no cause stands out yet"
    if d.status == "uncertain":
        return f"ahead so far, not yet sure: {top.title} ({top.score:.0%})"
    return f"leading: {top.title} ({top.score:.0%})"


def paragraphs(text: str) -> list[str]:
    """KB prose is hard-wrapped YAML: re-flow each paragraph, keep list items on their own line."""
    out: list[str] = []
    for block in text.strip().split("\n\n"):
        current: list[str] = []
        for line in block.split("\n"):
            stripped = line.strip()
            if stripped[:2] in ("- ", "* ") or (stripped[:1].isdigit() and stripped[1:3] in (". ", ") ")):
                if current:
                    out.append(" ".join(current))
                current = [stripped]
            elif stripped:
                current.append(stripped)
        if current:
            out.append(" ".join(current))
        out.append("")
    return out[:-1]


def _indent(text: str, prefix: str = "  ", width: int = 100) -> str:
    out = []
    for para in paragraphs(text):
        if not para:
            out.append("")
            continue
        out.extend(textwrap.wrap(para, width=max(width - len(prefix), 20), initial_indent=prefix, subsequent_indent=prefix,
                                 break_on_hyphens=False, break_long_words=False) or [prefix])
    return "\n".join(out)


def rank_picture(rows: list[RankRow], max_cells: int = 64) -> list[str]:
    """Which rank stopped where, as a strip of one character per rank plus a legend; with
    Flight Recorder dumps, a second strip with each rank's last collective."""
    if not rows:
        return []
    lines: list[str] = []
    from_dumps_only = all(r.state == "silent" and r.flight_recorder for r in rows)
    if not from_dumps_only:
        lines += _log_picture(rows, max_cells)
    if any(r.flight_recorder for r in rows):
        lines += _dump_picture(rows, max_cells)
    return lines


def _log_picture(rows: list[RankRow], max_cells: int) -> list[str]:
    shown = rows[:max_cells]
    symbol = {"timed-out": "T", "failed": "F", "silent": ".", "printed": "p"}
    first, last = shown[0].rank, shown[-1].rank
    strip = "".join(symbol[r.state] for r in shown)
    lines = [f"ranks {first}-{last}: {strip}" + (f" ... (+{len(rows) - len(shown)} more)" if len(rows) > len(shown) else "")]
    by_seq: dict[tuple, list[RankRow]] = {}
    for r in rows:
        if r.state == "timed-out":
            by_seq.setdefault((r.op, r.seq), []).append(r)
    for (op, seq), group in sorted(by_seq.items(), key=lambda kv: (kv[0][1] or 0)):
        done = sorted({r.last_completed for r in group if r.last_completed is not None})
        extra = f", last completed {'/'.join(map(str, done))}" if done else ""
        lines.append(f"  T timed out in {op or 'a collective'} at SeqNum {seq}{extra}: {_ranges([r.rank for r in group])}")
    failed = [r.rank for r in rows if r.state == "failed"]
    if failed:
        lines.append(f"  F reported an error: {_ranges(failed)}")
    silent = [r.rank for r in rows if r.state == "silent"]
    if silent:
        lines.append(f"  . reported nothing: {_ranges(silent)} (the rank holding the others up is usually among these)")
    if len(by_seq) > 1:
        lines.append("  ranks stopped at different sequence numbers: they were out of step (collective mismatch or a skipped call)")
    return lines


_FR_SYMBOL = {"waiting": ("W", "waiting"), "behind": ("B", "never entered it"), "mismatch": ("M", "mismatched"),
              "in-step": ("=", "in step"), "no-dump": ("x", "no usable dump"), "unknown": ("?", "unclear")}


def _dump_picture(rows: list[RankRow], max_cells: int) -> list[str]:
    shown = [r for r in rows if r.flight_recorder][:max_cells]
    strip = "".join(_FR_SYMBOL[r.flight_recorder][0] for r in shown)
    total = sum(1 for r in rows if r.flight_recorder)
    lines = [f"dumps {shown[0].rank}-{shown[-1].rank}: {strip}" + (f" ... (+{total - len(shown)} more)" if total > len(shown) else "")]
    groups: dict[tuple, list[int]] = {}
    for r in rows:
        if r.flight_recorder:
            groups.setdefault((r.flight_recorder, r.last_collective or ""), []).append(r.rank)
    order = list(_FR_SYMBOL)
    for (status, last), ranks in sorted(groups.items(), key=lambda kv: (order.index(kv[0][0]), kv[1][0]))[:12]:
        symbol, label = _FR_SYMBOL[status]
        lines.append(f"  {symbol} {label}: {_ranges(ranks)}" + (f", last: {last}" if last else ""))
    return lines


def flight_recorder_lines(d: Diagnosis, verbose: bool = False, width: int = 100) -> list[str]:
    """The short Flight Recorder section: which dumps, the culprits and why, the first mismatch,
    the ranks without a dump, notes."""
    fr = d.flight_recorder
    if fr is None:
        return []
    formats = sorted({f"{x.format} format {x.version}" + (f" (torch {x.torch})" if x.torch else "") for x in fr.dumps if x.version})
    backends = sorted({x.backend for x in fr.dumps if x.backend})
    head = f"{len(fr.dumps)} dump{'s' if len(fr.dumps) != 1 else ''}"
    details = ", ".join(formats + backends)
    lines = [head + (f": {details}" if details else "")]
    for rank in fr.culprits[: (16 if verbose else 4)]:
        why = fr.why.get(str(rank), "")
        lines.append(_clip(f"culprit rank {rank}: {why}", width, verbose))
        frames = fr.culprit_frames.get(str(rank), [])
        if frames:
            stack = " < ".join(f"{f.name} ({f.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{f.line})" for f in frames[: (8 if verbose else 4)])
            lines.append(_clip(f"  stack: {stack}", width, verbose))
    if len(fr.culprits) > (16 if verbose else 4):
        lines.append(f"... and ranks {_ranges(fr.culprits[(16 if verbose else 4):])}")
    m = fr.first_mismatch
    if m is not None:
        sides = "; ".join(f"rank {r}: {x.get('op')} {x.get('sizes')} {'/'.join(x.get('dtypes') or [])}".rstrip()
                          + (f" in {x['where']}" if x.get("where") else "") for r, x in list(m.by_rank.items())[:6])
        label = f"{m.pg} ({m.desc})" if m.desc else m.pg
        lines.append(_clip(f"first mismatch: collective #{m.seq} of group {label} differs in {m.kind}: {sides}", width, verbose))
    if not fr.culprits and m is None and fr.ranks_dumped:
        lines.append("no rank is behind and no collective differs between the dumps")
    if fr.ranks_missing:
        lines.append(f"no usable dump from rank{'s' if len(fr.ranks_missing) > 1 else ''} {_ranges(fr.ranks_missing)}")
    for note in fr.notes[: (12 if verbose else 2)]:
        lines.append(_clip(f"note: {note}", width, verbose))
    return lines


def _clip(text: str, width: int, verbose: bool) -> str:
    limit = max(width * 3, 120) if not verbose else 2000
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _ranges(ranks: list[int]) -> str:
    ranks = sorted(set(ranks))
    parts, start, prev = [], None, None
    for r in ranks + [None]:
        if start is None:
            start = prev = r
        elif r is not None and r == prev + 1:
            prev = r
        else:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = r
    text = ",".join(parts[:40])
    return text + (" ..." if len(parts) > 40 else "")


_SHOW_FACTS = ["framework", "framework_version", "torch_version", "nccl_version", "transformers_version", "trl_version", "phase", "op_type", "timeout_ms",
               "seq_num", "world_size", "nodes", "gpus_per_node", "model_size_b", "first_failure", "user_exception",
               "heartbeat_timeout_s", "store_timeout_s", "rendezvous_host", "exit_code", "signal", "slowdown",
               "waiting_ops", "dump_stragglers", "straggler_activity", "later_group_barrier"]


def render_text(d: Diagnosis, style: Style | None = None, verbose: bool = False, width: int = 100) -> str:
    s = style or Style()
    out: list[str] = []
    head = d.headline
    out.append(s.bold(s.red(head) if d.status == "diagnosed" else s.yellow(head)))
    top = next((c for c in d.causes if not c.benign), None)
    if top and d.status != "no-match":
        out.append(s.dim(f"  cause {top.id} ({top.code}), confidence {top.score:.0%}")
                   + (s.yellow(f", unconfirmed until you answer {', '.join(top.unconfirmed)}") if top.unconfirmed else ""))
    for n in d.notices:
        if n.kind == "input":
            out.append(s.yellow(f"  note: {n.title}"))
    out.append("")

    fix = d.fix
    if fix.actions:
        out.append(s.bold("Fix"))
        for i, a in enumerate(fix.actions, 1):
            tag = "mitigation" if a.mitigation else a.kind
            out.append(f"  {i}. {s.cyan('[' + tag + ']')} {s.bold(a.title)}" + (s.dim(f"  ({a.applies_note})") if a.applies_note else ""))
            out.append(_indent(a.steps, "     ", width))
            for line in a.derivations:
                out.append(_indent("= " + line, "     ", width))
            if a.caveat:
                out.append(_indent("Caveat: " + " ".join(a.caveat.split()), "     ", width))
    if fix.snippets:
        out.append("")
        limit = len(fix.snippets) if verbose else 3
        for sn in fix.snippets[:limit]:
            out.append(s.bold(f"  {sn.title}") + s.dim(f"  [{sn.format}]"))
            out.extend("    " + line for line in sn.content.rstrip("\n").split("\n"))
            out.append("")
        if len(fix.snippets) > limit:
            out.append(s.dim(f"  ({len(fix.snippets) - limit} more snippets: --verbose or --json)"))
    if fix.next_run and not fix.snippets:
        out.append(s.bold("Next run"))
        out.extend("  - " + n for n in fix.next_run)

    if d.timeout is not None:
        out.append(s.bold("Timeout"))
        out.extend("  " + line for line in timeout_lines(d.timeout, width - 2, brief=not verbose))
        out.append("")

    if fix.explanation:
        out.append(s.bold("Why"))
        explanation = fix.explanation if verbose else fix.explanation.strip().split("\n\n")[0]
        out.append(_indent(explanation, "  ", width))
        out.append("")

    if top and d.status != "no-match":
        lines = top.evidence.get("lines", [])
        facts = top.evidence.get("facts", [])
        if lines or facts:
            out.append(s.bold("Evidence"))
            for e in lines[: (12 if verbose else 3)]:
                where = "description:" if e["line"] == 0 else f"line {e['line']}:"
                wrapped = evidence_lines(e["text"], width - 4 - len(where), 6 if verbose else 2)
                out.append(f"  {s.dim(where)} {wrapped[0]}")
                out.extend(" " * (3 + len(where)) + rest for rest in wrapped[1:])
            for f in facts[: (8 if verbose else 3)]:
                sign = "+" if f["weight"] >= 0 else ""
                out.append(f"  {s.dim('fact')} {f['fact']}={fact_text(f['value'])} ({sign}{f['weight']}): {f['why'][: width - 30]}")
            out.append("")

    fr_lines = flight_recorder_lines(d, verbose, width)
    if fr_lines:
        out.append(s.bold("Flight Recorder"))
        for line in fr_lines:
            out.extend(textwrap.wrap(line, width=max(width - 4, 20), initial_indent="  ", subsequent_indent="      ",
                                     break_on_hyphens=False, break_long_words=False) or ["  "])
        out.append("")

    picture = rank_picture(d.ranks)
    if picture:
        out.append(s.bold("Ranks"))
        out.extend("  " + line for line in picture)
        out.append("")

    # without a diagnosis the leading cause was not named above: it is a candidate like the rest
    others = [c for c in d.causes if (c is not top or d.status == "no-match") and c.basis == "evidence"]
    if others:
        out.append(s.bold("Candidates" if d.status == "no-match" else "Other candidates"))
        for c in others[: (8 if verbose else 3)]:
            label = "harmless" if c.benign else f"{c.score:.0%}"
            needs = s.dim(f" (unconfirmed: answer {', '.join(c.unconfirmed)})") if c.unconfirmed else ""
            out.append(f"  - {c.title} [{c.code}] {s.dim(label)}{needs}")
        out.append("")
    similar = [c for c in d.causes if c.basis == "similar-text"]
    if similar:
        out.append(s.bold("Low-confidence candidates") + s.dim("  (the failure lines read like these; similar wording is not evidence)"))
        for c in similar:
            line = c.evidence["lines"][0] if c.evidence.get("lines") else None
            where = f" - line {line['line']} resembles {c.evidence['symptoms'][0]['phrase']}" if line and c.evidence.get("symptoms") else ""
            out.append(f"  - {c.title} [{c.code}]{s.dim(where)}")
        out.append("")

    explained = [m for m in d.messages if m.role != "benign"]
    if explained:
        out.append(s.bold("What the messages mean"))
        for m in explained[: (12 if verbose else 4)]:
            where = f"line {m.line}" + (f" (x{m.count})" if m.count > 1 else "")
            out.append(f"  {s.dim(where + ':')} {evidence_lines(m.text, width - 16, 1)[0]}")
            out.append(_indent(m.meaning, "      ", width))
        if len(explained) > (12 if verbose else 4):
            out.append(s.dim(f"  ({len(explained) - (12 if verbose else 4)} more: --verbose or --json)"))
        out.append("")

    if d.later_fixes:
        out.append(s.bold(later_fixes_heading(d)) + s.dim("  (NCCL's release notes; upgrading past one rules it out)"))
        for f in d.later_fixes[: (8 if verbose else 3)]:
            out.append("  - " + _indent(f"{f.version}: {f.text}", "    ", width).lstrip())
            out.append(s.dim(f"    {f.url}"))
        out.append("")

    harmless = [n for n in d.notices if n.kind == "harmless"]
    if harmless:
        out.append(s.bold("Harmless lines"))
        for n in harmless[: (10 if verbose else 2)]:
            out.append(f"  {s.dim('line ' + str(n.line) + ':')} {n.title}")
        out.append("")

    if d.questions:
        out.append(s.bold("To sharpen this, answer") + s.dim("  (--answer ID=VALUE, or --interactive)"))
        for q in d.questions:
            choices = f" [{'|'.join(c['value'] for c in q.choices)}]" if q.choices else ""
            out.append(f"  {s.cyan(q.id)}: {q.text}{s.dim(choices)}")
        out.append("")

    if verbose:
        shown = {k: v for k, v in d.facts.items() if k in _SHOW_FACTS}
        if shown:
            out.append(s.bold("Facts"))
            for k in _SHOW_FACTS:
                if k in shown:
                    src = d.fact_sources.get(k)
                    where = f" (line {src.line})" if src and src.line else f" ({src.origin})" if src and src.origin != "log" else ""
                    if src and src.origin == "inferred" and src.detail:
                        where = f" ({src.detail})"
                    out.append(f"  {k} = {fact_text(shown[k])}{s.dim(where)}")
            out.append("")
    if fix.references:
        out.append(s.bold("References"))
        out.extend("  " + u for u in fix.references[: (20 if verbose else 4)])
    if d.redactions:
        out.append(s.dim(f"\n{d.redactions} secret(s) in the input were redacted from this output."))
    return "\n".join(out).rstrip() + "\n"


def render_markdown(d: Diagnosis, max_evidence: int = 8) -> str:
    """A reply ready to post as a GitHub or Slack comment: diagnosis first, evidence folded."""
    out: list[str] = [f"**{_md_escape(d.headline)}**", ""]
    top = next((c for c in d.causes if not c.benign), None)
    if top and d.status != "no-match":
        unconfirmed = f", unconfirmed until you answer {', '.join(top.unconfirmed)}" if top.unconfirmed else ""
        out.append(f"Cause `{top.id}` (`{top.code}`), confidence {top.score:.0%}{unconfirmed}.")
        out.append("")
    for n in d.notices:
        if n.kind == "input":
            out.append(f"> Note: {_md_escape(n.title)}")
            out.append("")
    fix = d.fix
    if fix.actions:
        out.append("### Fix")
        for i, a in enumerate(fix.actions, 1):
            tag = "mitigation" if a.mitigation else a.kind
            out.append(f"{i}. **{_md_escape(a.title)}** _({tag})_  ")
            out.append("   " + a.steps.replace("\n", "\n   "))
            for line in a.derivations:
                out.append(f"   - `{line}`")
            if a.caveat:
                out.append(f"   - Caveat: {a.caveat}")
        out.append("")
    for sn in fix.snippets[:4]:
        out.append(f"**{_md_escape(sn.title)}** (`{sn.format}`)")
        out.append(f"```{sn.language}\n{sn.content.rstrip()}\n```")
        out.append("")
    if d.timeout is not None:
        out.append("### Timeout")
        out.extend("- " + _md_escape(line) for line in timeout_lines(d.timeout))
        out.append("")
    if fix.explanation:
        out.append("### Why")
        out.append(fix.explanation)
        out.append("")
    candidates = [c for c in d.causes if (c is not top or d.status == "no-match") and not c.benign][:5]
    if candidates:
        out.append("### Candidates" if d.status == "no-match" else "### Other candidates")
        for c in candidates:
            basis = " _(similar wording only, not evidence)_" if c.basis == "similar-text" else ""
            needs = f" _(unconfirmed: answer {', '.join(c.unconfirmed)})_" if c.unconfirmed else ""
            out.append(f"- {_md_escape(c.title)} (`{c.code}`) {c.score:.0%}{basis}{needs}")
        out.append("")
    evidence: list[str] = []
    if top and d.status != "no-match":  # evidence for a cause the reply does not name would read as a verdict
        for e in top.evidence.get("lines", [])[:max_evidence]:
            where = "description" if e["line"] == 0 else f"line {e['line']}"
            evidence.append(f"{where}: {e['text']}")
        for f in top.evidence.get("facts", [])[:max_evidence]:
            evidence.append(f"fact {f['fact']}={fact_text(f['value'])} ({f['weight']:+}): {f['why']}")
    fr_lines = flight_recorder_lines(d)
    if fr_lines:
        out.append("### Flight Recorder")
        out.extend("- " + _md_escape(line).replace("`", "'") for line in fr_lines)
        out.append("")
    picture = rank_picture(d.ranks)
    meanings = [f"line {m.line}: {m.text.strip()[:200]}\n    -> {' '.join(m.meaning.split())}" for m in d.messages if m.role != "benign"][:6]
    if meanings:
        out.append("<details><summary>What the messages mean</summary>")
        out.append("")
        out.append("```text")
        out.extend(x.replace("```", "'''") for x in meanings)
        out.append("```")
        out.append("</details>")
        out.append("")
    if d.later_fixes:
        out.append(f"### {later_fixes_heading(d)}")
        out.extend(f"- {f.version}: {_md_escape(f.text)} ({f.url})" for f in d.later_fixes)
        out.append("")
    if evidence or picture:
        out.append("<details><summary>Evidence</summary>")
        out.append("")
        out.append("```text")
        out.extend(x.replace("```", "'''") for x in evidence + picture)
        out.append("```")
        out.append("</details>")
        out.append("")
    if d.questions:
        out.append("### To sharpen this")
        first = d.questions[0]
        example = first.choices[0]["value"] if first.choices else {"number": "8", "version": "2.5.1"}.get(first.kind, "unknown")
        out.append(f"Reply with your answers as `id=value`, one per line (e.g. `{first.id}={example}`); "
                   "`unknown` is fine for any of them.")
        out.append("")
        for q in d.questions:
            choices = f" ({', '.join(c['value'] for c in q.choices)})" if q.choices else ""
            out.append(f"- `{q.id}`: {_md_escape(q.text)}{choices}")
        out.append("")
    if fix.references:
        out.append("### References")
        out.extend(f"- {u}" for u in fix.references[:8])
    return "\n".join(out).rstrip() + "\n"


def later_fixes_heading(d: Diagnosis) -> str:
    """Names the release the fixes come after and the parts of NCCL they share with the log."""
    version = fact_text(d.facts.get("nccl_version"))
    areas = sorted({a for f in d.later_fixes for a in f.areas})
    return f"Fixed after NCCL {version} in what failed here ({', '.join(areas)})"


def timeout_lines(t: TimeoutReport, width: int | None = None, brief: bool = False) -> list[str]:
    """Which clock fired, its value and origin, whether the user's setting reaches it, what next
    (`brief`: the trap's first sentence only)."""
    value = "value not printed" if t.seconds is None else f"{t.seconds} s" + (" (inferred)" if t.inferred else "")
    reach = t.reachable
    verdict = {True: "reaches it", False: "does NOT reach it", None: "may or may not reach it"}[reach.value]
    setting = f"your setting ({reach.setting}) {verdict}" if reach.setting else f"a framework setting {verdict}"
    lines = [
        f"clock: {t.clock} ({t.title}), {value}" + (f", line {t.line}" if t.line else ""),
        f"origin: {t.origin}",
        f"{setting}" + (f" [{reach.trap}]" if reach.trap else "") + (f": {_first_sentence(reach.why) if brief else reach.why}" if reach.why else ""),
    ]
    if reach.how:
        lines.append(f"set it with: {reach.how}")
    nxt = t.next_clock or "none inside the job"
    lines.append(f"if raised, next: {nxt}" + (f" ({t.next_note})" if t.next_note else ""))
    if width:
        wrapped: list[str] = []
        for line in lines:
            wrapped.extend(textwrap.wrap(line, width=max(width, 20), subsequent_indent="  ", break_on_hyphens=False,
                                         break_long_words=False) or [line])
        return wrapped
    return lines


def _first_sentence(text: str) -> str:
    head, dot, rest = text.partition(". ")
    return head + "." if dot and rest else text


def _md_escape(text: str) -> str:
    return text.replace("<", "&lt;").replace(">", "&gt;")
