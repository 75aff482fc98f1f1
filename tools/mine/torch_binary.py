"""Mine the torch catalogue's C++ messages (libtorch, gloo, c10) from the released wheels' strings.

    python tools/mine/torch_binary.py fetch [VERSION ...]      # download + keep strings (torch_wheels.py)
    python tools/mine/torch_binary.py mine [COMPONENT ...]     # update kb/messages/<component>.yaml
    python tools/mine/torch_binary.py discover KEY [--version V] [--window N]
                                                               # strings near a source file's name no spec covers
    python tools/mine/torch_binary.py where TEXT                # which cached releases hold a string

A C++ message is built at run time from pieces (`c10::str("[Rank ", rank_, "] ", "Watchdog caught
...")`, glog `<<` chains, fmt formats), so a binary holds its literal pieces, not the sentence.
tools/mine/torch_cpp.yaml (hand-written) lists, per message, each wording as its pieces joined by
`|`, runtime values as `{name}` pieces: `"[Rank |{rank}|] |Watchdog caught collective operation
timeout: |{work}| ran for |{ms}| milliseconds before timing out."`. A wording is in a release when
every literal piece of 4 or more characters is in that release's library strings; the miner turns
the releases that hold each wording into PEP 440 ranges and writes `text` (the newest wording,
pieces joined), `wording` (the others), `versions`, `source` and `level` into the catalogue entry
with the same id, keeping its hand-written fields (catalogue_io.py). `discover` prints the strings
of a translation unit (they sit together in .rodata) that no spec piece covers: new messages of a
new release show up there.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml  # noqa: E402

import catalogue_io  # noqa: E402
import torch_wheels  # noqa: E402

SPEC = Path(__file__).resolve().parent / "torch_cpp.yaml"
MIN_PIECE = 4  # `strings -n 4`
PLACEHOLDER = re.compile(r"^\{\w*\}$")
MANGLED = re.compile(r"^(?:_Z|_GLOBAL_|\*?N\d|\*?St\d|\*?ZN|\*?PF|\*?FS)")
SEP = re.compile(r"(?<!\\)\|")
# the libraries each component's messages are compiled into (named in mined_from)
COMPONENT_LIBS = {
    "c10d-nccl": ("libtorch_cuda.so",),
    "c10-cuda": ("libc10_cuda.so", "libc10.so", "libtorch_cuda.so"),
    "dataloader": ("libtorch_python.so",),
}


def pieces(wording: str) -> list[str]:
    return [p.replace("\\|", "|") for p in SEP.split(wording)]


def joined(wording: str) -> str:
    return "".join(p[1:] if p.startswith("~") else p for p in pieces(wording))


def literal_parts(wording: str) -> list[str]:
    """The pieces a binary must hold: literal pieces, split at line breaks, of at least MIN_PIECE chars.

    A piece written `~text` comes from another library torch calls (cudaGetErrorString's texts in
    libcudart): it is checked against EXTERNAL strings instead of torch's, and printed without the `~`.
    """
    out = []
    for piece in pieces(wording):
        if PLACEHOLDER.match(piece):
            continue
        if piece.startswith("~"):
            out.append(piece)
            continue
        out.extend(part for part in piece.split("\n") if len(part) >= MIN_PIECE)
    return out


EXTERNAL = Path(__file__).resolve().parent / "external.yaml"


@functools.lru_cache(maxsize=1)
def external_strings() -> set[str]:
    """Strings of the non-torch libraries named in tools/mine/external.yaml (cached under the cache dir)."""
    doc = yaml.safe_load(EXTERNAL.read_text(encoding="utf-8"))
    out: set[str] = set()
    for item in doc["artifacts"]:
        path = torch_wheels.DEFAULT_CACHE.parent / item["strings"]
        if not path.exists():
            raise SystemExit(f"{path} missing: run `python tools/mine/torch_binary.py fetch-external`")
        out.update(path.read_text(encoding="utf-8", errors="replace").splitlines())
    return out


def fetch_external() -> None:
    """Download the non-torch wheels of external.yaml and keep their strings."""
    import os
    import subprocess
    import tempfile
    import zipfile

    doc = yaml.safe_load(EXTERNAL.read_text(encoding="utf-8"))
    for item in doc["artifacts"]:
        dest = torch_wheels.DEFAULT_CACHE.parent / item["strings"]
        if dest.exists():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""}
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                            "--platform", "manylinux2014_x86_64", "--python-version", "3.11", "--index-url",
                            "https://pypi.org/simple", item["package"], "-d", tmp], check=True, env=env)
            wheel = next(Path(tmp).glob("*.whl"))
            with zipfile.ZipFile(wheel) as zf:
                lib = Path(zf.extract(item["member"], tmp))
            out = subprocess.run(["strings", "-n", "6", str(lib)], check=True, capture_output=True, text=True).stdout
            dest.write_text(out, encoding="utf-8")


class Release:
    """One release's library strings: exact lines, and the text-like lines for substring search."""

    def __init__(self, version: str, cache: Path):
        self.version = version
        lines: list[str] = []
        for path in sorted((cache / version).glob("*.strings.gz")):
            with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
                lines.extend(fh.read().split("\n"))
        kept = [line for line in lines if " " in line or not MANGLED.match(line)]
        del lines
        self.exact = set(kept)
        self.hay = "\n".join(kept)

    @functools.lru_cache(maxsize=None)
    def has(self, part: str) -> bool:
        if part.startswith("~"):
            return part[1:] in external_strings()
        return part in self.exact or part in self.hay

    def holds(self, wording: str) -> bool:
        parts = literal_parts(wording)
        return bool(parts) and all(self.has(p) for p in parts)


def load_spec(path: Path = SPEC) -> list[dict]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    return doc["messages"]


def _wordings(spec: dict) -> list[dict]:
    out = []
    for w in spec["wordings"]:
        out.append(w if isinstance(w, dict) else {"text": w})
    return out


def _before(version: str, since: str | None) -> bool:
    """A wording marked `since: X` (its pieces are all common words, found apart in older releases'
    strings, while its source shows it first in X) is never held by an older release."""
    return since is not None and catalogue_io.version_key(version) < catalogue_io.version_key(str(since))


def presence_of(cache: Path, versions: list[str], specs: list[dict]) -> dict[tuple[str, str], list[str]]:
    """(message id, wording) -> the releases holding it; one release in memory at a time (a few hundred MB)."""
    presence: dict[tuple[str, str], list[str]] = {}
    for v in versions:
        memo_path = cache / v / "holds.json"
        memo: dict[str, bool] = json.loads(memo_path.read_text()) if memo_path.exists() else {}
        todo = {w["text"] for spec in specs for w in _wordings(spec)} - set(memo)
        if todo:  # load the release's strings only for wordings not checked before
            release = Release(v, cache)
            memo.update({t: release.holds(t) for t in todo})
            del release
            memo_path.write_text(json.dumps(memo))
        for spec in specs:
            held = [w["text"] for w in _wordings(spec) if memo[w["text"]] and not _before(v, w.get("since"))]
            if held:
                # a newer wording often extends an older one (more pieces): the most specific one held wins
                best = max(held, key=lambda t: sum(len(p) for p in literal_parts(t)))
                presence.setdefault((spec["id"], best), []).append(v)
    return presence


def table(cache: Path, prefix: str) -> None:
    """Which releases hold each wording of the spec messages whose id starts with `prefix`."""
    versions = torch_wheels.mined_versions(cache)
    specs = [s for s in load_spec() if s["id"].startswith(prefix)]
    presence = presence_of(cache, versions, specs)
    print(" ".join(v.rsplit(".", 1)[0][-4:].rjust(4) for v in versions))
    for spec in specs:
        for w in _wordings(spec):
            have = presence.get((spec["id"], w["text"]), [])
            marks = " ".join(("x" if v in have else ".").rjust(4) for v in versions)
            missing = "" if have else "  MISSING " + str([p for p in literal_parts(w["text"])][:3])
            print(marks, " ", spec["id"], joined(w["text"])[:60].replace("\n", " ").replace("\t", " "), missing)


def mine(cache: Path, components: list[str] | None) -> int:
    versions = torch_wheels.mined_versions(cache)
    if not versions:
        raise SystemExit(f"no releases in {cache}: run `fetch` first")
    specs = load_spec()
    presence = presence_of(cache, versions, specs)
    by_component: dict[str, list[dict]] = {}
    for spec in specs:
        by_component.setdefault(spec["id"].split(".", 1)[0], []).append(spec)
    problems = 0
    for component, comp_specs in sorted(by_component.items()):
        if components and component not in components:
            continue
        doc = catalogue_io.load(component)
        if doc is None:
            print(f"{component}: no kb/messages/{component}.yaml yet; write the entries' hand fields first")
            problems += 1
            continue
        spec_of = {s["id"]: s for s in comp_specs}
        entries = []
        have_ids = {e["id"] for e in doc["messages"]}
        for missing in sorted(set(spec_of) - have_ids):
            print(f"  ! {missing}: in torch_cpp.yaml but not in kb/messages/{component}.yaml")
            problems += 1
        for entry in doc["messages"]:
            spec = spec_of.get(entry["id"])
            if spec is None:
                entries.append(entry)
                continue
            found = []
            for w in _wordings(spec):
                present = presence.get((spec["id"], w["text"]), [])
                if not literal_parts(w["text"]):
                    print(f"  ! {entry['id']}: wording has no literal piece of {MIN_PIECE}+ characters: {w['text'][:60]!r}")
                    problems += 1
                elif not present:
                    print(f"  ! {entry['id']}: no cached release holds this wording: {joined(w['text'])[:80]!r}")
                    problems += 1
                else:
                    found.append((w, present))
            if not found:
                entries.append(entry)
                continue
            # a release may hold several wordings' pieces (shared fragments): the newest-listed wins there
            covered = {v for _, present in found for v in present}
            gaps = [v for v in versions if v not in covered]
            newest_w, newest_present = max(found, key=lambda wp: (catalogue_io.version_key(wp[1][-1]), -_wordings(spec).index(wp[0])))
            entry = dict(entry)
            entry["text"] = joined(newest_w["text"])
            entry["source"] = newest_w.get("source", spec["source"])
            entry["level"] = spec["level"]
            entry["versions"] = catalogue_io.specifier(newest_present, versions)
            entry["wording"] = [
                {"versions": catalogue_io.specifier(present, versions), "text": joined(w["text"])}
                for w, present in sorted(found, key=lambda wp: catalogue_io.version_key(wp[1][0]))
                if w is not newest_w
            ]
            if gaps and spec.get("expect_gaps") is not True and gaps != versions:
                inner = [v for v in gaps if catalogue_io.version_key(v) > catalogue_io.version_key(min((p[0] for _, p in found), key=catalogue_io.version_key))
                         and catalogue_io.version_key(v) < catalogue_io.version_key(max((p[-1] for _, p in found), key=catalogue_io.version_key))]
                if inner:
                    print(f"  ? {entry['id']}: no wording found in {inner}")
            entries.append(entry)
        mined_from = [m for m in doc.get("mined_from", []) if "(strings)" not in m["artifact"] and "placeholder" not in m["artifact"]]
        for v in versions:
            names = COMPONENT_LIBS.get(component, ("libtorch_cpu.so",))
            if catalogue_io.version_key(v) < catalogue_io.version_key("2.0"):  # 1.x: the CUDA library was split
                names = tuple(n.replace("libtorch_cuda.so", "libtorch_cuda_cpp.so") for n in names)
            libs = ", ".join(f"torch/lib/{lib}" for lib in names)
            mined_from.append({
                "artifact": f"torch=={v} {torch_wheels.wheel_name(v, cache)}: {libs} (strings)",
                "url": torch_wheels.pypi_url(v),
            })
        catalogue_io.save(component, doc.get("software", "torch"), doc["title"], mined_from, entries)
        print(f"{component}: {len(comp_specs)} C++ messages over {len(versions)} releases")
    return problems


def discover(cache: Path, key: str, version: str | None, window: int, lib: str | None) -> None:
    """Strings around every occurrence of `key` (a source file name) that no spec piece covers."""
    versions = torch_wheels.mined_versions(cache)
    version = version or versions[-1]
    covered: set[str] = set()
    for spec in load_spec():
        for w in _wordings(spec):
            covered.update(literal_parts(w["text"]))
    for path in sorted((cache / version).glob(f"{lib or '*'}.strings.gz")):
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            lines = fh.read().split("\n")
        hits = [i for i, line in enumerate(lines) if key in line]
        shown: set[int] = set()
        for i in hits:
            shown.update(range(max(0, i - window), min(len(lines), i + window)))
        print(f"## {path.name}: {len(hits)} occurrences of {key!r}")
        for j in sorted(shown):
            line = lines[j]
            if MANGLED.match(line) or (" " not in line and len(line) > 40) or "INTERNAL ASSERT FAILED" in line:
                continue
            if any(part in line for part in covered if len(part) >= 8) or line in covered:
                continue
            print(f"{j}: {line}")


def where(cache: Path, texts: list[str]) -> None:
    """A table: which cached releases hold each string."""
    versions = torch_wheels.mined_versions(cache)
    rows = {t: [] for t in texts}
    for v in versions:
        r = Release(v, cache)
        for t in texts:
            rows[t].append("x" if r.has(t) else ".")
        del r
    print(" ".join(v.rsplit(".", 1)[0][-4:].rjust(4) for v in versions))
    for t, marks in rows.items():
        print(" ".join(m.rjust(4) for m in marks), " ", t[:90])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=torch_wheels.DEFAULT_CACHE)
    sub = parser.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch")
    f.add_argument("versions", nargs="*")
    m = sub.add_parser("mine")
    m.add_argument("components", nargs="*")
    d = sub.add_parser("discover")
    d.add_argument("key")
    d.add_argument("--version")
    d.add_argument("--window", type=int, default=300)
    d.add_argument("--lib")
    sub.add_parser("fetch-external")
    t = sub.add_parser("table")
    t.add_argument("prefix", nargs="?", default="")
    w = sub.add_parser("where")
    w.add_argument("texts", nargs="+")
    args = parser.parse_args(argv)
    if args.cmd == "fetch":
        for v in args.versions or torch_wheels.RELEASES:
            print(torch_wheels.fetch(v, args.cache))
        return 0
    if args.cmd == "discover":
        discover(args.cache, args.key, args.version, args.window, args.lib)
        return 0
    if args.cmd == "fetch-external":
        fetch_external()
        return 0
    if args.cmd == "table":
        table(args.cache, args.prefix)
        return 0
    if args.cmd == "where":
        where(args.cache, args.texts)
        return 0
    return 1 if mine(args.cache, args.components or None) else 0


if __name__ == "__main__":
    raise SystemExit(main())
