"""Mine libfabric's EFA provider error texts into kb/messages/libfabric-efa.yaml (re-runnable; see
tools/mine/README.md).

On AWS, NCCL talks to the EFA network adapter through aws-ofi-nccl and libfabric's `efa` provider.
When a transfer fails, the provider turns the adapter's completion status (or one of its own error
numbers) into a short text with `efa_strerror()`, and that text is what users see: in libfabric's own
`<warn>` lines (`libfabric:PID:TS::efa:cq:efa_rdm_txe_handle_error():737<warn> err: 15, message:
Unreachable remote - never received a response (15)`) and inside aws-ofi-nccl's WARN lines, which
print `fi_cq_strerror()`. Since libfabric 1.21 the provider also explains a few of them at length
(`efa_show_help()`: security groups, a crashed peer, mismatched libfabric versions).

For every release tag in a range it reads, from a clone of github.com/ofiwg/libfabric:
- the table of texts: the `EFA_IO_COMP_STATUSES` / `EFA_PROV_ERRNOS` X-macros of
  prov/efa/src/efa_errno.h (1.21 and later), or the string arrays of prov/efa/src/efa_strerror.c
  with the enum values of efa_errno.h (1.16-1.20);
- the long help texts of `efa_show_help()` in efa_strerror.c;
- the format of libfabric's own log lines (`ofi_log()` in src/log.c), which names the provider.
A message is one error number; its texts by release become the entry's wordings. What a person wrote
in an existing entry (meaning, role, points_to, pattern, ...) is kept.

Usage (from the repository root):
    git clone --bare https://github.com/ofiwg/libfabric ~/src/libfabric.git
    python tools/mine/libfabric_efa.py --repo ~/src/libfabric.git --report
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nccl  # noqa: E402
import nccl_source  # noqa: E402
import ofi_nccl  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KB_MESSAGES = ROOT / "kb" / "messages"
REPO_URL = "https://github.com/ofiwg/libfabric"
COMPONENT = "libfabric-efa"
TITLE = "libfabric's EFA provider: the error texts of an EFA completion or provider error (efa_strerror, efa_show_help)"
ERRNO_H = "prov/efa/src/efa_errno.h"
STRERROR_C = "prov/efa/src/efa_strerror.c"
HEADER = ("# Mined by tools/mine/libfabric_efa.py from libfabric's EFA provider at each release tag. Re-run it to\n"
          "# refresh text/source/versions/wording; what a person wrote (meaning, role, points_to, pattern, ...) is kept.\n")

_XMACRO = re.compile(r"^\s*_\(\s*(\d+)\s*,\s*(\w+)\s*,\s*(.*?)\)\s*\\?\s*$", re.M)
_ENUM = re.compile(r"\b(FI_EFA_\w+)\s*=\s*(\d+)")
_ARRAY_ITEM = re.compile(r"\[\s*(FI_EFA_\w+)[^\]]*\]\s*=\s*((?:\"(?:[^\"\\]|\\.)*\"\s*)+|UNKNOWN_ERR_STR)")
_HELP = re.compile(r"case\s+(\w+)\s*:\s*help\s*=\s*((?:\"(?:[^\"\\]|\\.)*\"\s*)+);")
_LITERAL = re.compile(r"\"((?:[^\"\\]|\\.)*)\"")
LOG_C = "src/log.c"
_LOG_FORMAT = re.compile(r"fprintf\(\s*\w+\s*,\s*\"(%s:%d:%ld:[^\"]*)\"")
"""ofi_log()'s line format: `PACKAGE:pid:time:prefix:provider:subsystem:func():line<level> message`."""
_PREFIXES = ("EFA_IO_COMP_STATUS_", "FI_EFA_ERR_", "FI_EFA_")
GENERIC = {"OK": "Success", "OTHER": "Unknown error", "OOM": "Out of memory", "LOCAL_ERROR_BAD_LENGTH": "Message too long"}
"""texts not catalogued: each is word for word strerror's or CUDA's too, so a line with it says nothing
about EFA by itself (and "Success" is not an error)."""


vkey = nccl.vkey


def tag_version(tag: str) -> str:
    return tag.removeprefix("v")


def pick_tags(tags: list[str], lo: str, hi: str) -> list[str]:
    """Final releases (`vX.Y.Z`, no rc/alpha/beta) in [lo, hi], oldest first."""
    found = [t for t in tags if re.fullmatch(r"v\d+\.\d+\.\d+", t) and vkey(lo) <= vkey(tag_version(t)) <= vkey(hi)]
    return sorted(found, key=lambda t: vkey(tag_version(t)))


def _joined(literals: str) -> str:
    return "".join(bytes(s, "utf-8").decode("unicode_escape") for s in _LITERAL.findall(literals))


def suffix(name: str) -> str:
    for p in _PREFIXES:
        if name.startswith(p):
            return name[len(p):]
    return name


def texts_at(errno_h: str, strerror_c: str) -> dict[int, tuple[str, str, str]]:
    """code -> (suffix name, text, source file) of every error text at one release."""
    out: dict[int, tuple[str, str, str]] = {}
    if "EFA_IO_COMP_STATUSES(" in errno_h:  # 1.21+: X-macros, stringified by efa_strerror.c
        for code, name, text in _XMACRO.findall(errno_h):
            out[int(code)] = (name, " ".join(text.split()), ERRNO_H)
        return out
    values = {name: int(v) for name, v in _ENUM.findall(errno_h)}
    for name, literals in _ARRAY_ITEM.findall(strerror_c):
        if name in values:
            text = "Unknown error" if literals == "UNKNOWN_ERR_STR" else _joined(literals)
            out[values[name]] = (suffix(name), " ".join(text.split()), STRERROR_C)
    return out


def help_at(strerror_c: str) -> dict[str, str]:
    """suffix name -> the long help text efa_show_help() prints for it (1.21+)."""
    return {suffix(name): " ".join(_joined(lits).split()) for name, lits in _HELP.findall(strerror_c)}


def mine(repo: Path, tags: list[str]) -> dict[str, dict]:
    """message key -> {"name", "level", "texts": {text: [tags]}, "source"}; keys are `code:N` and `help:NAME`."""
    found: dict[str, dict] = {}
    for tag in tags:
        names = nccl_source.git(repo, "ls-tree", "-r", "--name-only", tag, "--", "prov/efa/src").splitlines()
        if STRERROR_C not in names:
            continue
        errno_h = nccl_source.git(repo, "show", f"{tag}:{ERRNO_H}")
        strerror_c = nccl_source.git(repo, "show", f"{tag}:{STRERROR_C}")
        for code, (name, text, source) in texts_at(errno_h, strerror_c).items():
            item = found.setdefault(f"code:{code}", {"level": "warn", "texts": defaultdict(list)})
            item.update(name=name, source=source)
            item["texts"][text].append(tag)
        log_c = nccl_source.git(repo, "show", f"{tag}:{LOG_C}")
        for fmt in dict.fromkeys(_LOG_FORMAT.findall(log_c)):
            item = found.setdefault("log:line", {"level": "info", "texts": defaultdict(list)})
            item.update(name="LOG_LINE", source=LOG_C)
            item["texts"][fmt.replace("%s", "libfabric", 1)].append(tag)  # PACKAGE
        for name, text in help_at(strerror_c).items():
            item = found.setdefault(f"help:{name}", {"level": "info", "texts": defaultdict(list)})
            item.update(name=name, source=STRERROR_C)
            item["texts"][text].append(tag)
    return found


def entry_id(key: str, name: str) -> str:
    base = nccl.slug(name.replace("_", " ").lower())
    if key == "log:line":
        return f"{COMPONENT}.log-line"
    return f"{COMPONENT}.{'help-' if key.startswith('help:') else ''}{base}"


def build(args) -> int:
    repo = Path(args.repo)
    tags = args.tags or pick_tags(nccl_source.git(repo, "tag", "--list", "v*").split(), args.lo, args.hi)
    versions = [tag_version(t) for t in tags]
    print(f"mining {len(tags)} tags: {', '.join(tags)}", file=sys.stderr)
    found = mine(repo, tags)
    path = Path(args.kb) / f"{COMPONENT}.yaml"
    existing = yaml.safe_load(path.read_text()) if path.exists() else {}
    by_id = {m["id"]: m for m in existing.get("messages", [])}
    order = {t: i for i, t in enumerate(tags)}
    entries, new_ids, texts_of = [], [], {}
    for key in sorted(found, key=lambda k: (k.split(":")[0], int(k.split(":")[1]) if k.startswith("code:") else 0, k)):
        item = found[key]
        if item["name"] in GENERIC:
            continue
        mid = entry_id(key, item["name"])
        old = by_id.get(mid)
        entry = {k: old[k] for k in nccl.HAND_FIELDS if old and k in old} or {"id": mid, "meaning": nccl.NEEDS_REVIEW,
                                                                              "role": "context"}
        if old is None:
            new_ids.append(mid)
        wordings = sorted(item["texts"].items(), key=lambda kv: -max(order[t] for t in kv[1]))
        entry.update(level=item["level"], text=wordings[0][0], source=item["source"],
                     versions=nccl.specifier({tag_version(t) for t in wordings[0][1]}, versions),
                     wording=[{"versions": nccl.specifier({tag_version(t) for t in ts}, versions), "text": text}
                              for text, ts in wordings[1:]])
        texts_of[entry["id"]] = [text for text, _ in wordings]
        entries.append(entry)
    regenerated, unresolved = ofi_nccl.assign_patterns(entries, texts_of, Path(args.kb), COMPONENT)
    if args.skip_unread:
        entries = [e for e in entries if e["meaning"] != nccl.NEEDS_REVIEW]
    mined_ids = {e["id"] for e in entries}
    orphans = [m for m in existing.get("messages", []) if m["id"] not in mined_ids and m["meaning"] != nccl.NEEDS_REVIEW]
    entries += orphans  # written by a person, no longer printed by a mined release: kept, reported
    data = {"component": COMPONENT, "software": "libfabric", "title": TITLE,
            "mined_from": [{"artifact": f"ofiwg/libfabric=={tag_version(t)} (tag {t}) {ERRNO_H}, {STRERROR_C}, {LOG_C}",
                            "url": f"{REPO_URL}/tree/{t}/prov/efa/src"} for t in tags]}
    if existing.get("defaults"):
        data["defaults"] = existing["defaults"]
    data["messages"] = [{k: e[k] for k in nccl.FIELD_ORDER if k in e and e[k] not in ([], {}, None, "")} for e in entries]
    if not args.dry_run:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HEADER + nccl.dump(data))
    if args.report:
        print(f"\n{len(data['messages'])} messages; {len(new_ids)} new; "
              f"needs review: {sum(m['meaning'] == nccl.NEEDS_REVIEW for m in data['messages'])}")
        nccl.report_entries(regenerated, unresolved, [o["id"] for o in orphans])
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = ofi_nccl.tag_miner_parser(__doc__, "LIBFABRIC_REPO", "github.com/ofiwg/libfabric", "1.16.0", "2.6.0")
    return build(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
