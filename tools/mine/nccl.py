"""Mine NCCL's messages into kb/messages/nccl-*.yaml (re-runnable; see tools/mine/README.md).

What it does, for every NCCL release tag in a range:
1. reads the library's sources at the tag (a local clone of github.com/NVIDIA/nccl) and lists every
   `WARN` format, the fact-carrying `INFO` formats (`KEEP_INFO`) and `ncclGetErrorString`'s texts,
   with file and line (tools/mine/nccl_source.py);
2. optionally checks each format against the released library: the `nvidia-nccl-cu12/-cu13` wheel
   of that version (`pip download --no-deps`, cached), whose read-only data must hold the format
   string; a message no shipped library holds is left out (compiled out for Linux/CUDA 12+);
3. follows each message across releases (a wording that disappears in one release and a similar one
   that appears in the same file are the same message, reworded), so each message gets one entry
   with its wordings by version (PEP 440 specifiers whose boundaries are releases actually read);
4. writes one YAML file per component, keeping what a person wrote in existing entries (`meaning`,
   `role`, `points_to`, `pattern`, `captures`, `event`, `sets`, `sample`, `examples`,
   `near_misses`, `case_sensitive`, `id`) and refreshing what is mined (`level`, `text`, `source`,
   `versions`, `wording`). New entries get a generated pattern, role `context` and a meaning that
   says it still needs reading (`NEEDS_REVIEW`); `--report` lists them.

Usage (from the repository root):
    python tools/mine/nccl.py --repo ~/src/nccl --from 2.4.2 --to 2.29.7 --binaries pinned
    python tools/mine/nccl.py --repo ~/src/nccl --tags v2.30.3-1 ... --dry-run --report
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import zipfile
from collections import defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nccl_source  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KB_MESSAGES = ROOT / "kb" / "messages"
DEFAULT_CACHE = Path(os.environ.get("NCCL_MINE_CACHE", Path.home() / ".cache" / "nccl-advisor" / "mine-nccl"))
REPO_URL = "https://github.com/NVIDIA/nccl"

# The NCCL each torch wheel on PyPI pins (Requires-Dist nvidia-nccl-cu12/-cu13==X of torch's METADATA,
# read with `pip install --dry-run --no-deps --report`): the releases that must be mined.
TORCH_PINS = {
    "2.0": "2.14.3",  # nvidia-nccl-cu11; torch 1.11 .. 1.13 link NCCL into the wheel (no wheel to pin)
    "2.1": "2.18.1", "2.2": "2.19.3", "2.3": "2.20.5", "2.4": "2.20.5", "2.5": "2.21.5", "2.6": "2.21.5",
    "2.7": "2.26.2", "2.8": "2.27.3", "2.9": "2.27.5", "2.10": "2.27.5", "2.11": "2.28.9", "2.12": "2.29.7",
    "2.13": "2.29.7",
}
CU13_FROM = (2, 28, 9)  # torch 2.11+ pins nvidia-nccl-cu13; earlier torch pins nvidia-nccl-cu12
CU12_FROM = (2, 18, 1)  # the first nvidia-nccl-cu12 on PyPI; older releases only as nvidia-nccl-cu11 (2.13.4 .. 2.16.5;
#                         torch 1.13/2.0 pin nvidia-nccl-cu11==2.14.3), and none at all before 2.13.4

# INFO lines worth a catalogue entry: they carry facts a diagnosis needs (interfaces and transports
# chosen, versions, ranks and sizes, settings taken from the environment), or they are the quiet
# half of a failure (a retry, a fallback, a plugin that was not found). Matched against the format.
KEEP_INFO = [
    r"^Bootstrap ?: Using", r"^NET/Socket ?: Using", r"^NET/IB ?: Using", r"^Using network ", r"^NET/IB ?: No device found",
    r"set by environment to ", r"^NCCL_SOCKET_IFNAME set to", r"^NCCL_IB_HCA set to", r"^NCCL_OOB_NET_IFNAME set to",
    r"- Init START$", r"- ?Init START$", r"- Init COMPLETE$", r"nNodes %d localRanks %d", r"COMPLETE$", r"- Abort START$",
    r"^Channel %02d.* via ", r"^CollNet %02d.* via COLLNET",
    r"^P2P is disabled between", r"^Could not enable P2P", r"^peer query failed", r"^P2P not supported between", r"^Legacy IPC not supported",
    r"^cudaDriverVersion", r"^%s:%d -> %d", r"Connection closed by localRank",
    r"connect (?:to %s )?returned %s, retrying", r"^Call to (?:connect|accept|socket|bind|listen) returned",
    r"^fallocate: Failed to extend", r"^mkstemp: Failed to create", r"cuMem host allocations do not appear",
    r"^Failed to open lib(?:ibverbs|mlx5)", r"^NET/Plugin", r"No plugin found", r"^Tuner: no plugin", r"Could not find:",
    r"^GPU Direct RDMA (?:Enabled|Disabled)", r"^NET/%s : GPU Direct RDMA", r"^NVLS multicast support is", r"^Failed to bind NVLink SHARP",
    r"^Failed to multicast-bind", r"less than CollNet node threshold", r"^Stack size limit", r"didn't receive a valid magic",
    r"Cuda failure", r"There are mismatched physical devices", r"^Call to ibv_modify_qp failed with %d %s, %s, retrying",
    r"^Using (?:NCCL_NET_DEVICE_UNPACK|non-device) net plugin", r"^Skipping %skernel %d which requires driver",
    r"^Continuing in spite of a RAS initialization error", r"^Profiler init failed", r"^External \w+ plugin %s is unsupported",
    r"^Failed to initialize NET plugin", r"^Topology detection", r"^Could not open XML topology file", r"^RAS collective %s:%ld timeout",
    r"^Invalid value %s for %s", r"^DMA-BUF is available", r"^Unable to use GIN", r"^NET/IB: %s: The error is not fatal",
    r"^NET/IB: %s: Got completion with error", r"CPUs with mixed", r"^Could not get speed from",
    r"^ncclMaxSharedMem %d exceeds device/fn maxSharedMem",
]
_KEEP_INFO = re.compile("|".join(f"(?:{p})" for p in KEEP_INFO))

SKIP_PATHS = re.compile(r"(?:^|/)(?:windows\.cc|os/windows)|/nvtx3/")

# The ncclGetErrorString switch also names the codes; torch prints the text, NCCL's own lines the number.
NCCL_RESULT_CODES = {
    "ncclSuccess": 0, "ncclUnhandledCudaError": 1, "ncclSystemError": 2, "ncclInternalError": 3,
    "ncclInvalidArgument": 4, "ncclInvalidUsage": 5, "ncclRemoteError": 6, "ncclInProgress": 7,
}

# File -> component. First match wins; the rest is nccl-misc.
COMPONENTS = [
    ("nccl-bootstrap", r"^src/bootstrap\.cc$|^src/include/bootstrap\.h$"),
    ("nccl-socket", r"^src/misc/socket\.cc$|^src/include/socket\.h$|^src/transport/net_socket\.cc$|^src/os/linux\.cc$"),
    ("nccl-ib", r"^src/transport/net_ib|^src/misc/(?:ibvwrap|ibvsymbols|mlx5dv\w*)\.cc$|^src/include/(?:ibv\w*|mlx5/.*)\.h$"),
    ("nccl-proxy", r"^src/proxy\.cc$|^src/include/proxy\.h$"),
    ("nccl-nvls", r"^src/transport/nvls\.cc$|^src/mnnvl\.cc$"),
    ("nccl-transport", r"^src/transport/|^src/transport\.cc$|^src/include/(?:transport|p2p|shm)\.h$|^src/misc/ipcsocket\.cc$"),
    ("nccl-enqueue", r"^src/(?:enqueue|group|collectives|ce_coll|sym_kernels|dev_runtime)\.cc$|^src/(?:register|scheduler|rma)/|^src/include/(?:enqueue|group|collectives)\.h$"),
    ("nccl-init", r"^src/init\.cc$|^src/init_nvtx\.cc$|^src/channel\.cc$|^src/misc/argcheck\.cc$|^src/include/(?:argcheck|comm|channel)\.h$|^src/mem_manager\.cc$"),
    ("nccl-graph", r"^src/graph/"),
    ("nccl-plugin", r"^src/plugin/|^src/net\.cc$|^src/misc/(?:tuner|profiler)\.cc$|^src/include/plugin/"),
    ("nccl-ras", r"^src/ras/"),
    ("nccl-misc", r""),
]
TITLES = {
    "nccl-errors": "NCCL: result codes and ncclGetErrorString texts (src/init.cc, src/nccl.h.in)",
    "nccl-init": "NCCL: communicator init, config and argument checks (src/init.cc, src/misc/argcheck.cc, src/channel.cc)",
    "nccl-bootstrap": "NCCL: bootstrap network and out-of-band exchange (src/bootstrap.cc)",
    "nccl-socket": "NCCL: sockets, interface selection and the socket transport (src/misc/socket.cc, src/transport/net_socket.cc)",
    "nccl-ib": "NCCL: InfiniBand / RoCE verbs transport (src/transport/net_ib*, src/misc/ibvwrap.cc)",
    "nccl-proxy": "NCCL: proxy threads and the proxy service (src/proxy.cc)",
    "nccl-transport": "NCCL: P2P, SHM, NET and CollNet transports (src/transport/*.cc, src/transport.cc)",
    "nccl-nvls": "NCCL: NVLink SHARP (NVLS) and multi-node NVLink (src/transport/nvls.cc, src/mnnvl.cc)",
    "nccl-enqueue": "NCCL: launching collectives, groups and buffer registration (src/enqueue.cc, src/group.cc, src/register)",
    "nccl-graph": "NCCL: topology detection, XML topology and graph search (src/graph/*)",
    "nccl-plugin": "NCCL: network, tuner, profiler and env plugins (src/plugin/*, src/net.cc)",
    "nccl-ras": "NCCL: the RAS (reliability, availability, serviceability) subsystem (src/ras/*)",
    "nccl-misc": "NCCL: CUDA/NVML wrappers, shared memory, allocation, parameters and utilities (src/misc/*, src/include/*)",
}

NEEDS_REVIEW = "NEEDS REVIEW: mined, not yet read in context."
HAND_FIELDS = ("id", "meaning", "role", "points_to", "pattern", "case_sensitive", "captures", "sets", "event",
               "sample", "examples", "near_misses")
FIELD_ORDER = ("id", "level", "text", "source", "versions", "wording", "pattern", "case_sensitive", "meaning", "role",
               "points_to", "captures", "event", "sets", "sample", "examples", "near_misses")


# --- versions -------------------------------------------------------------------------------------

def vkey(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def tag_version(tag: str) -> str:
    return re.match(r"v(\d+\.\d+\.\d+)", tag).group(1)


def release_tags(repo: Path, lo: str, hi: str) -> list[str]:
    tags = [t for t in nccl_source.git(repo, "tag", "--list", "v2.*").split() if re.fullmatch(r"v\d+\.\d+\.\d+-1", t)]
    tags = [t for t in tags if vkey(lo) <= vkey(tag_version(t)) <= vkey(hi)]
    return sorted(tags, key=lambda t: vkey(tag_version(t)))


def specifier(present: set[str], mined: list[str]) -> str:
    """The PEP 440 specifier, over the mined releases, of the releases in `present` ('' = all)."""
    flags = [v in present for v in mined]
    if all(flags):
        return ""
    first = flags.index(True)
    last = len(flags) - 1 - flags[::-1].index(True)
    parts = []
    if first > 0:
        parts.append(f">={mined[first]}")
    if last < len(mined) - 1:
        parts.append(f"<{mined[last + 1]}")
    parts += [f"!={mined[i]}" for i in range(first, last + 1) if not flags[i]]
    return ",".join(parts)


# --- step 1: the sources --------------------------------------------------------------------------

def component_of(path: str) -> str:
    for name, rx in COMPONENTS:
        if re.search(rx, path):
            return name
    return "nccl-misc"


def mine_tag(repo: Path, tag: str, cache: Path) -> dict:
    """Every logged format at a tag, cached as JSON (the sources at a tag never change)."""
    out = cache / "src" / f"{tag}.json"
    if out.exists():
        return json.loads(out.read_text())
    files = nccl_source.tag_files(repo, tag)
    found, _ = nccl_source.extract(files)
    init = files.get("src/init.cc", "")
    data = {
        "tag": tag,
        "found": [f.__dict__ for f in found if not SKIP_PATHS.search(f.path)],
        "errors": nccl_source.error_strings(init),
        "version_string": 'VERSION_STRING "NCCL version "' in init or "#define VERSION_STRING \"NCCL version \"" in init,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data))
    return data


# --- step 2: the released binaries ----------------------------------------------------------------

def wheel_name(version: str) -> str:
    if vkey(version) >= CU13_FROM:
        return "nvidia-nccl-cu13==" + version
    return ("nvidia-nccl-cu12" if vkey(version) >= CU12_FROM else "nvidia-nccl-cu11") + "==" + version


def binary_strings(version: str, cache: Path, download: bool) -> set[str] | None:
    """The NUL-terminated strings of libnccl.so.2's .rodata for a release (None if not available)."""
    out = cache / "rodata" / f"{version}.txt"
    if out.exists():
        return set(out.read_text().split("\0"))
    if not download:
        return None
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    spec = wheel_name(version)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(wheels),
           "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_18_x86_64", "--platform", "manylinux1_x86_64",
           "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux_2_28_x86_64", spec]
    if subprocess.run(cmd, capture_output=True).returncode != 0:
        print(f"  no wheel for {spec}", file=sys.stderr)
        return None
    name = spec.split("==")[0].replace("-", "_") + "-" + version + "-"
    wheel = next((w for w in sorted(wheels.glob("*.whl")) if w.name.startswith(name)), None)
    if wheel is None:
        return None
    lib = cache / "rodata" / f"{version}.so"
    lib.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        member = next(n for n in z.namelist() if n.endswith("/libnccl.so.2"))
        lib.write_bytes(z.read(member))
    rodata = lib.with_suffix(".rodata")
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.rodata", str(lib), str(rodata)], check=True)
    strings = {s.decode("utf-8", "replace") for s in rodata.read_bytes().split(b"\0") if s}
    out.write_text("\0".join(sorted(strings)))
    lib.unlink()
    rodata.unlink()
    wheel.unlink()  # the strings are all we keep
    return strings


def in_binary(text: str, blob: str) -> bool:
    """A format is in the library when a string of .rodata is it or ends with it (the linker merges
    a string into the tail of a longer one)."""
    return (text + "\0") in blob


# --- step 3: messages across releases -------------------------------------------------------------

class Wording:
    def __init__(self, level: str, text: str):
        self.level, self.text = level, text
        self.tags: set[str] = set()
        self.sites: dict[str, list[tuple[str, int]]] = defaultdict(list)  # tag -> [(path, line)]
        self.in_binary: dict[str, bool] = {}

    @property
    def key(self) -> tuple[str, str]:
        return (self.level, self.text)


def literal_of(text: str) -> str:
    return nccl_source_placeholder.sub(" ", text)


nccl_source_placeholder = re.compile(r"%%|%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcspn]")


# Formats without words that are still worth an entry: NCCL's error trail (each function an error
# passes through prints "file.cc:123 -> 2"; the number is the ncclResult_t).
KEEP_BARE = {"%s:%d -> %d", "%s:%d -> %d (%s)"}


def keep(level: str, text: str) -> bool:
    if level == "trace":
        return False
    if text in KEEP_BARE:
        return level == "info"
    literal = re.sub(r"[^A-Za-z]", "", literal_of(text))
    if len(literal) < 6:
        return False  # "%s", "%s: %s": nothing to recognise the line by
    if level == "info":
        return bool(_KEEP_INFO.search(text))
    return True


def collect(mined: dict[str, dict], binaries: dict[str, str]) -> dict[tuple[str, str], Wording]:
    wordings: dict[tuple[str, str], Wording] = {}

    def add(level: str, text: str, tag: str, path: str, line: int) -> None:
        w = wordings.setdefault((level, text), Wording(level, text))
        w.tags.add(tag)
        if (path, line) not in w.sites[tag]:
            w.sites[tag].append((path, line))

    for tag, data in mined.items():
        for f in data["found"]:
            if keep(f["level"], f["text"]):
                add(f["level"], f["text"], tag, f["path"], f["line"])
        for code, text, line in data["errors"]:
            if code != "ncclSuccess":
                add("error", text, tag, "src/init.cc", line)
        if data.get("version_string"):
            add("info", "NCCL version %d.%d.%d+cuda%d.%d", tag, "src/init.cc", 0)
    for w in wordings.values():
        for tag in w.tags:
            blob = binaries.get(tag_version(tag))
            if blob is not None:
                probe = w.text if w.level != "info" or not w.text.startswith("NCCL version %d") else "NCCL version "
                w.in_binary[tag] = in_binary(probe, blob) or (probe == "NCCL version " and probe in blob)
    return wordings


def shipped(w: Wording) -> bool:
    """False when every release with a library to read lacks the format (compiled out for the
    wheels: another OS, an old CUDA, dead code)."""
    checked = list(w.in_binary.values())
    return not checked or any(checked)


def _called(text: str) -> str | None:
    m = re.search(r"Call to (\w+)", text)
    return m.group(1) if m else None


def lineages(wordings: dict[tuple[str, str], Wording], tags: list[str],
             entry_of: dict[tuple[str, str], str] | None = None) -> list[list[Wording]]:
    """Group wordings into messages: a wording that disappears in a release and one that appears in
    the same release, in the same file (or component) and alike, are one message reworded.
    `entry_of` ((level, text) -> catalogue id) keeps apart two wordings the catalogue already holds
    in two entries (a person split them, or an earlier range did)."""
    entry_of = entry_of or {}
    parent: dict[tuple[str, str], tuple[str, str]] = {k: k for k in wordings}

    def find(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    def paths(w: Wording, tag: str) -> set[str]:
        return {p for p, _ in w.sites.get(tag, [])}

    for prev, cur in zip(tags, tags[1:]):
        gone = [w for w in wordings.values() if prev in w.tags and cur not in w.tags]
        new = [w for w in wordings.values() if cur in w.tags and prev not in w.tags]
        pairs = []
        for n in new:
            for g in gone:
                if n.level != g.level or n.tags & g.tags:
                    continue  # wordings printed side by side in some release are two messages
                if _called(n.text) != _called(g.text):
                    continue  # "Call to ibv_reg_mr failed" and "Call to ibv_dereg_mr failed" are two messages
                if entry_of.get(n.key, entry_of.get(g.key)) != entry_of.get(g.key, entry_of.get(n.key)):
                    continue  # two entries of the catalogue
                same_file = bool(paths(n, cur) & paths(g, prev))
                same_comp = {component_of(p) for p in paths(n, cur)} & {component_of(p) for p in paths(g, prev)}
                if not (same_file or same_comp):
                    continue
                ratio = difflib.SequenceMatcher(None, g.text, n.text, autojunk=False).ratio()
                # a wording that grew a tail in the same file ("unhandled cuda error" -> "unhandled cuda error
                # (run with NCCL_DEBUG=INFO for details)") is the same message, however short the old one
                extended = same_file and len(literal_of(min(g.text, n.text, key=len)).strip()) >= 8 and (
                    n.text.startswith(g.text) or g.text.startswith(n.text))
                if ratio >= (0.72 if same_file else 0.88) or extended:
                    same_lead = g.text.split("%", 1)[0] == n.text.split("%", 1)[0]
                    pairs.append(((same_file, same_lead, ratio), g, n))
        used_g, used_n = set(), set()
        # the same file first, then the same words up to the first value, then the most alike
        for _, g, n in sorted(pairs, key=lambda x: x[0], reverse=True):
            if g.key in used_g or n.key in used_n:
                continue
            used_g.add(g.key)
            used_n.add(n.key)
            parent[find(n.key)] = find(g.key)
    groups: dict[tuple[str, str], list[Wording]] = defaultdict(list)
    for k, w in wordings.items():
        groups[find(k)].append(w)
    return list(groups.values())


# --- step 4: patterns -----------------------------------------------------------------------------

_RE_SPECIAL = set("\\.^$|?*+()[]{}")


def _escape(literal: str) -> str:
    return "".join("\\" + c if c in _RE_SPECIAL else c for c in literal.replace("\n", " ").replace("\t", " "))


def _segments(text: str) -> list[tuple[str, str]]:
    """('lit', text) and ('ph', conversion) pieces of a format."""
    out, pos = [], 0
    for m in nccl_source_placeholder.finditer(text):
        if m.start() > pos:
            out.append(("lit", text[pos:m.start()]))
        out.append(("lit", "%") if m.group(0) == "%%" else ("ph", m.group(0)[-1]))
        pos = m.end()
    if pos < len(text):
        out.append(("lit", text[pos:]))
    return out


def _ph_regex(conv: str) -> str:
    return r"[^\n]*?" if conv == "s" else r"\S*"


def wording_pattern(text: str, min_literal: int = 24, extra: int = 0) -> str:
    """A literal-led pattern for one wording: from its first distinctive literal, enough pieces to
    hold `min_literal` literal characters (plus `extra` more pieces when that is not specific)."""
    segs = _segments(text)
    start = next((i for i, (k, v) in enumerate(segs) if k == "lit" and len(re.sub(r"[^A-Za-z]", "", v)) >= 3), None)
    if start is None:
        return _escape(text)
    out, lit_len, i = [], 0, start
    first = segs[start][1]
    first = first[re.search(r"[A-Za-z]", first).start():] if start > 0 or not first[:1].isalpha() else first
    pieces = [("lit", first)] + segs[start + 1:]
    taken = 0
    for k, v in pieces:
        if lit_len >= min_literal and k == "ph":
            if extra <= 0:
                break
            extra -= 1
        if k == "lit":
            out.append(_escape(v))
            lit_len += len(v.strip())
        else:
            out.append(_ph_regex(v))
        taken += 1
    while out and out[-1] in (r"[^\n]*?", r"\S*"):
        out.pop()
    pattern = "".join(out).rstrip()
    return pattern


def distinct_patterns(groups: dict[str, list[str]], fixed: dict[str, str]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """A pattern per message (id -> wordings) that matches none of the other messages' wordings:
    start short, add pieces while it claims another message's line. `fixed` patterns (written by
    a person) are kept as they are. Returns the patterns and the pairs no pattern can tell apart."""
    from advisor.catalogue import render
    from advisor.regex import compile_pattern

    rendered = {mid: [render(t) for t in texts] for mid, texts in groups.items()}
    lowered = {mid: [re.sub(r"\s+", " ", r.lower()) for r in rs] for mid, rs in rendered.items()}
    patterns, unresolved = {}, []
    for mid, texts in groups.items():
        if mid in fixed:
            patterns[mid] = fixed[mid]
            continue
        literal = literal_pattern(texts, [r for other, rs in lowered.items() if other != mid for r in rs])
        if literal is not None:
            patterns[mid] = literal
            continue
        longest = max(len(_segments(t)) for t in texts)
        for extra in range(0, longest + 1):
            p = message_pattern(texts, extra=extra)
            rx = compile_pattern(p, True)
            clash = [other for other, rs in rendered.items() if other != mid and any(rx.search(r) for r in rs)]
            if not clash:
                break
        patterns[mid] = p
        unresolved += [(mid, other) for other in clash]
    return patterns, unresolved


MIN_LITERAL = 14
"""the shortest literal that may stand alone as a message's pattern (shorter ones are too common)."""
MAX_LITERAL = 48


DISTINCT_LITERAL = 26
"""a literal of plain words must be at least this long; shorter ones need a technical token."""
_TECHNICAL = re.compile(r"[A-Z]{2,}|[a-z][A-Z]|[_/=<>()\[\]#]|\w\.\w|\d|\w:")


def literal_pattern(texts: list[str], others: list[str]) -> str | None:
    """The cheapest pattern for the scanner: a run of whole words of the message, at least
    MIN_LITERAL characters, found in every wording and in no other message's line. Few spaces
    (each space also matches a line break, which costs the scanner's automaton): the message's own
    start when it qualifies with at most four, else the run with the fewest, earliest and shortest
    first. None when no run qualifies."""
    spans = []
    for k, piece in enumerate(p for kind, p in _segments(texts[0]) if kind == "lit"):
        words = [(m.start(), m.end()) for m in re.finditer(r"\S+", piece)]
        for i in range(len(words)):
            for j in range(i, min(i + 4, len(words))):
                lit = piece[words[i][0]:words[j][1]]
                if len(lit) < MIN_LITERAL or len(lit) > MAX_LITERAL or len(re.sub(r"[^A-Za-z]", "", lit)) < 6:
                    continue
                if len(lit) < DISTINCT_LITERAL and not _TECHNICAL.search(lit):
                    continue  # "is not available": plain words that other software prints too
                spaces = len(re.findall(r"\s+", lit))
                leading = k == 0 and i == 0
                spans.append((spaces > (4 if leading else 3), not leading, spaces, k, words[i][0], len(lit), lit))
    rendered = [render_lower(t) for t in texts]
    for *_, lit in sorted(spans):
        low = re.sub(r"\s+", " ", lit.lower())
        if all(low in re.sub(r"\s+", " ", r) for r in rendered) and not any(low in o for o in others):
            return _escape(lit)
    return None


def render_lower(text: str) -> str:
    from advisor.catalogue import render

    return render(text).lower()


def _matches_all(pattern: str, texts: list[str], case_sensitive: bool, sample: str | None = None) -> bool:
    """Whether a written pattern still matches every wording (the first one through its `sample`
    when the entry has one, as `advisor kb check` does)."""
    from advisor.catalogue import render
    from advisor.regex import PatternError, compile_pattern

    try:
        rx = compile_pattern(pattern, not case_sensitive)
    except PatternError:
        return False
    printed = [sample if sample is not None else render(texts[0])] + [render(t) for t in texts[1:]]
    return all(rx.search(t) for t in printed)


def message_pattern(texts: list[str], extra: int = 0) -> str:
    pats = []
    for t in texts:
        p = wording_pattern(t, extra=extra)
        if p not in pats:
            pats.append(p)
    # one wording's pattern may already match the others
    from advisor.catalogue import render
    from advisor.regex import compile_pattern

    for p in pats:
        rx = compile_pattern(p, True)
        if all(rx.search(render(t)) for t in texts):
            return p
    merged = pats[0]
    for p in pats[1:]:
        merged = _merge_spaces(merged, p) if merged is not None else None
    if merged is not None:
        return merged
    return "(?:" + "|".join(pats) + ")"


def _merge_spaces(a: str, b: str) -> str | None:
    """One pattern for two that differ only by spaces ("NET/IB : x" and "NET/IB: x" -> "NET/IB ?: x")."""
    if a.replace(" ?", "").replace(" ", "") != b.replace(" ", ""):
        return None
    out, i, j = [], 0, 0
    while i < len(a) or j < len(b):
        if a.startswith(" ?", i):
            out.append(" ?")
            i += 2
            if j < len(b) and b[j] == " ":
                j += 1
        elif i < len(a) and j < len(b) and a[i] == b[j]:
            out.append(a[i])
            i += 1
            j += 1
        elif i < len(a) and a[i] == " ":
            out.append(" ?")
            i += 1
        elif j < len(b) and b[j] == " ":
            out.append(" ?")
            j += 1
        else:
            return None
    return "".join(out)


# --- step 5: ids and YAML -------------------------------------------------------------------------

def slug(text: str) -> str:
    words = re.findall(r"[A-Za-z][A-Za-z0-9]*", literal_of(text))
    stop = {"a", "an", "the", "to", "of", "for", "and", "is", "in", "on", "with", "by", "at", "be", "was", "from"}
    words = [w.lower() for w in words if w.lower() not in stop] or ["message"]
    return "-".join(words[:7])


def load_existing(kb: Path) -> dict[str, dict]:
    files = {}
    for path in sorted(kb.glob("nccl-*.yaml")):
        files[path.stem] = yaml.safe_load(path.read_text())
    return files


class Dumper(yaml.SafeDumper):
    pass


def _str_presenter(dumper, data):
    style = "|" if "\n" in data and len(data) > 100 and not data.startswith(" ") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


Dumper.add_representer(str, _str_presenter)


class FlowMap(dict):
    """A mapping written on one line (`{cause: x, weight: 1.5}`), as people write `defaults` and `sets`."""


Dumper.add_representer(FlowMap, lambda dumper, data: dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True))

DEFAULTS_COMMENT = "  # what a warning or error of this component hints at when its entry says no more"


def dump(data: dict) -> str:
    data = dict(data)
    if data.get("defaults"):
        data["defaults"] = [FlowMap(d) for d in data["defaults"]]
    if data.get("messages"):
        data["messages"] = [{**m, "sets": FlowMap(m["sets"])} if isinstance(m.get("sets"), dict) else m for m in data["messages"]]
    text = yaml.dump(data, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=120, default_flow_style=False)
    return text.replace("\ndefaults:\n", "\ndefaults:" + DEFAULTS_COMMENT + "\n", 1)


def build(args) -> int:
    repo = Path(args.repo)
    cache = Path(args.cache)
    tags = args.tags or release_tags(repo, args.lo, args.hi)
    mined_versions = [tag_version(t) for t in tags]
    print(f"mining {len(tags)} tags: {', '.join(mined_versions)}", file=sys.stderr)
    mined = {t: mine_tag(repo, t, cache) for t in tags}

    want_bins: list[str] = []
    if args.binaries == "pinned":
        want_bins = sorted({v for v in TORCH_PINS.values() if v in mined_versions}, key=vkey)
    elif args.binaries == "all":
        want_bins = mined_versions
    binaries: dict[str, str] = {}
    for v in want_bins:
        s = binary_strings(v, cache, download=not args.no_download)
        if s is not None:
            binaries[v] = "\0".join(sorted(s)) + "\0"
    print(f"released libraries read: {', '.join(binaries) or 'none'}", file=sys.stderr)

    wordings = collect(mined, binaries)
    dropped = [w for w in wordings.values() if not shipped(w)]
    for w in dropped:
        del wordings[w.key]
    existing = load_existing(Path(args.kb))
    by_text: dict[tuple[str, str], tuple[str, dict]] = {}
    for comp, data in existing.items():
        for m in data.get("messages", []):
            for t in [m["text"]] + [w["text"] for w in m.get("wording", [])]:
                by_text[(m["level"], t)] = (comp, m)
    groups = lineages(wordings, tags, {k: m["id"] for k, (_, m) in by_text.items()})

    newest = {t: i for i, t in enumerate(tags)}
    out_files: dict[str, list[dict]] = defaultdict(list)
    used_ids: set[str] = {m["id"] for d in existing.values() for m in d.get("messages", [])}
    new_ids, kept_ids = [], set()
    texts_of: dict[str, list[str]] = {}
    regenerated: list[str] = []
    fixed: dict[str, str] = {}
    for group in groups:
        group.sort(key=lambda w: -max(newest[t] for t in w.tags))
        main = group[0]
        last_tag = max(main.tags, key=lambda t: newest[t])
        path = main.sites[last_tag][0][0]
        comp = "nccl-errors" if main.level == "error" else component_of(path)
        old = next((by_text[w.key] for w in group if w.key in by_text), None)
        entry: dict = {}
        if old is not None:
            comp = old[1]["id"].split(".", 1)[0]
            entry = {k: old[1][k] for k in HAND_FIELDS if k in old[1]}
            kept_ids.add(entry["id"])
        else:
            entry = new_entry(comp, main.text, used_ids)
            new_ids.append(entry["id"])
        entry["level"] = main.level
        entry["text"] = main.text
        entry["source"] = path
        entry["versions"] = specifier({tag_version(t) for t in main.tags}, mined_versions)
        others = sorted(group[1:], key=lambda w: -max(newest[t] for t in w.tags))
        entry["wording"] = [{"versions": specifier({tag_version(t) for t in w.tags}, mined_versions), "text": w.text} for w in others]
        texts_of[entry["id"]] = [w.text for w in group]
        if "pattern" in entry and _matches_all(entry["pattern"], texts_of[entry["id"]], entry.get("case_sensitive", False),
                                               entry.get("sample")):
            fixed[entry["id"]] = entry["pattern"]
        elif "pattern" in entry:
            regenerated.append(entry["id"])  # a release brought a wording the written pattern misses
            del entry["pattern"]
        out_files[comp].append({k: entry[k] for k in FIELD_ORDER if k in entry and entry[k] not in ([], {}, None, "")})
    patterns, unresolved = distinct_patterns(texts_of, fixed)
    for entries in out_files.values():
        for e in entries:
            e.setdefault("pattern", patterns[e["id"]])
    # entries a person wrote that no mined release prints any more are kept, flagged in the report
    orphans = []
    for comp, data in existing.items():
        for m in data.get("messages", []):
            if m["id"] not in kept_ids:
                orphans.append(m["id"])
                out_files[comp].append(m)

    mined_from = [{"artifact": f"NVIDIA/nccl {t} src/ (WARN/INFO formats, ncclGetErrorString)", "url": f"{REPO_URL}/tree/{t}/src"}
                  for t in tags]
    mined_from += [{"artifact": f"{wheel_name(v)} libnccl.so.2 (.rodata strings)",
                    "url": f"https://pypi.org/project/{wheel_name(v).split('==')[0]}/{v}/"} for v in binaries]
    written = {}
    for comp, entries in sorted(out_files.items()):
        entries.sort(key=lambda e: (e["source"], e["id"]))
        ordered = [{k: e[k] for k in FIELD_ORDER if k in e} for e in entries]
        data = {"component": comp, "software": "nccl", "title": TITLES[comp], "mined_from": mined_from}
        if (existing.get(comp) or {}).get("defaults"):  # hand-written: what the component's warnings hint at
            data["defaults"] = existing[comp]["defaults"]
        data["messages"] = ordered
        written[comp] = data
        if not args.dry_run:
            Path(args.kb).mkdir(parents=True, exist_ok=True)
            (Path(args.kb) / f"{comp}.yaml").write_text(HEADER + dump(data))

    if args.sites:
        sites = {}
        for group in groups:
            for w in group:
                sites[w.text] = {t: w.sites[t] for t in sorted(w.tags, key=lambda t: newest[t])}
        Path(args.sites).write_text(json.dumps(sites, indent=1))
    if args.report:
        total = sum(len(v["messages"]) for v in written.values())
        print(f"\n{total} messages in {len(written)} files; {len(new_ids)} new, {len(orphans)} no longer mined; "
              f"{len(dropped)} wordings dropped (in no shipped library)")
        for comp, data in written.items():
            ms = data["messages"]
            levels = defaultdict(int)
            for m in ms:
                levels[m["level"]] += 1
            review = sum(m.get("meaning") == NEEDS_REVIEW for m in ms)
            print(f"  {comp:16s} {len(ms):4d}  {dict(levels)}  needs review: {review}")
        for d in dropped:
            print(f"  dropped: {d.level} {d.text[:100]!r} ({', '.join(sorted({p for s in d.sites.values() for p, _ in s}))})")
        report_entries(regenerated, unresolved, orphans)
    return 0


def new_entry(component: str, text: str, used_ids: set[str]) -> dict:
    """A fresh entry for a mined message: an id from its words (unique among `used_ids`, which it
    joins), role context and a meaning that says a person has yet to read it."""
    base = f"{component}.{slug(text)}"
    mid, n = base, 2
    while mid in used_ids:
        mid, n = f"{base}-{n}", n + 1
    used_ids.add(mid)
    return {"id": mid, "meaning": NEEDS_REVIEW, "role": "context"}


def report_entries(regenerated: list[str], unresolved: list[tuple[str, str]], orphans: list[str]) -> None:
    """What a re-run needs a person for: patterns rebuilt, patterns that cannot be told apart, and
    entries no mined release prints any more."""
    for r in regenerated:
        print(f"  pattern regenerated (it missed a wording): {r}")
    for a, b in unresolved:
        print(f"  pattern of {a} also matches {b}'s wording")
    for o in orphans:
        print(f"  no longer mined: {o}")


HEADER = ("# Mined by tools/mine/nccl.py from NCCL's sources at each release tag and the released libnccl.so.2\n"
          "# strings. Re-run it to refresh text/source/versions/wording; what a person wrote (meaning, role,\n"
          "# points_to, pattern, captures, event, examples, near_misses) is kept. Comments are not kept.\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", default=os.environ.get("NCCL_REPO"), required="NCCL_REPO" not in os.environ,
                    help="a git clone of github.com/NVIDIA/nccl with its release tags (bare is fine); or $NCCL_REPO")
    ap.add_argument("--from", dest="lo", default="2.4.2",
                    help="first NCCL release to mine (default: 2.4.2; torch 1.x built with 2.4 .. 2.10, and "
                         "public threads still paste logs of those releases)")
    ap.add_argument("--to", dest="hi", default="2.29.7", help="last NCCL release to mine (default: what torch 2.13 pins)")
    ap.add_argument("--tags", nargs="*", help="mine exactly these tags instead of a range")
    ap.add_argument("--binaries", choices=("none", "pinned", "all"), default="all",
                    help="which releases' wheels to read the library strings of (default: every mined one on PyPI)")
    ap.add_argument("--no-download", action="store_true", help="use only libraries already in the cache")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE),
                    help="where tag extracts and library strings are kept, outside the repo (default %(default)s or $NCCL_MINE_CACHE)")
    ap.add_argument("--kb", default=str(KB_MESSAGES), help="the kb/messages directory to refresh")
    ap.add_argument("--dry-run", action="store_true", help="write nothing")
    ap.add_argument("--report", action="store_true", help="print counts, new entries, dropped wordings")
    ap.add_argument("--sites", help="write every wording's file:line per tag to this JSON file")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    return build(args)


if __name__ == "__main__":
    sys.exit(main())
