"""Stack dumps of hung processes (`py-spy dump --pid <PID>` on each rank): who waits in which
collective, and what the process the others wait for is doing.

py-spy is what one runs on a job that hangs without an error, by hand or through torch's debug
server (torch >= 2.11, torch/distributed/debug/_debug_handlers.py: PySpyHandler.dump() collects
every rank's dump under a "=== Rank <i>: <address> ===" header). py-spy's text format (src/dump.rs,
0.3 .. 0.4):

    Process 24271: /usr/bin/python -u train.py
    Python v3.11.7 (/usr/bin/python3.11)

    Thread 24271 (idle): "MainThread"
        barrier (torch/distributed/distributed_c10d.py:5356)
        train (train.py:15)
        <module> (train.py:17)

Frames come innermost first; a file is shortened to its path below the import root; `--native`
adds C/C++ frames (`ncclAllReduce (collectives.cc:49)`, `sched_yield (libc.so.6)`); `--locals`
adds indented argument lines. Only each process's main thread is read (the thread named
MainThread, or the one whose outermost frame is the script's `<module>`): that is where the
training loop runs.

Python's faulthandler dumps (CPython Python/traceback.c) carry the same information: "Fatal Python
error: Aborted" (a rank NCCL's watchdog aborted, with PYTHONFAULTHANDLER=1 or elastic's @record) or
"Timeout (0:05:00)!", then per thread "Thread 0x<id> (most recent call first):" and its frames
'  File "<path>", line <n> in <function>', innermost first. They carry no pid: without a launcher's
prefix, each dump is one process.

A process whose main thread sits in a torch.distributed call waits; one that does not while
others wait is the one they wait for, and its frames say what it is doing (advisor.stack_activity).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from advisor.stack_activity import activity

MAX_STACKS = 1024
"""threads kept from one log (a 512-rank job's dumps, two threads each)."""
MAX_FRAMES = 128
FRAME_GAP = 64
"""lines a frame may follow the previous line of its stack by (py-spy's --locals prints the
arguments and locals between frames); further away, the stack has ended."""

# NCCL's collective entry points (the NCCL_API functions of src/collectives.cc, read at v2.29.7) as
# py-spy --native names them, and the torch.distributed call each one serves
_NCCL_CALLS = {
    "ncclAllReduce": "all_reduce", "ncclAllGather": "all_gather", "ncclReduceScatter": "reduce_scatter",
    "ncclBroadcast": "broadcast", "ncclBcast": "broadcast", "ncclReduce": "reduce", "ncclSend": "send",
    "ncclRecv": "recv", "ncclAlltoAll": "all_to_all",
}
# DDP's own broadcasts, with the file that defines each (torch 2.13): its forward syncs buffers from
# rank 0 (nn/parallel/distributed.py), its constructor the module states (distributed/utils.py)
_DDP_BROADCASTS = frozenset({
    ("_sync_buffers", "nn/parallel/distributed.py"), ("_sync_module_buffers", "nn/parallel/distributed.py"),
    ("_default_broadcast_coalesced", "nn/parallel/distributed.py"),
    ("_distributed_broadcast_coalesced", "nn/parallel/distributed.py"),
    ("_sync_params_and_buffers", "distributed/utils.py"),
})

# Processes dumped with the ranks when a user dumps every python process of a job, which are no
# rank: a launcher in its monitor loop (torchrun's elastic agent, the deprecated
# torch.distributed.launch, DeepSpeed's and accelerate's launchers), a DataLoader worker
# (torch/utils/data/_utils/worker.py's _worker_loop) and inductor's compile workers.
_HELPER_FILES = ("distributed/elastic/agent/", "torch/distributed/run.py", "torch/distributed/launch.py",
                 "deepspeed/launcher/", "accelerate/commands/launch.py", "torch/utils/data/_utils/worker.py",
                 "torch/_inductor/compile_worker/")

# The last Python frames before the autograd engine's C++ (torch 2.x: autograd/graph.py's
# _engine_run_backward; torch 1.x: backward in autograd/__init__.py)
_AUTOGRAD_ENGINE = frozenset({("_engine_run_backward", "autograd/graph.py"), ("backward", "autograd/__init__.py"),
                              ("run_backward", "autograd/__init__.py")})


@dataclass(frozen=True, slots=True)
class DumpFrame:
    name: str
    file: str
    line: int | None

    def where(self) -> str:
        base = self.file.replace("\\", "/").rsplit("/", 1)[-1]
        return f"{self.name} ({base}:{self.line})" if self.line is not None else f"{self.name} ({base})"


@dataclass(slots=True)
class ThreadStack:
    key: str  # "rank 3" (a launcher's prefix), "pid 24271" or "process 2"
    line: int  # the line of its "Thread ..." header
    main: bool
    frames: list[DumpFrame] = field(default_factory=list)
    last_line: int = 0


@dataclass(frozen=True, slots=True)
class ProcessState:
    key: str
    line: int
    waits_in: str | None  # the torch.distributed call its main thread is in, if any
    activity: str | None  # save / eval / data / logging (advisor.stack_activity), if its frames show one
    where: str  # its innermost frame outside torch, or its innermost frame


@dataclass(slots=True)
class StackDumps:
    """The py-spy dumps in a log, collected while it is read (fed by advisor.facts' probes)."""

    threads: list[ThreadStack] = field(default_factory=list)
    _pid: str | None = None
    _pid_line: int = 0
    _rank: int | None = None  # from the debug server's "=== Rank i: ... ===" header
    # the stack being read, per line prefix: ranks whose output a launcher prefixes ("[default1]:")
    # write their dumps at the same moment (every rank aborts at once), so their lines interleave
    _open: dict[int | None, ThreadStack] = field(default_factory=dict)
    # faulthandler dumps carry no process id: an unprefixed one is a new process when it starts
    # ("Fatal Python error: ...") or when its first thread does not follow the previous stack
    _fh_process: int = 0
    _fh_new: bool = True
    _fh_last: ThreadStack | None = None

    def rank_header(self, line: int, rank: int) -> None:
        self._rank, self._pid = rank, None
        self._open.pop(None, None)

    def process(self, line: int, pid: str) -> None:
        self._pid, self._pid_line = pid, line
        self._open.pop(None, None)

    def dump_start(self, line: int, prefix: int | None) -> None:
        """A faulthandler dump begins ("Fatal Python error: ...", "Timeout (...)!")."""
        self._open.pop(prefix, None)
        if prefix is None:
            self._fh_new = True

    def thread(self, line: int, rank: int | None, tid: str, name: str | None, *, prefix: int | None = None,
               faulthandler: bool = False) -> None:
        if len(self.threads) >= MAX_STACKS:
            self._open.pop(prefix, None)
            return
        main = name == "MainThread"
        rank = rank if rank is not None else self._rank
        if rank is not None:
            key = f"rank {rank}"
        elif faulthandler:
            previous = self._fh_last
            if self._fh_new or previous is None or line - previous.last_line > 2:  # threads of one dump: one blank line apart
                self._fh_process += 1
            self._fh_new = False
            key = f"dump {self._fh_process}"
        elif self._pid is not None and line - self._pid_line < 4 * MAX_FRAMES:
            key = f"pid {self._pid}"
        elif tid.isdigit() and main:
            key = f"pid {tid}"  # Linux: the main thread's id is the process id
        else:
            key = f"process {len({t.key for t in self.threads if t.main}) + 1}"
        self._open[prefix] = stack = ThreadStack(key=key, line=line, main=main, last_line=line)
        self.threads.append(stack)
        if faulthandler and rank is None:
            self._fh_last = stack

    def frame(self, line: int, name: str, file: str, lineno: int | None, *, prefix: int | None = None) -> None:
        stack = self._open.get(prefix)
        if stack is None or line - stack.last_line > FRAME_GAP or len(stack.frames) >= MAX_FRAMES:
            self._open.pop(prefix, None)
            return
        stack.frames.append(DumpFrame(name, file, lineno))
        stack.last_line = line
        if self._pid is not None:
            self._pid_line = line  # the next thread of the same dump still belongs to this pid

    def processes(self, pid_ranks: dict[str, int] | None = None) -> list[ProcessState]:
        """Each process's main thread, read: one per key, in the order they were dumped. A process
        known by pid whose rank the log tells (torchrun's failure summary: `pid_ranks`) is keyed by
        that rank, so its dump and its traceback are one process."""
        seen: dict[str, ProcessState] = {}
        for stack in self.threads:
            key = stack.key
            if key.startswith("pid ") and pid_ranks and key[4:] in pid_ranks:
                key = f"rank {pid_ranks[key[4:]]}"
            if key in seen or not stack.frames:
                continue
            if not (stack.main or stack.frames[-1].name == "<module>"):
                continue
            if _helper(stack):
                continue
            state = _read(stack)
            seen[key] = state if key == stack.key else replace(state, key=key)
        return list(seen.values())


def _helper(stack: ThreadStack) -> bool:
    """A launcher's or a worker's process, not a rank (torch.multiprocessing.spawn's parent waits in
    ProcessContext.join; its children run through the same file, in _wrap)."""
    for f in stack.frames:
        path = f.file.replace("\\", "/")
        if any(helper in path for helper in _HELPER_FILES):
            return True
        if path.endswith("torch/multiprocessing/spawn.py") and f.name.rsplit(".", 1)[-1] in ("join", "start_processes"):
            return True
    return False


def _read(stack: ThreadStack) -> ProcessState:
    from advisor.facts import COLLECTIVE_CALLS  # the one list of torch.distributed calls
    from advisor.stack_activity import user_frames

    waits_in = None
    top = stack.frames[0]
    if (top.name.rsplit(".", 1)[-1], top.file.replace("\\", "/").rsplit("torch/", 1)[-1]) in _AUTOGRAD_ENGINE:
        # blocked inside the autograd engine itself: a backward's kernels are queued, not waited for,
        # so a hung process stays there only while the engine waits for DDP's reducer (its gradient
        # all-reduce), the same reading advisor.facts gives a collective error raised out of backward
        waits_in = "all_reduce"
    for f in stack.frames:
        if waits_in:
            break
        name = f.name.rsplit(".", 1)[-1]  # py-spy prints qualified names from Python 3.11
        path = f.file.replace("\\", "/")
        if name in COLLECTIVE_CALLS and path.endswith("distributed/distributed_c10d.py"):
            waits_in = name
        elif any(name == fn and path.endswith(file) for fn, file in _DDP_BROADCASTS):
            waits_in = "broadcast"
        elif f.name in _NCCL_CALLS:
            waits_in = _NCCL_CALLS[f.name]
    mine = user_frames(stack.frames)
    where = (mine[0] if mine else stack.frames[0]).where()
    return ProcessState(stack.key, stack.line, waits_in, activity(stack.frames), where)

