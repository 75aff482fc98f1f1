"""The log reader and the scanner: normalization, line numbers, wrapped lines, block boundaries."""

from __future__ import annotations

import io

import pytest

from advisor.diagnose import read_log
from advisor.reader import iter_blocks, looks_binary, normalize

WATCHDOG = (
    "[rank1]:[E217 14:55:02.441 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=38, OpType=_ALLGATHER_BASE, NumelIn=9510912, NumelOut=38043648, Timeout(ms)=1800000) "
    "ran for 1800033 milliseconds before timing out."
)


def test_normalize_crlf_progress_bars_ansi_and_nul():
    raw = b"a\r\nb 10%|\xe2\x96\x88 \rb 20%|\xe2\x96\x88\xe2\x96\x88\r\x1b[31mred\x1b[0m\x00end\n"
    assert normalize(raw) == "a\nb 10%|█ \nb 20%|██\nred end\n".encode()


def test_normalize_big_blocks_like_small_ones():
    """Blocks over 64 KiB look for CRLF with RE2 instead of `in`: same bytes out, every mix."""
    bar = b"".join(b"  %d%%|###   | %d/100 [00:0%d<00:10]\r" % (i, i, i % 10) for i in range(100))
    mixes = {
        "progress bars only": bar * 40,
        "CRLF only": b"[rank0]: step 1 loss 2.5\r\n" * 4000,
        "bars, then one CRLF at the very end": bar * 40 + b"done\r\n",
        "a CR at the end, no LF": bar * 40 + b"tail\r",
    }
    for name, chunk in mixes.items():
        assert len(chunk) > 1 << 16, name
        expected = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        assert normalize(chunk) == expected, name
        assert normalize(chunk).count(b"\n") == chunk.count(b"\r") + chunk.count(b"\n") - chunk.count(b"\r\n"), name


def test_blocks_end_on_line_boundaries_and_count_lines():
    text = "".join(f"line {i}\n" for i in range(1, 1001))
    blocks = list(iter_blocks(text, block_size=1000))
    assert len(blocks) > 5
    assert all(b.data.endswith(b"\n") for b in blocks)
    assert b"".join(b.data for b in blocks) == text.encode()
    first_lines = [b.first_line for b in blocks]
    assert first_lines[0] == 1
    for block, nxt in zip(blocks, blocks[1:]):
        assert nxt.first_line == block.first_line + block.data.count(b"\n")


def test_giant_line_without_newline_is_cut_not_buffered():
    blob = b"x" * 50_000
    blocks = list(iter_blocks(io.BytesIO(blob), block_size=4096))
    assert sum(len(b.data) for b in blocks) == len(blob)
    assert max(len(b.data) for b in blocks) <= 2 * 4096
    assert blocks[1].continues_line


def test_crlf_split_across_reads_is_one_line_break():
    data = b"a" * 4095 + b"\r\nb\n"
    assert b"".join(b.data for b in iter_blocks(io.BytesIO(data), block_size=4096)) == b"a" * 4095 + b"\nb\n"


def test_looks_binary():
    assert looks_binary(bytes(range(256)) * 20)
    assert not looks_binary(b"plain log line\n" * 100)
    assert not looks_binary("日本語 / 中文 log\n".encode() * 50)
    assert not looks_binary(b"\x1b[31mcoloured\x1b[0m\n" * 100)


def evidence(kb, text: str, cause: str) -> list[int]:
    reading = read_log(kb, text)
    return [e.line for slot in reading.signatures.by_cause.get(cause, {}).values() for e in slot.lines]


def test_line_numbers_of_evidence(kb):
    text = "noise\nmore noise\n" + WATCHDOG + "\ntail\n"
    assert evidence(kb, text, "collective-slower-than-timeout") == [3]


def test_wrapped_message_still_matches_with_rank_prefix(kb):
    wrapped = (
        "[rank0]:[F305 11:20:45.908 ProcessGroupNCCL.cpp:1565] ProcessGroupNCCL's watchdog got stuck for\n"
        "[rank0]: 480 seconds without making progress in monitoring enqueued collectives.\n"
    )
    reading = read_log(kb, wrapped)
    assert "nccl-heartbeat-monitor" in reading.signatures.by_cause
    assert reading.facts.get("heartbeat_timeout_s") == 480


def test_message_glued_to_a_progress_bar(kb):
    glued = " 45%|████▌     | 450/1000 [10:00<12:00,  1.31s/it]" + WATCHDOG + "\n"
    reading = read_log(kb, glued)
    assert reading.facts.get("timeout_ms") == 1800000
    assert reading.facts.get("ranks_reporting") == [1]


def test_match_across_a_block_boundary(kb, monkeypatch):
    import advisor.diagnose as diagnose_module

    filler = "".join(f"step {i} ok\n" for i in range(400))
    text = filler + "ProcessGroupNCCL's watchdog got stuck for\n600 seconds without making progress\n" + filler
    # small blocks put the boundary close to the wrapped message
    monkeypatch.setattr(diagnose_module, "iter_blocks", lambda src, on_progress=None, **kw: iter_blocks(src, block_size=len(filler) + 30, **kw))
    reading = read_log(__import__("advisor.knowledge", fromlist=["load_kb"]).load_kb(), text)
    assert "nccl-heartbeat-monitor" in reading.signatures.by_cause


def test_harmless_line_is_evidence_for_nothing_else(kb):
    line = "node:81240:81240 [3] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No plugin found (libnccl-net.so), using internal implementation\n"
    reading = read_log(kb, line)
    assert set(reading.signatures.by_cause) == {"nccl-plugin-noise"}
    assert reading.signatures.notices and reading.signatures.notices[0][0] == 1


def test_invalid_utf8_and_binary_junk_do_not_crash(kb):
    junk = bytes(range(256)) * 50 + WATCHDOG.encode() + b"\n\xff\xfe\xfd\n"
    reading = read_log(kb, junk)
    assert reading.facts.get("timeout_ms") == 1800000


def test_stream_of_many_blocks_keeps_bounded_evidence(kb):
    many = (WATCHDOG + "\n") * 20_000
    reading = read_log(kb, io.BytesIO(many.encode()))
    slots = reading.signatures.by_cause["collective-slower-than-timeout"]
    assert slots["collective-timeout"].count == 20_000
    assert len(slots["collective-timeout"].lines) <= 6
    assert reading.stats.lines == 20_000


def _evidence_and_facts(kb, text):
    reading = read_log(kb, text)
    hits = sorted((cause, sig, line.line) for cause, slots in reading.signatures.by_cause.items()
                  for sig, slot in slots.items() for line in slot.lines)
    return hits, reading.facts.model_dump()


def all_example_logs(kb):
    from helpers import case_paths, scenario_paths
    import yaml

    logs = [ex.log for c in kb.causes.values() for kind in ("positive", "negative") for ex in getattr(c.examples, kind)]
    logs += [yaml.safe_load(p.read_text())["log"] for p in scenario_paths() + case_paths()]
    return logs


def test_small_input_path_and_block_path_find_the_same_evidence(kb, monkeypatch):
    """Pasted errors skip the big alternation (advisor.scan._hits_small); both paths must agree."""
    import advisor.scan as scan_module
    from advisor.knowledge import KnowledgeBase

    logs = all_example_logs(kb)
    small = [_evidence_and_facts(kb, log) for log in logs]
    monkeypatch.setattr(scan_module, "SMALL_LINES", -1)  # force the block path
    fresh = _fresh(kb)
    big = [_evidence_and_facts(fresh, log) for log in logs]
    for log, a, b in zip(logs, small, big):
        assert a == b, log[:200]


@pytest.mark.timeout(240)  # every probe over every distinct example line: seconds alone, more on a loaded machine
def test_atom_prefilter_never_hides_a_match(kb):
    """Soundness of advisor.regex.required_atoms on real text: wherever a probe's regex matches,
    one of its atoms occurs in the matched line (checked over every example and shared case)."""
    table = kb.probe_table
    windows = set()  # the same line recurs across logs: each (line, next line) pair is checked once
    for log in all_example_logs(kb):
        lines = log.split("\n")
        for i, line in enumerate(lines):
            windows.add((line, lines[i + 1] if i + 1 < len(lines) else ""))
    checked = 0
    for line, following in windows:
        window = line + "\n" + following
        for probe, atoms in zip(table.probes, table._atoms):
            if atoms is None:
                continue
            m = probe.regex.search(window)
            if m is None or m.start() > len(line):
                continue
            checked += 1
            assert any(a in window.lower() for a in atoms), (probe.id, atoms, line)
    assert checked > 200


def _training_log(steps: int, slows_down: bool = True) -> str:
    """Progress bars, loss lines and phase cues by the thousand, with rare failure lines between."""
    lines = ["[INFO|trainer.py:2414] 2025-05-06 08:00:00,000 >> ***** Running training *****"]
    for step in range(1, steps + 1):
        rate = 25.0 if slows_down and step > steps - 40 else 1.9  # the last stretch slows down sharply
        lines.append(f"{step * 100 // steps:3d}%|██▌       | {step}/{steps} [00:{step % 60:02d}<1:00:00,  {rate:.2f}s/it]")
        lines.append(f"{{'loss': {2 - step / steps:.4f}, 'grad_norm': 0.9, 'learning_rate': 1e-05, 'epoch': {step / steps:.2f}}}")
        if step % 700 == 0:
            lines.append("[INFO|trainer.py:4226] 2025-05-06 09:00:00,000 >> ***** Running Evaluation *****")
        if step % 900 == 0:
            lines.append(f"[INFO|trainer.py:3984] 2025-05-06 09:10:00,000 >> Saving model checkpoint to out/checkpoint-{step}")
        if step == steps // 2:
            lines.append("[rank3]:[W506 10:00:00.000 ProcessGroupNCCL.cpp:1200] [PG 0 Rank 3] NCCL WARN something odd")
    lines.append(f"[INFO|trainer.py:3984] 2025-05-06 11:00:00,000 >> Saving model checkpoint to out/checkpoint-{steps}")
    lines.append(WATCHDOG)
    return "\n".join(lines) + "\n"


def _reading_summary(kb, text: str, block_size: int):
    import advisor.diagnose as diagnose_module
    from advisor.diagnose import conclude
    from advisor.models import DiagnoseRequest

    original = diagnose_module.iter_blocks
    diagnose_module.iter_blocks = lambda src, on_progress=None, **kw: original(src, block_size=block_size, **kw)
    try:
        reading = read_log(kb, text)
    finally:
        diagnose_module.iter_blocks = original
    d = conclude(kb, reading, DiagnoseRequest())
    evidence = sorted((c.id, c.score, repr(c.evidence)) for c in d.causes)
    return d.facts, evidence, reading.stats


def test_recurring_lines_are_summarised_without_changing_the_answer(kb, monkeypatch):
    """After HOT_AFTER repeats, progress bars and phase cues are skipped at DFA speed and only their
    latest lines before each other hit are matched (advisor.scan._Recurring): the facts (phase, step,
    slowdown, framework) and every cause's evidence lines must come out as in a full pass, across
    block boundaries too."""
    import advisor.scan as scan_module

    for text, block_size in ((_training_log(6000), 1 << 20), (_training_log(6000), 8192), (_training_log(3000, False), 1 << 20)):
        summarised = _reading_summary(kb, text, block_size)
        assert summarised[2].summarized > 0, "the summarising path must actually run"
        monkeypatch.setattr(scan_module, "HOT_AFTER", 10**9)  # nothing ever turns hot: the full pass
        full = _reading_summary(kb, text, block_size)
        monkeypatch.undo()
        assert full[2].summarized == 0
        assert summarised[0] == full[0]
        assert summarised[1] == full[1]
        assert summarised[2].lines == full[2].lines
        assert summarised[0]["phase"] == "save"
        assert summarised[0].get("slowdown") is (True if "25.00s/it" in text else None)


def test_line_count_includes_a_last_line_without_newline(kb):
    assert read_log(kb, WATCHDOG).stats.lines == 1
    assert read_log(kb, WATCHDOG + "\n").stats.lines == 1
    assert read_log(kb, "a\nb\n" + WATCHDOG).stats.lines == 3


def test_a_long_lived_process_switches_to_the_big_alternation(kb, monkeypatch):
    """The per-line atom path suits one pasted error; a server answering many small requests must
    build the big alternation once instead of paying the per-line path forever."""
    import advisor.scan as scan_module
    from advisor.knowledge import KnowledgeBase

    fresh = _fresh(kb)
    monkeypatch.setattr(scan_module, "FAST_AFTER", 20)
    read_log(fresh, WATCHDOG + "\n")
    assert fresh.probe_table._fast is None, "one pasted line must not pay for the big alternation"
    for _ in range(30):
        read_log(fresh, WATCHDOG + "\n")
    assert fresh.probe_table._fast is not None
    assert read_log(fresh, WATCHDOG + "\n").facts.get("op_type") == "_ALLGATHER_BASE"


def test_the_api_builds_the_alternation_at_start(kb):
    from advisor.api import Settings, create_app
    from advisor.knowledge import KnowledgeBase

    fresh = _fresh(kb)
    create_app(fresh, Settings())
    assert fresh.probe_table._fast is not None


def test_line_numbers_hold_across_blocks_cuts_and_summarised_stretches(kb, monkeypatch):
    """The scanner counts lines itself, once, on its way through each block (the reader does not):
    every hit's line number must be the line's real number in the normalized log, whatever the
    block size, with progress-bar redraws (CR), summarised recurring lines and a giant line cut
    across blocks in between."""
    import advisor.diagnose as diagnose_module
    import advisor.scan as scan_module
    from advisor.knowledge import KnowledgeBase
    from advisor.scan import scan

    parts = []
    for step in range(1, 1201):
        parts.append(f" {step % 100:2d}%|###   | {step}/1200 [00:01<00:09,  1.90s/it]\r")  # redraws: a line each
        parts.append(f"{{'loss': 1.5, 'epoch': {step / 1200:.2f}}}\n")
        if step in (300, 700, 1100):
            parts.append(WATCHDOG.replace("SeqNum=38", f"SeqNum={step}") + "\n")
        if step == 500:
            parts.append("x" * 20000 + "\n")  # longer than the small blocks: cut, continued
    text = "".join(parts)
    lines = normalize(text.encode()).split(b"\n")
    expected = [i + 1 for i, line in enumerate(lines) if b"Watchdog caught collective operation timeout" in line]
    assert len(expected) == 3

    class Lines:
        def __init__(self):
            self.seen = []

        def on_hit(self, hit):
            if "Watchdog caught collective" in hit.text and hit.line_no not in self.seen:
                self.seen.append(hit.line_no)

    monkeypatch.setattr(scan_module, "SMALL_LINES", -1)  # the block path, as for a big file
    for block_size in (4096, 8192, 65536, 1 << 20):
        fresh = _fresh(kb)
        listener = Lines()
        stats = scan(iter_blocks(text, block_size=block_size, count_lines=False), fresh.probe_table, [listener])
        assert listener.seen == expected, block_size
        assert stats.lines == len(lines) - 1, block_size  # the text ends with a line break
        assert stats.summarized > 0, "recurring lines must have been summarised"
    monkeypatch.setattr(diagnose_module, "iter_blocks", lambda src, on_progress=None, **kw: iter_blocks(src, block_size=8192, **kw))
    reading = read_log(kb, text)
    assert reading.stats.lines == len(lines) - 1

    # a block that ends with a line too long to carry over as context: the next block's numbers
    # come from the count alone
    giant = "a\n" + "x" * (scan_module.MAX_WINDOW + 100) + "\n"
    listener = Lines()
    fresh = _fresh(kb)
    stats = scan(iter_blocks(giant + WATCHDOG + "\n", block_size=len(giant) + 7, count_lines=False), fresh.probe_table, [listener])
    assert listener.seen == [3] and stats.lines == 3


def _fresh(kb):
    """A copy of the KB without anything compiled or cached on first use (probe table, references)."""
    from dataclasses import fields

    from advisor.knowledge import KnowledgeBase

    return KnowledgeBase(**{f.name: getattr(kb, f.name) for f in fields(KnowledgeBase)})
