"""Hostile input (issue 7): every case of tests/hostile/corpus.py through the core (read_log and
diagnose), the CLI in-process (standard input and --log), and, for the big cases and a sample of the
others, the real console script in a subprocess.

What must hold for every case: nothing raises, no "Traceback" ever reaches the user, exit codes are
the documented ones, an input error is one line that says what is wrong and what to do next, the
real error line hidden in the junk is still found, and the big cases stay in bounded memory. The
time limits here are hang guards (a generous ceiling), not speed requirements.

Big cases are 32 MiB by default; ADVISOR_HOSTILE_FULL=1 makes them 200 MiB (see tests/hostile/README.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from advisor.diagnose import diagnose, read_log
from advisor.models import DiagnoseRequest, Diagnosis
from helpers import run_cli
from helpers import hang_guard as guard
from hostile.corpus import BY_ID, CASES, README, REAL_LOG, SHM, SHM_CAUSE, WATCHDOG, Case, big_size, readme_text

EXE = os.path.join(os.path.dirname(sys.executable), "advisor")
HANG_GUARD_S = 120
"""wall-clock ceiling for one case: far above what any case needs, low enough to catch a hang."""
MEMORY_CEILING_MIB = 300
"""peak RSS of the console script on the big cases (the 200 MiB line included): reading is streamed."""
NEXT_STEP = ("check", "give", "paste", "pipe", "use ", "convert", "decompress", "make it readable")

SMALL = [c for c in CASES if not c.path and not c.big]
PATHS = [c for c in CASES if c.path]
BIG = [c for c in CASES if c.big]
CONTENT = SMALL + BIG
SUBPROCESS = BIG + [BY_ID[i] for i in (
    "empty", "random-bytes", "utf16-le-bom", "gzip-truncated", "long-numbers", "ansi-wrapped",
    "missing-file", "dev-zero", "symlink-loop", "control-chars-in-name",
)]


# each case has its own hang guard (HANG_GUARD_S); the per-test time guard stays above it
pytestmark = pytest.mark.timeout(HANG_GUARD_S + 60)


def ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]


# --- helpers ------------------------------------------------------------------------------------


def hang_guard(seconds: float = HANG_GUARD_S):
    return guard(seconds)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Each content case generated once per run (big ones as files, deleted afterwards)."""
    folder = tmp_path_factory.mktemp("hostile")
    cache: dict[str, bytes | Path] = {}

    def get(case: Case) -> bytes | Path:
        if case.id not in cache:
            cache[case.id] = case.make(folder)
        return cache[case.id]

    yield get
    for value in cache.values():
        if isinstance(value, Path):
            value.unlink(missing_ok=True)


def as_file(case: Case, data: bytes | Path, folder: Path) -> Path:
    if isinstance(data, Path):
        return data
    path = folder / f"{case.id}.log"
    path.write_bytes(data)
    return path


def check_diagnosis(d: Diagnosis) -> None:
    Diagnosis.model_validate(d.model_dump())
    json.dumps(d.model_dump(mode="json"), allow_nan=False)  # strict JSON: no NaN or infinity
    assert d.status in ("diagnosed", "uncertain", "no-match")
    scores = [c.score for c in d.causes if not c.benign]
    assert scores == sorted(scores, reverse=True)
    for cause in d.causes:
        assert 0.0 <= cause.score <= 1.0
        for line in cause.evidence["lines"]:
            text = line["text"]
            assert len(text) <= 300 and "\x1b" not in text and "\x00" not in text, text[:80]


def check_found(case: Case, causes: list[dict], facts: dict) -> None:
    """The real lines inside the junk were found: the expected top cause, shown with its own line."""
    if case.top:
        assert causes and causes[0]["id"] == case.top, [c["id"] for c in causes[:3]]
    if case.top == SHM_CAUSE:  # shown with its own line, not with the junk the line started with
        evidence = " ".join(line["text"] for line in causes[0]["evidence"]["lines"])
        assert "failed to extend" in evidence or "No space left" in evidence, evidence[:300]
    for name, value in case.facts.items():
        assert facts.get(name) == value, (name, facts.get(name))


def check_message(case: Case, err: str) -> None:
    """An input error: one line, no echoed terminal escapes, what is wrong and what to do next."""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("advisor: "), err
    assert "\x1b" not in err and "\x00" not in err
    for phrase in case.says:
        assert phrase.lower() in err.lower(), (phrase, err)
    assert any(step in err.lower() for step in NEXT_STEP), f"no next step in: {err}"


def check_cli(case: Case, code: int, out: str, err: str) -> None:
    assert "Traceback" not in err + out
    assert code in case.exit, f"exit {code}, expected {sorted(case.exit)}: {err.strip()[:300]}"
    if code == 3:
        check_message(case, err)
        assert out == ""
        return
    data = json.loads(out)
    Diagnosis.model_validate(data)
    check_found(case, data["causes"], data["facts"])


# --- the registry and its listing ---------------------------------------------------------------


def test_readme_lists_every_case():
    current = README.read_text(encoding="utf-8")
    assert current == readme_text(current), "regenerate it: python tests/hostile/corpus.py --write"


def test_every_case_states_what_it_attacks():
    for case in CASES:
        assert case.attacks and "\n" not in case.attacks, case.id
        assert case.exit <= {0, 1, 3}, case.id
        if 3 in case.exit:
            assert case.says, f"{case.id}: an input error must name the phrases its message says"


# --- (a) the core -------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CONTENT, ids=ids(CONTENT))
def test_core_never_raises_and_still_finds_the_real_line(kb, made, case):
    data = made(case)
    with hang_guard():
        if isinstance(data, Path):
            with data.open("rb") as stream:
                d = diagnose(DiagnoseRequest(), kb, stream=stream)
        else:
            d = diagnose(DiagnoseRequest(log=data), kb)
    check_diagnosis(d)
    if case.core:
        dumped = d.model_dump(mode="json")
        check_found(case, dumped["causes"], dumped["facts"])


@pytest.mark.parametrize("case", SMALL, ids=ids(SMALL))
def test_core_reads_bytes_and_streams_alike(kb, made, case):
    import io

    data = made(case)
    with hang_guard():
        a = read_log(kb, data)
        b = read_log(kb, io.BytesIO(data))
    assert a.stats.bytes == b.stats.bytes and a.stats.lines == b.stats.lines
    assert a.facts.model_dump() == b.facts.model_dump()
    assert set(a.signatures.by_cause) == set(b.signatures.by_cause)


# --- (b) the CLI, in-process --------------------------------------------------------------------


@pytest.mark.parametrize("case", SMALL, ids=ids(SMALL))
def test_cli_stdin_and_log_file(made, tmp_path, case):
    data = made(case)
    with hang_guard():
        if case.stdin:
            piped = run_cli("suggest", "-", "--json", stdin=data)
            check_cli(case, piped.code, piped.out, piped.err)
        logged = run_cli("suggest", "--log", str(as_file(case, data, tmp_path)), "--json")
    check_cli(case, logged.code, logged.out, logged.err)


@pytest.mark.parametrize("case", PATHS, ids=ids(PATHS))
def test_cli_file_system_cases(tmp_path, case):
    if case.id == "unreadable-file" and os.geteuid() == 0:
        pytest.skip("root can read anything")
    path = case.make(tmp_path)
    writer = None
    if case.id == "fifo":
        writer = threading.Thread(target=lambda: Path(path).write_bytes(REAL_LOG), daemon=True)
        writer.start()
    try:
        with hang_guard(60):
            r = run_cli("suggest", "--log", path, "--json")
    finally:
        if writer is not None and writer.is_alive():  # never opened: release the writer
            os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    check_cli(case, r.code, r.out, r.err)


def test_text_mode_output_of_hostile_input_has_no_raw_escapes(made):
    """The human-readable output, too, never passes a terminal escape from the log through."""
    r = run_cli("suggest", "-", "--verbose", "--color", "never", stdin=made(BY_ID["ansi-wrapped"]) + b"\x1b]0;pwned\x07\n")
    assert r.code == 0 and "\x1b" not in r.out


def test_lone_surrogates_in_text_do_not_crash(kb):
    """JSON lets a bot send lone surrogates ("\\ud800"); the command line smuggles bad bytes as \\udcxx."""
    for text in ("\ud800 " + WATCHDOG, WATCHDOG + "\udfff\ud83d", "\udcff" + SHM, "\ud800" * 1000):
        d = diagnose(DiagnoseRequest(log=text, description=text[:200]), kb)
        check_diagnosis(d)
        d.model_dump_json()
    assert diagnose(DiagnoseRequest(log="\ud800" + SHM), kb).causes[0].id == "dev-shm-too-small"
    r = run_cli("suggest", "--error", "\udcff\udcfe " + SHM, "--json")
    assert r.code == 0 and r.json["causes"][0]["id"] == "dev-shm-too-small"


def test_error_argument_with_junk_does_not_crash():
    for text in ("\x00" * 1000 + SHM, "\x1b[2J" + SHM, "[rank0]:" * 100_000 + SHM, SHM + "\r" * 1000):
        r = run_cli("suggest", "--error", text, "--json")
        assert r.code == 0 and r.json["causes"][0]["id"] == "dev-shm-too-small"


@pytest.mark.parametrize("answer", ["model_size_b=1e308", "startup_skew_s=1e308", "gpus_per_node=100000"])
def test_absurd_numeric_answer_is_a_usage_error(answer):
    """A huge answer once overflowed a timeout calculator (int(inf)): the question's `max` refuses it."""
    r = run_cli("suggest", "--error", WATCHDOG, "--answer", answer)
    assert r.code == 2 and "at most" in r.err and "Traceback" not in r.err


# --- (c) the real console script ----------------------------------------------------------------

# Runs the console script under a hang guard and reports its peak memory: RUSAGE_CHILDREN of this
# small parent covers the advisor process alone.
MEASURE = """\
import json, resource, subprocess, sys
limit = float(sys.argv[1])
try:
    done = subprocess.run(sys.argv[2:], stdin=sys.stdin, capture_output=True, timeout=limit)
    code, out, err = done.returncode, done.stdout, done.stderr
except subprocess.TimeoutExpired as exc:
    code, out, err = "hang", exc.stdout or b"", exc.stderr or b""
json.dump({"code": code, "out": out.decode("utf-8", "replace"), "err": err.decode("utf-8", "replace"),
           "maxrss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}, sys.stdout)
"""


def console(argv: list[str], stdin: bytes = b"", cwd: Path | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(HANG_GUARD_S), EXE, *argv], input=stdin,
                          capture_output=True, timeout=HANG_GUARD_S + 60, cwd=cwd)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    result = json.loads(done.stdout)
    assert result["code"] != "hang", f"advisor {' '.join(argv)[:200]} still running after {HANG_GUARD_S} s"
    return result


@pytest.mark.parametrize("case", SUBPROCESS, ids=ids(SUBPROCESS))
def test_console_script(made, tmp_path, case):
    if case.path:
        result = console(["suggest", "--log", case.make(tmp_path), "--json"], cwd=tmp_path)
    elif case.big:
        path = made(case)
        assert case.id.startswith("gzip") or path.stat().st_size >= big_size()
        result = console(["suggest", "--log", str(path), "--json"], cwd=tmp_path)
        assert result["maxrss_mib"] < MEMORY_CEILING_MIB, f"peak memory {result['maxrss_mib']:.0f} MiB"
    else:
        result = console(["suggest", "-", "--json"], stdin=made(case), cwd=tmp_path)
    check_cli(case, result["code"], result["out"], result["err"])
