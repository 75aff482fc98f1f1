"""Mine aws-ofi-nccl's messages into kb/messages/aws-ofi-nccl.yaml (re-runnable; see tools/mine/README.md).

aws-ofi-nccl is the libfabric network plugin NCCL loads on AWS (EFA) and other libfabric fabrics. It
logs through NCCL's own logger, so its lines look like NCCL's (`host:pid:tid [0] func:line NCCL WARN
NET/OFI ...`), but the texts and their versions are the plugin's, not NCCL's.

What it does, for every release tag of the plugin in a range (one tag per version: the `-aws` tag where
both exist, the build AWS ships in its images):
1. reads the plugin's sources at the tag (a clone of github.com/aws/aws-ofi-nccl) and lists every
   `NCCL_OFI_WARN` format and the fact-carrying `NCCL_OFI_INFO` formats (`KEEP_INFO`), with file and
   line, through tools/mine/nccl_source.py's lexer; each text gets the `NET/OFI ` prefix the macros add;
2. follows each message across releases and writes one entry per message with its wordings by version,
   the same way as tools/mine/nccl.py (whose lineage, pattern and YAML code it reuses), keeping what a
   person wrote in existing entries.

Usage (from the repository root):
    git clone --bare https://github.com/aws/aws-ofi-nccl ~/src/aws-ofi-nccl.git
    python tools/mine/ofi_nccl.py --repo ~/src/aws-ofi-nccl.git --report
    python tools/mine/ofi_nccl.py --repo ~/src/aws-ofi-nccl.git --to 1.22.0 --dry-run --report
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nccl  # noqa: E402
import nccl_source  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KB_MESSAGES = ROOT / "kb" / "messages"
DEFAULT_CACHE = Path(os.environ.get("OFI_MINE_CACHE", Path.home() / ".cache" / "nccl-advisor" / "mine-ofi"))
REPO_URL = "https://github.com/aws/aws-ofi-nccl"
COMPONENT = "aws-ofi-nccl"
TITLE = "aws-ofi-nccl: NCCL's libfabric network plugin for AWS EFA and other libfabric fabrics (NET/OFI)"

OFI_MACROS = {"NCCL_OFI_WARN": 0, "NCCL_OFI_INFO": 1, "NCCL_OFI_TRACE": 1}
"""the plugin's logging macros (include/nccl_ofi_log.h) -> index of the format argument."""
PREFIX = "NET/OFI "
"""what every one of those macros puts before the format (`"NET/OFI " fmt`, every release)."""
SUFFIXES = (".c", ".cpp", ".cc", ".h", ".hpp")

# INFO lines worth an entry: the plugin's version and the provider, fabric and protocol it chose
# (what a diagnosis needs to know it runs on EFA and which release), and the quiet half of a failure
# (no provider found, a capability it had to do without).
KEEP_INFO = [
    r"^NET/OFI (?:Initializing|Using) aws-ofi-nccl %s$", r"^NET/OFI Selected [Pp]rovider is", r"^NET/OFI Using Libfabric version",
    r"^NET/OFI Using transport protocol", r"^NET/OFI Running on %s platform", r"No eligible providers", r"^NET/OFI Could not disable CUDA",
    r"^NET/OFI Forcing AWS OFI ndev", r"^NET/OFI Setting FI_EFA_FORK_SAFE", r"^NET/OFI Need to force simple protocol",
    r"^NET/OFI Support for (?:DMA-BUF|global) registrations",
]
AUTOCONF = {"PACKAGE_STRING": "aws-ofi-nccl %s", "PACKAGE_NAME": "aws-ofi-nccl"}
"""config.h macros the sources print (AC_INIT's package name and version): `"Using " PACKAGE_STRING`
prints `Using aws-ofi-nccl 1.3.0aws`."""
_KEEP_INFO = re.compile("|".join(f"(?:{p})" for p in KEEP_INFO))


vkey = nccl.vkey


def tag_version(tag: str) -> str:
    return re.match(r"v(\d+\.\d+\.\d+)", tag).group(1)


def release_tags(repo: Path, lo: str, hi: str) -> list[str]:
    return pick_tags(nccl_source.git(repo, "tag", "--list", "v*").split(), lo, hi)


def pick_tags(tags: list[str], lo: str, hi: str) -> list[str]:
    """One tag per release in [lo, hi], oldest first: `vX.Y.Z-aws` where it exists, else `vX.Y.Z`
    (release candidates and odd spellings such as `v1.4.0aws` are skipped)."""
    tags = [t for t in tags if re.fullmatch(r"v\d+\.\d+\.\d+(?:-aws)?", t)]
    by_version: dict[str, str] = {}
    for t in tags:
        v = tag_version(t)
        if vkey(lo) <= vkey(v) <= vkey(hi) and (v not in by_version or t.endswith("-aws")):
            by_version[v] = t
    return [by_version[v] for v in sorted(by_version, key=vkey)]


def tag_files(repo: Path, tag: str) -> dict[str, str]:
    names = [n for n in nccl_source.git(repo, "ls-tree", "-r", "--name-only", tag, "--", "src", "include").splitlines()
             if n.endswith(SUFFIXES)]
    return {n: nccl_source.git(repo, "show", f"{tag}:{n}") for n in names}


def mine_tag(repo: Path, tag: str, cache: Path) -> dict:
    """Every logged format at a tag, prefixed as printed, cached as JSON."""
    out = cache / "src" / f"{tag}.json"
    if out.exists():
        return json.loads(out.read_text())
    found, _ = nccl_source.extract(tag_files(repo, tag), OFI_MACROS)
    data = {"tag": tag, "found": [{**f.__dict__, "text": PREFIX + f.text} for f in found]}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data))
    return data


def resolved(text: str, unresolved: list[str]) -> str:
    """The text with the autoconf macros it prints spelled out, when every `%s` of it is one of them."""
    if unresolved and all(u in AUTOCONF for u in unresolved) and text.count("%s") == len(unresolved):
        for name in unresolved:
            text = text.replace("%s", "\0" + AUTOCONF[name].replace("%s", "\1"), 1)
        return text.replace("\0", "").replace("\1", "%s")
    return text


def keep(level: str, text: str) -> bool:
    if level == "trace":
        return False
    if len(re.sub(r"[^A-Za-z]", "", nccl.literal_of(text[len(PREFIX):]))) < 6:
        return False  # "NET/OFI %s": nothing of its own to recognise the line by
    return level == "warn" or bool(_KEEP_INFO.search(text))


def collect(mined: dict[str, dict]) -> dict[tuple[str, str], nccl.Wording]:
    wordings: dict[tuple[str, str], nccl.Wording] = {}
    for tag, data in mined.items():
        for f in data["found"]:
            text = resolved(f["text"], f.get("unresolved", []))
            if keep(f["level"], text):
                w = wordings.setdefault((f["level"], text), nccl.Wording(f["level"], text))
                w.tags.add(tag)
                if (f["path"], f["line"]) not in w.sites[tag]:
                    w.sites[tag].append((f["path"], f["line"]))
    return wordings


OTHER = "other:"


def other_messages(kb: Path, component: str = COMPONENT) -> dict[str, tuple[list[str], str]]:
    """The catalogue's messages outside `component`: `other:<id>` -> (wordings, written pattern)."""
    out = {}
    for path in sorted(kb.glob("*.yaml")):
        if path.stem == component:
            continue
        for m in (yaml.safe_load(path.read_text()) or {}).get("messages", []):
            out[OTHER + m["id"]] = ([m["text"]] + [w["text"] for w in m.get("wording", [])], m["pattern"])
    return out


def assign_patterns(entries: list[dict], texts_of: dict[str, list[str]], kb: Path, component: str) -> tuple[list[str], list]:
    """Give every entry a pattern: a written one is kept while it still matches all its wordings, the
    others are generated distinct from each other and from every other component's messages (a
    plugin's or library's lines share the log with everyone's). Returns the ids whose written pattern
    had to be regenerated and the pairs no pattern can tell apart."""
    fixed, regenerated = {}, []
    for e in entries:
        if "pattern" in e and nccl._matches_all(e["pattern"], texts_of[e["id"]], e.get("case_sensitive", False), e.get("sample")):
            fixed[e["id"]] = e["pattern"]
        elif "pattern" in e:
            regenerated.append(e["id"])
            del e["pattern"]
    others = other_messages(kb, component)
    patterns, unresolved = nccl.distinct_patterns({**texts_of, **{k: v[0] for k, v in others.items()}},
                                                  {**fixed, **{k: v[1] for k, v in others.items()}})
    unresolved = [(a, b.removeprefix(OTHER)) for a, b in unresolved if not a.startswith(OTHER)]
    for e in entries:
        e.setdefault("pattern", patterns[e["id"]])
    return regenerated, unresolved


def load_existing(kb: Path) -> dict:
    path = kb / f"{COMPONENT}.yaml"
    return yaml.safe_load(path.read_text()) if path.exists() else {}


def build(args) -> int:
    repo, cache = Path(args.repo), Path(args.cache)
    tags = args.tags or release_tags(repo, args.lo, args.hi)
    versions = [tag_version(t) for t in tags]
    print(f"mining {len(tags)} tags: {', '.join(tags)}", file=sys.stderr)
    wordings = collect({t: mine_tag(repo, t, cache) for t in tags})
    existing = load_existing(Path(args.kb))
    by_text: dict[tuple[str, str], dict] = {}
    for m in existing.get("messages", []):
        for t in [m["text"]] + [w["text"] for w in m.get("wording", [])]:
            by_text[(m["level"], t)] = m
    groups = nccl.lineages(wordings, tags, {k: m["id"] for k, m in by_text.items()})

    newest = {t: i for i, t in enumerate(tags)}
    used_ids = {m["id"] for m in existing.get("messages", [])}
    entries, new_ids, kept_ids = [], [], set()
    texts_of: dict[str, list[str]] = {}
    for group in groups:
        group.sort(key=lambda w: -max(newest[t] for t in w.tags))
        main = group[0]
        last_tag = max(main.tags, key=lambda t: newest[t])
        old = next((by_text[w.key] for w in group if w.key in by_text), None)
        if old is not None:
            entry = {k: old[k] for k in nccl.HAND_FIELDS if k in old}
            kept_ids.add(entry["id"])
        else:
            entry = nccl.new_entry(COMPONENT, main.text[len(PREFIX):], used_ids)
            new_ids.append(entry["id"])
        entry["level"] = main.level
        entry["text"] = main.text
        entry["source"] = main.sites[last_tag][0][0]
        entry["versions"] = nccl.specifier({tag_version(t) for t in main.tags}, versions)
        entry["wording"] = [{"versions": nccl.specifier({tag_version(t) for t in w.tags}, versions), "text": w.text}
                            for w in group[1:]]
        texts_of[entry["id"]] = [w.text for w in group]
        entries.append(entry)
    regenerated, unresolved = assign_patterns(entries, texts_of, Path(args.kb), COMPONENT)
    unread = [e["id"] for e in entries if e["meaning"] == nccl.NEEDS_REVIEW]
    if args.skip_unread:  # the file keeps only messages a person has read; --report lists the others
        entries = [e for e in entries if e["meaning"] != nccl.NEEDS_REVIEW]
    orphans = [m for m in existing.get("messages", []) if m["id"] not in kept_ids]
    entries += orphans  # written by a person, no longer printed by a mined release: kept, reported

    entries.sort(key=lambda e: (e["source"], e["id"]))
    data = {
        "component": COMPONENT, "software": "aws-ofi-nccl", "title": TITLE,
        "mined_from": [{"artifact": f"aws/aws-ofi-nccl=={tag_version(t)} (tag {t}) src/ include/ (NCCL_OFI_WARN/INFO formats)",
                        "url": f"{REPO_URL}/tree/{t}"} for t in tags],
    }
    if existing.get("defaults"):
        data["defaults"] = existing["defaults"]
    data["messages"] = [{k: e[k] for k in nccl.FIELD_ORDER if k in e and e[k] not in ([], {}, None, "")} for e in entries]
    if not args.dry_run:
        Path(args.kb).mkdir(parents=True, exist_ok=True)
        (Path(args.kb) / f"{COMPONENT}.yaml").write_text(HEADER + nccl.dump(data))
    if args.report:
        levels = defaultdict(int)
        for m in data["messages"]:
            levels[m["level"]] += 1
        print(f"\n{len(data['messages'])} messages ({dict(levels)}); {len(new_ids)} new, {len(orphans)} no longer mined; "
              f"needs review: {sum(m.get('meaning') == nccl.NEEDS_REVIEW for m in data['messages'])}")
        nccl.report_entries(regenerated, unresolved, [o["id"] for o in orphans])
        if args.skip_unread:
            print(f"  {len(unread)} mined messages not yet read, left out (--skip-unread)")
    return 0


HEADER = ("# Mined by tools/mine/ofi_nccl.py from aws-ofi-nccl's sources at each release tag. Re-run it to refresh\n"
          "# text/source/versions/wording; what a person wrote (meaning, role, points_to, pattern, ...) is kept.\n")


def tag_miner_parser(doc: str, env: str, project: str, lo: str, hi: str) -> argparse.ArgumentParser:
    """The command line every tag miner shares (this one, libfabric_efa.py): the clone, the range of
    release tags, the kb folder and what to write or report."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=os.environ.get(env), required=env not in os.environ,
                    help=f"a git clone of {project} with its release tags (bare is fine); or ${env}")
    ap.add_argument("--from", dest="lo", default=lo, help="first release to mine (default: %(default)s)")
    ap.add_argument("--to", dest="hi", default=hi, help="last release to mine (default: %(default)s)")
    ap.add_argument("--tags", nargs="*", help="mine exactly these tags instead of a range")
    ap.add_argument("--kb", default=str(KB_MESSAGES), help="the kb/messages directory to refresh")
    ap.add_argument("--dry-run", action="store_true", help="write nothing")
    ap.add_argument("--skip-unread", action="store_true",
                    help="write only the messages whose meaning a person has written (new ones are listed, not added)")
    ap.add_argument("--report", action="store_true", help="print counts, new entries and what needs a person")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = tag_miner_parser(__doc__, "OFI_REPO", "github.com/aws/aws-ofi-nccl", "1.0.0", "1.21.1")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE), help="where tag extracts are kept, outside the repo")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    return build(args)


if __name__ == "__main__":
    sys.exit(main())
