"""Against the anchor: torch 2.13's own Flight Recorder analyzer on the same dumps as the advisor.

`python -m torch.distributed.flight_recorder.fr_trace DIR` (the `torchfrtrace` script; it needs
`tabulate`) runs on every fixture folder, as is and with `--allow-incomplete-ranks`; its first
verdict (the sequence number, the group, the missing or culprit ranks) or its crash is set beside
the advisor's culprits. The table in tests/fixtures/flight_recorder/ANCHOR.md is generated from
this comparison (`python tests/integration/test_fr_trace.py --write` in an environment with torch
2.13 and tabulate) and the test fails when torch's behaviour or ours changes without it.

Runs in the pinned `fr` environment of .ci/integration (torch 2.13.0 CPU, tabulate 0.10.0).
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

FR = Path(__file__).resolve().parent.parent / "fixtures" / "flight_recorder"
TABLE = FR / "ANCHOR.md"
FOLDERS = [
    "gloo-2.13/mismatch/pickle", "gloo-2.13/mismatch/json", "gloo-2.13/straggler/pickle", "gloo-2.13/straggler/json",
    "gloo-2.13/dead_rank/pickle", "gloo-2.13/multi_pg/pickle", "gloo-2.13/empty/pickle",
    "built-nccl-2.10/eval_straggler/pickle", "built-nccl-2.10/mesh_missing_rank/pickle", "built-nccl-2.4/pipeline_p2p/pickle",
    "built-nccl-2.9/coalesced_dtype_mismatch/pickle", "built-nccl-2.4/near_empty",
]


@dataclass
class Verdict:
    crash: str | None = None
    seq: int | None = None
    group: str | None = None
    ranks: tuple[int, ...] = ()
    kind: str = ""

    def text(self) -> str:
        if self.crash:
            return f"crashes: `{self.crash}`"
        if self.seq is None:
            return "reports nothing"
        return f"{self.kind} #{self.seq} in {self.group}: ranks {', '.join(map(str, self.ranks))}"


@functools.lru_cache(maxsize=None)
def run_torch(folder: Path, *extra: str) -> Verdict:
    done = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(folder), *extra],
                          capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    if done.returncode != 0:
        last = [line for line in out.splitlines() if line and not line.startswith((" ", "Traceback"))]
        return Verdict(crash=(last[-1] if last else f"exit {done.returncode}")[:90])
    v = Verdict()
    m = re.search(r"(?:Not all ranks joining collective, sequence number: (\d+)|Collective sequence number: (\d+) has errors)", out)
    if m:
        v.seq = int(m.group(1) or m.group(2))
        v.kind = "missing" if m.group(1) else "mismatch"
        tail = out[m.end():]
        g = re.search(r"group info: (\S+)", tail)
        v.group = g.group(1) if g else "?"
        ranks = re.search(r"missing ranks: \{([\d, ]*)\}", tail) if m.group(1) else None
        culprits = re.findall(r"Culprit rank (\d+)", tail.split("Not all ranks")[0].split("Collective sequence")[0])
        v.ranks = tuple(sorted(int(x) for x in (ranks.group(1).split(",") if ranks else culprits) if str(x).strip()))
    return v


def ours(folder: Path) -> str:
    from advisor.flight_recorder import analyze
    from advisor.fr_dumps import read_dumps

    dumps, notes = read_dumps([str(folder)])
    s = analyze(dumps, notes=notes)
    if s.first_mismatch:
        m = s.first_mismatch
        return f"mismatch #{m.seq} in {m.pg}:{m.desc} ({m.kind}): culprits {', '.join(map(str, s.culprits))}"
    if s.culprits:
        w = s.waiting_in
        where = f" #{w.seq} in {w.pg}:{w.desc}" if w else ""
        return f"waiting{where}: culprits {', '.join(map(str, s.culprits))}" + (f" (no dump: {', '.join(map(str, s.ranks_missing))})" if s.ranks_missing else "")
    problems = {d.problem.split(":")[0] for d in s.dumps if d.problem}
    return "no culprit" + (f"; {'; '.join(sorted(problems))}" if problems else "")


def _culprits(text: str) -> set[int]:
    m = re.search(r"culprits ([\d, ]+)", text)
    return {int(x) for x in m.group(1).split(",")} if m else set()


def compare(folder: str) -> tuple[str, ...]:
    path = FR / folder
    kind = "gloo, recorded" if folder.startswith("gloo") else "NCCL, built"
    from advisor.fr_dumps import read_dumps

    dumps, _ = read_dumps([str(path)])
    version = sorted({d.version for d in dumps if d.version})
    plain, partial = run_torch(path), run_torch(path, "--allow-incomplete-ranks")
    mine = ours(path)
    best = partial if plain.crash and not partial.crash else plain
    if best.crash:
        verdict = "torch crashes"
    elif best.seq is None:
        verdict = "agree (nothing to report)" if mine.startswith("no culprit") else "differs: torch reports nothing"
    elif set(best.ranks) == _culprits(mine):
        verdict = "agree"
    else:
        verdict = f"differs: torch names ranks {', '.join(map(str, best.ranks))}"
    fmt = "/".join(version) or "?"
    return (f"`{folder}`", kind, f"{fmt} ({dumps[0].format})", plain.text(), partial.text() if plain.crash else "(same)", mine, verdict)


def table() -> str:
    import torch

    rows = [compare(f) for f in FOLDERS]
    head = ["dumps", "kind", "format", f"torch {torch.__version__.split('+')[0]} fr_trace", "with --allow-incomplete-ranks",
            "advisor", "verdict"]
    lines = ["# The advisor against torch's own Flight Recorder analyzer", "",
             "Generated by `python tests/integration/test_fr_trace.py --write` (torch 2.13.0 CPU, tabulate 0.10.0);",
             "checked by the `fr` environment of `.ci/integration`. Folders are under tests/fixtures/flight_recorder/.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
    agree = sum(1 for r in rows if r[-1].startswith("agree"))
    crash = sum(1 for r in rows if r[-1] == "torch crashes")
    lines += ["", f"{len(rows)} dump sets: {agree} agree, {crash} where torch's analyzer crashes, "
              f"{len(rows) - agree - crash} where the two differ."]
    return "\n".join(lines) + "\n"


def test_table_is_current():
    pytest.importorskip("tabulate")
    assert TABLE.read_text(encoding="utf-8") == table(), "run: python tests/integration/test_fr_trace.py --write"


@pytest.mark.parametrize("folder", [f for f in FOLDERS if f.startswith("built-nccl") and "missing" not in f and "empty" not in f])
def test_torch_and_the_advisor_agree_where_torch_can_read_the_dumps(folder):
    pytest.importorskip("tabulate")
    assert compare(folder)[-1] == "agree"


@pytest.mark.parametrize("folder", ["gloo-2.13/mismatch/pickle", "gloo-2.13/dead_rank/pickle"])
def test_torch_crashes_where_the_advisor_answers(folder):
    """The two cases of the issue: a gloo mismatch (KeyError in build_collectives) and a dead rank
    (AssertionError: Missing dump files from ranks {2})."""
    pytest.importorskip("tabulate")
    plain = run_torch(FR / folder)
    assert plain.crash and ("KeyError" in plain.crash or "Missing dump files" in plain.crash)
    assert _culprits(ours(FR / folder)) == ({0} if "mismatch" in folder else {2})


if __name__ == "__main__":
    text = table()
    if "--write" in sys.argv[1:]:
        TABLE.write_text(text, encoding="utf-8")
    sys.stdout.write(text)
