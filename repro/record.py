"""Run the reproduction scenarios and record what the software printed.

    python repro/record.py                 # (re)record every run in repro/scenarios.yaml
    python repro/record.py --only ID ...   # some runs (a run id, or a scenario id for all its runs)
    python repro/record.py --list          # the runs, one a line
    python repro/record.py --misses        # re-diagnose the recorded logs and rewrite known_misses

Each run starts its command(s) with stdout and stderr of every process on one pipe, so the log is
the interleaved text a user sees in the terminal, and writes it to kb/recorded/<run id>.log. The
only change made to the text: the virtual environment's root becomes /workspace/.venv and the
repository root /workspace, so logs do not depend on where they were recorded.
kb/recorded/manifest.yaml lists every recorded run with its label, versions, command, exit code
and duration. Run it with the Python of the environment that has the frameworks installed.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "repro" / "scenarios"
SPEC = ROOT / "repro" / "scenarios.yaml"
RECORDED = ROOT / "kb" / "recorded"
MANIFEST = RECORDED / "manifest.yaml"
ENVS = ROOT / "tests" / "integration" / "envs"  # the integration environments' pins, one file per stack
DEFAULT_STACK = "hf"
SCRATCH = ROOT / ".repro-runs"
NEUTRAL = "/workspace"

# launcher variables a developer's shell may carry; a run sets its own
CLEARED_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
               "NODE_RANK", "TORCHELASTIC_RUN_ID", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TORCH_DISTRIBUTED_DEBUG",
               "ACCELERATE_USE_CPU", "ACCELERATE_CONFIG_FILE", "CUDA_VISIBLE_DEVICES", "PYTHONPATH")
BASE_ENV = {
    "PYTHONUNBUFFERED": "1",      # the order a terminal shows; nothing lost when a rank is killed
    "HF_HUB_OFFLINE": "1",        # nothing is downloaded
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "COLUMNS": "120",
}
GLOO_ENV = {"TORCH_FR_BUFFER_SIZE": "2000"}  # the Flight Recorder keeps entries for gloo process groups
FRAMEWORK_DISTRIBUTIONS = {"pytorch": "torch", "transformers": "transformers", "trl": "trl",
                           "accelerate": "accelerate", "lightning": "lightning"}


@dataclass
class Run:
    """One scenario under one launcher/framework, as repro/scenarios.yaml declares it."""

    id: str
    scenario: str
    description: str
    cause: str
    also_acceptable: list[str]
    answers: dict[str, str]  # what the job's owner would answer the advisor's guided questions
    launcher: str
    framework: str
    commands: list[str]
    env: dict[str, str]
    exit: list[int]  # the acceptable exit statuses (several where ranks race to fail first)
    expect: list[str | list[str]]
    hold_port: bool = False
    delays: list[float] = field(default_factory=list)
    timeout_s: float = 180.0
    stack_dumps_after: str | None = None
    """text the run prints once it hangs: 3 s after it appears `py-spy dump` runs on every Python
    process of the run (the launcher's agent included, as a user dumps every python process of a
    hung job)."""
    stack: str = DEFAULT_STACK
    """the integration environment whose pins the run needs (tests/integration/envs/<stack>.txt):
    a framework bug is reproduced with the release that has it, next to the current ones."""
    requires: list[str] = field(default_factory=list)
    """what the machine must allow besides the stack (REQUIREMENTS): a run whose machine lacks it is
    skipped, by the recorder and by CI, with the reason."""
    abort_after: str | None = None
    """text the run prints once it hangs: 3 s after it appears every rank (each launched command's
    child processes) gets SIGABRT at once, as NCCL's watchdog aborts a rank whose collective timed
    out; with PYTHONFAULTHANDLER=1 each prints `Fatal Python error: Aborted` and its threads' stacks."""


@dataclass
class Result:
    run: Run
    text: str
    exit_code: int | None
    other_exit_codes: list[int | None]
    seconds: float
    commands: list[str]
    timed_out: bool = False
    env: dict[str, str] = field(default_factory=dict)  # the variables the recorder set, as rendered

    def problems(self) -> list[str]:
        """How this run differs from what the manifest expects (empty when it failed the same way)."""
        out = []
        if self.timed_out:
            out.append(f"still running after {self.run.timeout_s:.0f} s (killed)")
        if self.exit_code not in self.run.exit:
            out.append(f"exit status {self.exit_code}, expected {' or '.join(map(str, self.run.exit))}")
        for needle in self.run.expect:  # a string, or a list of alternatives (any one will do)
            alternatives = [needle] if isinstance(needle, str) else needle
            if not any(a in self.text for a in alternatives):
                out.append("missing " + " or ".join(repr(a) for a in alternatives))
        return out


def load_runs(spec: Path = SPEC, stack: str | None = None) -> list[Run]:
    """Every run the spec declares, or those of one integration environment (`stack`)."""
    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    defaults = data.get("defaults") or {}
    runs = []
    for scenario_id, scenario in data["scenarios"].items():
        for variant, r in scenario["runs"].items():
            commands = r["command"] if isinstance(r["command"], list) else [r["command"]]
            env = dict(GLOO_ENV if scenario.get("gloo", True) else {})
            env.update({k: str(v) for k, v in (scenario.get("env") or {}).items()})
            env.update({k: str(v) for k, v in (r.get("env") or {}).items()})
            runs.append(Run(
                id=f"{scenario_id}--{variant}", scenario=scenario_id,
                description=" ".join((r.get("description") or scenario["description"]).split()),
                cause=r.get("cause", scenario["cause"]),
                also_acceptable=list(r.get("also_acceptable", scenario.get("also_acceptable") or [])),
                answers={k: str(v) for k, v in {**(scenario.get("answers") or {}), **(r.get("answers") or {})}.items()},
                launcher=r["launcher"], framework=r["framework"], commands=commands, env=env,
                exit=[int(c) for c in (r["exit"] if isinstance(r["exit"], list) else [r["exit"]])], expect=list(r.get("expect") or []),
                hold_port=bool(r.get("hold_port", False)), delays=list(r.get("delays") or []),
                timeout_s=float(r.get("timeout_s", defaults.get("timeout_s", 180))),
                stack_dumps_after=r.get("stack_dumps_after"), abort_after=r.get("abort_after"),
                stack=r.get("stack", scenario.get("stack", DEFAULT_STACK)),
                requires=list(r.get("requires", scenario.get("requires") or [])),
            ))
    return [r for r in runs if stack is None or r.stack == stack]


# requirement -> (command that succeeds where the machine allows it, what it is for)
REQUIREMENTS = {
    "user-namespaces": (["unshare", "-rm", "true"],
                        "unprivileged user and mount namespaces (`unshare -rm`), to give the run its own small /dev/shm"),
}


def blockers(run: Run) -> list[str]:
    """Why this machine cannot run `run` (its unmet requirements); empty: it can."""
    return [reason for r in run.requires if (reason := unmet(r))]


@functools.lru_cache(maxsize=None)
def unmet(requirement: str) -> str | None:
    """Why this machine cannot run a scenario that needs `requirement` (None: it can)."""
    command, what = REQUIREMENTS[requirement]
    try:
        ok = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return None if ok else f"this machine does not allow {what}"


def stack_pins(stack: str) -> dict[str, str]:
    """The `name==version` pins of an integration environment's requirements file."""
    pins = {}
    for line in (ENVS / f"{stack}.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[name.split("[", 1)[0].strip()] = version.strip()
    return pins


def stack_mismatches(stack: str) -> list[str]:
    """The pins of `stack` this Python's environment does not have (empty: it can record the run)."""
    return [f"{name}=={want} (installed: {version_of(name) or 'none'})"
            for name, want in stack_pins(stack).items() if (version_of(name) or "").split("+")[0] != want]


def select(runs: list[Run], only: list[str] | None) -> list[Run]:
    if not only:
        return runs
    chosen = [r for r in runs if r.id in only or r.scenario in only]
    unknown = set(only) - {r.id for r in runs} - {r.scenario for r in runs}
    if unknown:
        raise SystemExit(f"unknown run or scenario id(s): {', '.join(sorted(unknown))} (see --list)")
    return chosen


# --- ports ----------------------------------------------------------------------------------------

_ports_lock = threading.Lock()
_ports_given: set[int] = set()


def free_port() -> int:
    """A TCP port nothing listens on now, never handed to two runs of this process, and below
    Linux's ephemeral range (32768-60999), from which gloo's own listeners and every outgoing
    connection take theirs, so no concurrent run can grab it before the run binds it."""
    with _ports_lock:
        while True:
            port = random.randrange(20000, 32000)
            if port in _ports_given:
                continue
            try:
                with socket.socket() as s:
                    s.bind(("0.0.0.0", port))
            except OSError:
                continue
            _ports_given.add(port)
            return port


def closed_port() -> tuple[int, socket.socket]:
    """A port kept closed for a whole run: bound (without SO_REUSEADDR) and never listening, so a
    connection to it is refused and no other program (a concurrent run, another CI job on the host)
    can start listening there while the run expects nothing to (the wrong-port scenarios)."""
    with _ports_lock:
        while True:
            port = random.randrange(20000, 32000)
            if port in _ports_given:
                continue
            s = socket.socket()
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                s.close()
                continue
            _ports_given.add(port)
            return port, s


def hold(port: int) -> socket.socket:
    """Another program listening on `port` (the port-in-use scenarios)."""
    s = socket.socket()
    s.bind(("0.0.0.0", port))
    s.listen(8)
    return s


# --- running --------------------------------------------------------------------------------------


def environment(run: Run, python: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
    env["PATH"] = os.path.dirname(python) + os.pathsep + env.get("PATH", "")
    env.update(BASE_ENV)
    env.update(run.env)
    return env


def render(command: str, ports: dict[str, int]) -> str:
    return command.format(scenarios=str(SCENARIOS), **ports)


def execute(run: Run, python: str = sys.executable) -> Result:
    """Run the command(s) of `run` in a fresh scratch directory; capture everything printed."""
    workdir = SCRATCH / run.id
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    closed, keeper = closed_port()
    ports = {"port": free_port(), "port2": free_port(), "closed_port": closed}
    commands = [render(c, ports) for c in run.commands]
    env = environment(run, python)
    for key, value in list(env.items()):
        if "{" in value:
            env[key] = render(value, ports)
    holder = hold(ports["port"]) if run.hold_port else None
    read_fd, write_fd = os.pipe()
    chunks: list[bytes] = []

    def drain():
        while data := os.read(read_fd, 65536):
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    procs: list[subprocess.Popen] = []
    start = time.monotonic()
    timed_out = False
    try:
        for i, command in enumerate(commands):
            if i and i - 1 < len(run.delays):
                time.sleep(run.delays[i - 1])
            procs.append(subprocess.Popen(shlex.split(command), cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                          stdout=write_fd, stderr=write_fd, start_new_session=True))
        if run.stack_dumps_after is not None:
            dumper = threading.Thread(target=dump_stacks, args=(procs, run.stack_dumps_after, chunks, write_fd, env),
                                      daemon=True)
            dumper.start()
        if run.abort_after is not None:
            threading.Thread(target=abort_ranks, args=(procs, run.abort_after, chunks), daemon=True).start()
        deadline = start + run.timeout_s
        for p in procs:
            try:
                p.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                timed_out = True
                break
    finally:
        for p in procs:
            if p.poll() is None:
                _kill_group(p)
        os.close(write_fd)
        reader.join(timeout=20)
        if reader.is_alive():  # a process of the run outlived its launcher and holds the pipe open
            for p in procs:
                _kill_group(p)
            reader.join(timeout=10)
        os.close(read_fd)
        if holder is not None:
            holder.close()
        keeper.close()
    seconds = time.monotonic() - start
    text = normalise(b"".join(chunks).decode("utf-8", "replace"))
    codes = [p.returncode for p in procs]
    shown = {k: normalise(env[k]) for k in sorted({**BASE_ENV, **run.env})}
    return Result(run, text, codes[0] if codes else None, codes[1:], round(seconds, 1),
                  [normalise(c) for c in commands], timed_out, shown)


def children_of() -> dict[int, list[int]]:
    """Every process's children (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the command may hold spaces and parentheses
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(roots: list[int]) -> list[int]:
    """The processes below `roots` (read from /proc), parents before children."""
    children = children_of()
    out, queue = [], list(roots)
    while queue:
        pid = queue.pop(0)
        out.append(pid)
        queue.extend(sorted(children.get(pid, [])))
    return out


STACK_DUMP_WAIT_S = 3.0


def wait_for_text(procs: list[subprocess.Popen], after: str, chunks: list[bytes]) -> bool:
    """Wait until the run has printed `after` (then STACK_DUMP_WAIT_S more seconds); False when the
    run ended first."""
    needle, seen, tail = after.encode(), 0, b""
    while True:
        fresh, seen = chunks[seen:], len(chunks)  # only what arrived since the last look
        window = tail + b"".join(fresh)
        if needle in window:
            break
        tail = window[-len(needle):]
        if all(p.poll() is not None for p in procs):
            return False
        time.sleep(0.25)
    time.sleep(STACK_DUMP_WAIT_S)
    return True


def abort_ranks(procs: list[subprocess.Popen], after: str, chunks: list[bytes]) -> None:
    """SIGABRT to every rank (the children of each launched command) at once, once the run printed
    `after`: what NCCL's watchdog does to a rank whose collective timed out."""
    if not wait_for_text(procs, after, chunks):
        return
    children = children_of()
    ranks = [pid for p in procs for pid in children.get(p.pid, [])]
    for pid in ranks:
        try:
            os.kill(pid, signal.SIGABRT)
        except ProcessLookupError:
            continue


def dump_stacks(procs: list[subprocess.Popen], after: str, chunks: list[bytes], fd: int, env: dict[str, str]) -> None:
    """`py-spy dump --pid` on every Python process of the run once the run has printed `after` (and
    STACK_DUMP_WAIT_S more seconds), written into the run's own output as a user pastes it next to
    the log. Nothing when the text never comes."""
    if not wait_for_text(procs, after, chunks):
        return
    spy = shutil.which("py-spy", path=env.get("PATH"))
    if spy is None:
        os.write(fd, b"repro: py-spy is not installed: no stack dumps\n")
        return
    for pid in descendants([p.pid for p in procs]):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0]
        except OSError:
            continue
        if b"python" not in os.path.basename(argv0) and not argv0.endswith((b"torchrun", b"accelerate")):
            continue
        done = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, timeout=60)
        os.write(fd, done.stdout + done.stderr + b"\n")


def _kill_group(p: subprocess.Popen) -> None:
    """Stop a run's process group (the launcher and every rank it started)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def normalise(text: str) -> str:
    """The virtual environment's root as /workspace/.venv (wherever it lies) and the repository
    root as /workspace: the only change made to what was printed."""
    if sys.prefix != sys.base_prefix:  # a virtual environment (never rewrite a system prefix like /usr)
        for prefix in sorted({sys.prefix, str(Path(sys.prefix).resolve())}, key=len, reverse=True):
            text = text.replace(prefix, NEUTRAL + "/.venv")
    return text.replace(str(ROOT), NEUTRAL)


# --- versions and the manifest --------------------------------------------------------------------


def version_of(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def recorded_with() -> dict:
    """This Python and the releases of the packages that print the logs."""
    return {"python": sys.version.split()[0],
            **{d: version_of(d) for d in ("torch", "transformers", "trl", "accelerate", "lightning", "deepspeed")}}


def manifest_entry(result: Result) -> dict:
    run = result.run
    entry = {
        "id": run.id, "log": f"{run.id}.log", "scenario": run.scenario, "description": run.description,
        # a run of another stack carries its own releases; the others share the manifest's recorded_with
        **({"stack": run.stack, "recorded_with": recorded_with()} if run.stack != DEFAULT_STACK else {}),
        "cause": run.cause, "also_acceptable": run.also_acceptable, "answers": run.answers, "launcher": run.launcher,
        "framework": run.framework,
        "framework_version": version_of(FRAMEWORK_DISTRIBUTIONS.get(run.framework, run.framework)),
        "torch_version": version_of("torch"),
        "command": result.commands[0] if len(result.commands) == 1 else result.commands,
        "env": result.env, "exit_code": result.exit_code,
    }
    if result.other_exit_codes:
        entry["other_exit_codes"] = result.other_exit_codes
    if run.abort_after:
        entry["aborted"] = f"every rank sent SIGABRT {STACK_DUMP_WAIT_S:g} s after {run.abort_after!r} was printed"
    if run.stack_dumps_after:
        entry["stack_dumps"] = (f"py-spy {version_of('py-spy')} dump of every Python process, {STACK_DUMP_WAIT_S:g} s "
                                f"after {run.stack_dumps_after!r} was printed")
    entry["seconds"] = result.seconds
    return entry


def read_manifest() -> dict:
    if MANIFEST.is_file():
        return yaml.safe_load(MANIFEST.read_text(encoding="utf-8")) or {}
    return {}


def write_manifest(data: dict) -> None:
    header = ("# Written by `python repro/record.py` (do not edit by hand, except known_misses: runs whose\n"
              "# diagnosis is not right yet; tests/test_recorded.py expects them to fail, strictly).\n")
    MANIFEST.write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110), encoding="utf-8")


def merge(results: list[Result], runs: list[Run]) -> dict:
    """The manifest with the new results in, the runs still declared kept, and the rest dropped."""
    data = read_manifest()
    by_id = {e["id"]: e for e in data.get("runs") or []}
    for result in results:
        by_id[result.run.id] = manifest_entry(result)
    order = [r.id for r in runs]
    entries = [by_id[i] for i in order if i in by_id]
    misses = data.get("known_misses") or {"top1": [], "top3": []}
    default_env = data.get("recorded_with")  # the default stack's environment, which most runs use
    if default_env is None or any(r.run.stack == DEFAULT_STACK for r in results):
        default_env = recorded_with()
    return {"recorded_with": default_env,
            "known_misses": {k: sorted(i for i in v if i in order) for k, v in misses.items()},
            "runs": entries}


# --- diagnosis of the recorded logs ---------------------------------------------------------------


def diagnose_codes(log: str) -> list[str]:
    """The advisor's cause codes for a log, best first (in-process, as tests/test_recorded.py does)."""
    return diagnose_verdict(log)[1]


def diagnose_verdict(log: str) -> tuple[str, list[str]]:
    """The advisor's status for a log (diagnosed, uncertain, no-match) and its cause codes, best first."""
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    result = diagnose(DiagnoseRequest(log=log, max_causes=10))
    return result.status, [c.code for c in result.causes]


def misses(entries: list[dict]) -> dict:
    out = {"top1": [], "top3": []}
    for e in entries:
        codes = diagnose_codes((RECORDED / e["log"]).read_text(encoding="utf-8"))
        accept = {e["cause"], *e["also_acceptable"]}
        if not codes[:1] or codes[0] not in accept:
            out["top1"].append(e["id"])
        if not accept & set(codes[:3]):
            out["top3"].append(e["id"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="ID", help="run ids or scenario ids")
    parser.add_argument("--jobs", type=int, default=3, help="runs at a time (most of a run is waiting; default 3)")
    parser.add_argument("--list", action="store_true", help="list the runs and exit")
    parser.add_argument("--misses", action="store_true",
                        help="re-diagnose the recorded logs and rewrite known_misses (and the runs' answers from scenarios.yaml)")
    args = parser.parse_args(argv)
    runs = load_runs()
    if args.list:
        for r in runs:
            print(f"{r.id:45s} {r.cause:28s} {r.launcher} / {r.framework}")
        return 0
    if args.misses:
        data = read_manifest()
        declared = {r.id: r for r in runs}
        for entry in data.get("runs") or []:  # metadata follows scenarios.yaml without re-recording
            if entry["id"] in declared:
                entry["answers"] = declared[entry["id"]].answers
        data["known_misses"] = misses(data.get("runs") or [])
        write_manifest(data)
        print(yaml.safe_dump(data["known_misses"]))
        return 0
    chosen = []
    for run in select(runs, args.only):
        wrong = stack_mismatches(run.stack)
        missing = blockers(run)
        if missing:
            print(f"{run.id:45s} skipped: {'; '.join(missing)}", flush=True)
        elif wrong:  # recorded with other releases, the log would not be the one the scenario declares
            print(f"{run.id:45s} skipped: needs the {run.stack} environment (tests/integration/envs/{run.stack}.txt): "
                  + ", ".join(wrong), flush=True)
        else:
            chosen.append(run)
    if not chosen:
        print("nothing to record with this Python: run it with the Python of the environment the runs need")
        return 2
    RECORDED.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    failed = []

    def one(run: Run) -> Result:
        result = execute(run)
        (RECORDED / f"{run.id}.log").write_text(result.text, encoding="utf-8")
        problems = result.problems()
        status = "ok" if not problems else "UNEXPECTED: " + "; ".join(problems)
        print(f"{run.id:45s} exit {result.exit_code!s:>4} {result.seconds:6.1f} s  {status}", flush=True)
        if problems:
            failed.append(run.id)
        return result

    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        results = list(pool.map(one, chosen))
    write_manifest(merge(results, runs))
    shutil.rmtree(SCRATCH, ignore_errors=True) if not args.only else None
    print(f"{len(results)} runs in {time.monotonic() - started:.0f} s" + (f"; {len(failed)} unexpected: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
