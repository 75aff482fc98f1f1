"""Mine NCCL's release notes into kb/releases/nccl.yaml: every fix each release names.

NCCL writes its release notes into the commit that carries a release (the tag vX.Y.Z-N; from 2.29.7
the tag is a merge and the notes sit in a commit inside it). For each release this reads the message
of every commit since the previous release tag, keeps the items that start with "Fix" (wrapped lines
joined, "* " sub-items as their own items), and tags each with what it is about, so the advisor can
say which fixes shipped after the NCCL a log was printed by, in the part of NCCL that failed there:
- `kinds`: hang, crash, corruption, error, leak, perf (by the words the item uses);
- `areas`: the NCCL part it names (ib, socket, bootstrap, proxy, shm, p2p, nvls, collnet, ras, init,
  abort, cumem, mnnvl, plugin, topology, uds, alltoall, split, registration, profiler), and
  `platform` when it names one GPU, NIC or CPU model;
- `issues`: the GitHub issues and pull requests it cites.
The text is NCCL's own (a release note is a fact the user should read as NVIDIA wrote it, like a
message text); everything else is derived here. Re-run it after a new NCCL release.

Usage:  .venv/bin/python tools/mine/nccl_releases.py --repo ~/src/nccl.git [--dry-run]
        (the repo: `git clone --bare https://github.com/NVIDIA/nccl`)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "kb" / "releases" / "nccl.yaml"

_TAG = re.compile(r"v(\d+)\.(\d+)\.(\d+)-(\d+)")
_BULLET = re.compile(r"^(\s*)(?:[-*]\s+)?(.*)$")
_FIX = re.compile(r"^Fix(?:es|ed)?\b")

KINDS = {
    "hang": re.compile(r"\b(?:hang|hangs|hung|deadlock|stuck|freez)", re.I),
    "crash": re.compile(r"\b(?:crash|segfault|segmentation|abort(?:s|ed)? when|assert|SIGSEGV|double free|use[- ]after[- ]free)", re.I),
    "corruption": re.compile(r"\b(?:corrupt|wrong result|incorrect result|data mismatch|wrong data|invalid results?)", re.I),
    "error": re.compile(r"\b(?:error|fail|failure|fails|failed|invalid usage|unhandled)", re.I),
    "leak": re.compile(r"\bleak", re.I),
    "perf": re.compile(r"\b(?:performance|perf\b|slow|bandwidth|latency|initialization time|init time|overhead)", re.I),
}
AREAS = {
    "ib": re.compile(r"\b(?:IB|net/IB|Infiniband|InfiniBand|RoCE|GID|verbs|ibv_\w+|RDMA|GDR|GDRCOPY|DMA-?BUF|ECE|QP)s?\b"),
    "socket": re.compile(r"\b(?:socket|sockets|net/socket|NCCL_SOCKET_\w+|TCP|ncclFindInterface\w*|interfaces?)\b", re.I),
    "bootstrap": re.compile(r"\bbootstrap", re.I),
    "proxy": re.compile(r"\bproxy", re.I),
    "shm": re.compile(r"\b(?:SHM|shared memory|/dev/shm|shmem)\b", re.I),
    "p2p": re.compile(r"\b(?:P2P transport|P2P|NVLink|cudaIpc\w*|IPC|peer access|cudaDeviceCanAccessPeer)\b"),
    "nvls": re.compile(r"\b(?:NVLS\w*|NVLink SHARP|multicast)\b", re.I),
    "collnet": re.compile(r"\b(?:CollNet\w*|SHARP)\b", re.I),
    "ras": re.compile(r"\bRAS\b"),
    "init": re.compile(r"\b(?:init\w*|ncclCommInit\w*|communicator creation)\b", re.I),
    "abort": re.compile(r"\b(?:ncclCommAbort|abort|ncclCommDestroy|destroy|finalize|ncclCommFinalize|termination)\b", re.I),
    "cumem": re.compile(r"\b(?:cuMem\w*|VMM|CUMEM\w*)\b"),
    "mnnvl": re.compile(r"\b(?:MNNVL|NVL72|multi-node NVLink)\b", re.I),
    "plugin": re.compile(r"\bplugins?\b", re.I),
    "topology": re.compile(r"\b(?:topology|topo\w*|PCI\w*|NUMA|XML|graph search)\b", re.I),
    "uds": re.compile(r"\b(?:UDS|unix domain)\b", re.I),
    "alltoall": re.compile(r"\b(?:alltoall\w*|all-to-all|send/recv|sendrecv|ncclSend|ncclRecv)\b", re.I),
    "split": re.compile(r"\b(?:ncclCommSplit|split comm\w*|comm split|ncclCommShrink)\b", re.I),
    "registration": re.compile(r"\b(?:regist\w+|user buffers?)\b", re.I),
    "profiler": re.compile(r"\bprofiler\b", re.I),
    # one platform's fix (a GPU, NIC or CPU model): not a lead for a log that does not name it
    "platform": re.compile(r"\b(?:GB[23]00|H[18]00|A100|DGX\w*|CX-?\d|ConnectX\w*|ARM|Grace|Blackwell|Hopper|"
                           r"Power(?:PC)?|sm_?\d\d|RTX\s*\d+|AMD)\b"),
}
_NUMBER = re.compile(r"(?:(?<![\w-])#|Github(?:Issue|PR)#\s*|issues?/|pull/|\b(?:Issues?|issues?|PR) )(\d{2,5})\b")
_PR = re.compile(r"PR|pull/")
# not a fix a user's failure can need: the build, the compiler, a comment, the notes themselves
_NOT_RUNTIME = re.compile(r"\b(?:compil\w*|build|cmake|Makefile|CI|typo|comments?|warnings? with|NVTX\w*|docs?|documentation|README)\b")


def release_tags(repo: Path) -> list[tuple[tuple[int, ...], str]]:
    """(version, tag) of every release, oldest first; of X.Y.Z-1 and -2 the later respin."""
    out = subprocess.run(["git", "-C", str(repo), "tag"], capture_output=True, text=True, check=True).stdout
    best: dict[tuple[int, int, int], tuple[int, str]] = {}
    for tag in out.split():
        m = _TAG.fullmatch(tag)
        if m:
            version = (int(m[1]), int(m[2]), int(m[3]))
            if version not in best or int(m[4]) > best[version][0]:
                best[version] = (int(m[4]), tag)
    return [(v, best[v][1]) for v in sorted(best)]


def messages_between(repo: Path, older: str | None, tag: str) -> list[tuple[str, str]]:
    """(commit, message) of each commit a release brings, newest first."""
    span = f"{older}..{tag}" if older else tag
    out = subprocess.run(["git", "-C", str(repo), "log", "--format=%H%x1f%B%x1e", span],
                         capture_output=True, text=True, check=True).stdout
    return [tuple(part.strip("\n").split("\x1f", 1)) for part in out.split("\x1e") if "\x1f" in part]


def fix_items(message: str) -> list[str]:
    """The items of a release note that start with "Fix", each on one line."""
    items: list[list[str]] = []
    current: list[str] | None = None
    body = message.splitlines()[1:]  # the subject is the release's name
    base = min((len(l) - len(l.lstrip()) for l in body if l.strip()), default=0)  # 2.4.x indents everything
    for raw in (l[base:] for l in body):
        if not raw.strip():
            current = None
            continue
        m = _BULLET.match(raw)
        indent, text = len(m.group(1)), m.group(2).strip()
        bullet = raw.lstrip()[:2] in ("* ", "- ")
        starts_item = bullet or (indent == 0 and text[:1].isupper())
        if current is not None and not starts_item:
            current.append(text)  # a wrapped line of the item above
            continue
        current = [text] if _FIX.match(text) else None
        if current is not None:
            items.append(current)
    return [re.sub(r"\s+", " ", " ".join(parts)).strip() for parts in items]


def describe(text: str) -> dict:
    kinds = [k for k, rx in KINDS.items() if rx.search(text)]
    areas = [a for a, rx in AREAS.items() if rx.search(text)]
    issues: set[int] = set()
    prs: set[int] = set()
    for m in _NUMBER.finditer(text):
        lead_in = text[max(0, m.start() - 12):m.start()] + m.group(0)  # "Github PR #1164", "GithubPR#185"
        (prs if _PR.search(lead_in) else issues).add(int(m.group(1)))
    return {"text": text, "kinds": kinds, "areas": areas, "issues": sorted(issues), "prs": sorted(prs)}


def worth_keeping(item: dict) -> bool:
    """A fix a failing job can need: it names a runtime symptom or an issue, and is not about the build."""
    if _NOT_RUNTIME.search(item["text"]):
        return False
    return bool(item["kinds"] or item["issues"] or item["prs"] or len(item["text"].split()) >= 5)


def mine(repo: Path) -> list[dict]:
    releases = []
    previous = None
    for version, tag in release_tags(repo):
        if previous is not None:  # the first tag's message has no release notes of fixes to date
            seen: set[str] = set()
            fixes = []
            commits = messages_between(repo, previous, tag)
            for _, message in commits:
                for item in fix_items(message):
                    fix = describe(item)
                    if item not in seen and worth_keeping(fix):
                        seen.add(item)
                        fixes.append(fix)
            if fixes:
                commit = subprocess.run(["git", "-C", str(repo), "rev-list", "-n1", tag], capture_output=True,
                                        text=True, check=True).stdout.strip()
                releases.append({"version": ".".join(map(str, version)), "tag": tag, "commit": commit[:12],
                                 "fixes": fixes})
        previous = tag
    return releases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, required=True, help="a clone of https://github.com/NVIDIA/nccl (bare is fine)")
    ap.add_argument("--dry-run", action="store_true", help="print the counts, write nothing")
    args = ap.parse_args(argv)
    releases = mine(args.repo)
    total = sum(len(r["fixes"]) for r in releases)
    print(f"{len(releases)} releases, {total} fixes", file=sys.stderr)
    if args.dry_run:
        return 0
    doc = {
        "software": "nccl",
        "source": "https://github.com/NVIDIA/nccl",
        "mined_by": "tools/mine/nccl_releases.py",
        "note": "Each fix is NCCL's own release-note text, read from the commits of the release tag; kinds, areas, "
                "issues and prs are derived from its words.",
        "releases": releases,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=110))
    print(f"wrote {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
