"""Facts read from a log: what failed, where, when, on which ranks, under which versions.

Facts are the vocabulary of the KB's rules and of the guided questions. `FACTS` is the registry
(a KB rule naming an unknown fact is a KB error). `FactCollector` listens to the scanner and keeps
bounded state however long the log is; `finalize()` turns it into a `Facts` object whose every
value remembers where it came from (a log line, an answer, an inference).

The message formats parsed here are PyTorch's and NCCL's own (see shared/reference/facts.md §1.4
for the version history of each string); framework-specific cues come from the KB.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from advisor.models import Facts, FactValue, FailureEvent
from advisor.scan import LineHit, Probe, rank_prefix
from advisor.stackdumps import StackDumps

Kind = Literal["str", "int", "float", "bool", "version", "list", "dict"]


@dataclass(frozen=True)
class FactSpec:
    name: str
    kind: Kind
    doc: str
    domain: tuple[str, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()
    """how software spells a domain value (NCCL's link layer `IB`), lowercased -> the value."""


_SPECS = [
    FactSpec("phase", "str", "what the job was doing when it failed",
             ("init", "first-step", "train", "save", "eval", "data-prep", "end-of-epoch")),
    FactSpec("framework", "str", "the training framework (a KB framework id)"),
    FactSpec("framework_version", "version", "the framework's version"),
    FactSpec("torch_version", "version", "PyTorch version (read, answered, or inferred from message wording)"),
    FactSpec("nccl_version", "version", "NCCL version"),
    FactSpec("cuda_version", "version", "CUDA version"),
    FactSpec("transformers_version", "version", "transformers version"),
    FactSpec("nodes", "int", "number of nodes"),
    FactSpec("gpus_per_node", "int", "GPUs (ranks) per node"),
    FactSpec("world_size", "int", "total number of ranks"),
    FactSpec("model_size_b", "float", "model size in billions of parameters"),
    FactSpec("backend", "str", "process-group backend", ("nccl", "gloo")),
    FactSpec("op_type", "str", "collective that timed out, as printed (ALLREDUCE, _ALLGATHER_BASE, ...)"),
    FactSpec("op_family", "str", "collective family",
             ("allreduce", "allgather", "reduce_scatter", "broadcast", "barrier", "alltoall", "send_recv", "reduce", "gather", "scatter", "other")),
    FactSpec("timeout_ms", "int", "collective timeout in force (Timeout(ms)=...)"),
    FactSpec("ran_for_ms", "int", "how long the timed-out collective ran"),
    FactSpec("seq_num", "int", "sequence number of the timed-out collective"),
    FactSpec("numel_in", "int", "elements in the timed-out collective's input"),
    FactSpec("numel_out", "int", "elements in its output"),
    FactSpec("group_size", "int", "ranks in the timed-out collective's group (NumelOut/NumelIn of an all-gather)"),
    FactSpec("ranks_reporting", "list", "ranks that reported a failure"),
    FactSpec("ranks_seen", "list", "ranks that printed anything (by [rankN]: prefix)"),
    FactSpec("silent_ranks", "list", "ranks of the world that reported no failure: the suspects"),
    FactSpec("reporting_count", "int", "how many ranks reported a failure"),
    FactSpec("every_rank_timed_out", "bool", "every rank of the world reports its own collective timeout: all were "
             "waiting, none was busy elsewhere"),
    FactSpec("only_rank0_reported", "bool", "rank 0 alone reported the timeout although other ranks' output is in the log"),
    FactSpec("seq_spread", "bool", "ranks time out at different sequence numbers (they are out of step)"),
    FactSpec("op_mismatch", "bool", "ranks report different collectives at the same sequence number"),
    FactSpec("rank_progress", "dict", "per rank: last enqueued / completed work"),
    FactSpec("heartbeat_timeout_s", "int", "heartbeat-monitor timeout printed in the kill message"),
    FactSpec("store_timeout_s", "int", "TCPStore / socket / rendezvous timeout printed in the message"),
    FactSpec("rendezvous_host", "str", "master / rendezvous address the ranks connect to"),
    FactSpec("loopback_transport", "bool", "a rank's gloo or NCCL transport address is a loopback one (127.x, ::1, lo): "
             "ranks on other machines cannot reach it"),
    FactSpec("bridge_address", "bool", "a rank connects to, or advertises, an address of Docker's default bridge "
             "(docker0, 172.17.0.0/16): private to its host, so ranks on other machines cannot reach it"),
    FactSpec("nccl_failed_transport", "str", "the NCCL transport module NCCL's error trail first passes through "
             "(src/transport/<module> in an `INFO file:line -> code` line; bootstrap: src/bootstrap.cc with a system error)",
             ("ib", "socket", "p2p", "shm", "nvls", "collnet", "bootstrap")),
    FactSpec("nccl_areas", "list", "the parts of NCCL its WARN lines and error trail come from (by source file: ib, "
             "socket, bootstrap, proxy, shm, p2p, nvls, collnet, ras, init, topology, cumem, registration, plugin)"),
    FactSpec("rendezvous_loopback", "bool", "the rendezvous address is this machine (127.0.0.1, localhost)"),
    FactSpec("clients_joined", "int", "ranks that joined the store before it timed out"),
    FactSpec("first_failure", "str", "kind of the earliest failure (cascade excluded)",
             ("timeout", "heartbeat", "oom", "exception", "killed", "hardware", "network", "nccl-error", "store-timeout", "launch")),
    FactSpec("failure_kinds", "list", "kinds of every failure seen"),
    FactSpec("user_exception", "str", "the first application exception (not a distributed-machinery one), type: message"),
    FactSpec("exception_before_timeout", "bool", "an application exception came before the first timeout"),
    FactSpec("exception_in_framework", "bool", "the failing traceback's innermost non-torch frame is inside a training framework's own code"),
    FactSpec("exception_catalogued", "bool", "the failing exception's line is a catalogued message that names a cause other than the exception itself (a check the software makes on purpose, not a bug in it)"),
    FactSpec("exception_cut_off", "bool", "the failing traceback ends before its exception line (a truncated paste): "
             "where it failed is known, what was raised is not"),
    FactSpec("exception_module", "str", "package of that frame (a framework id, or 'user')"),
    FactSpec("rank0_silent", "bool", "other ranks reported a failure but rank 0 did not (rank 0 is usually the one doing extra work)"),
    FactSpec("exit_code", "int", "first non-zero exit code a launcher reported"),
    FactSpec("signal", "str", "signal that ended a rank (SIGKILL, SIGTERM, SIGABRT, SIGSEGV, SIGBUS)"),
    FactSpec("slowdown", "bool", "throughput fell sharply (>5x) shortly before the failure"),
    FactSpec("step", "int", "last training step / progress count seen before the failure"),
    FactSpec("no_error_lines", "bool", "the log shows no error at all: a silent hang"),
    FactSpec("hosts", "list", "host names seen in NCCL lines"),
    FactSpec("storage", "str", "where checkpoints and logs are written",
             ("local-nvme", "network-fs", "object-store", "tmpfs")),
    FactSpec("container", "str", "how the ranks run", ("bare-metal", "docker", "kubernetes", "slurm", "vm")),
    FactSpec("interconnect", "str", "how GPUs/nodes talk",
             ("nvlink", "pcie", "infiniband", "roce", "ethernet", "efa"), (("ib", "infiniband"),)),
    FactSpec("inference_engine", "str", "the inference engine whose worker processes printed the log (its workers issue every collective)",
             ("vllm", "sglang"), (("rayworkervllm", "vllm"), ("rayworkerwrapper", "vllm"), ("vllmworkerprocess", "vllm"),
                                  ("vllmworker", "vllm"), ("enginecore", "vllm"), ("worker", "vllm"),
                                  # SGLang's scheduler prefix names its parallel ranks, not the engine
                                  ("tp", "sglang"), ("dp", "sglang"), ("pp", "sglang"), ("ep", "sglang"),
                                  ("attn_cp", "sglang"), ("moe_dp", "sglang"))),
    FactSpec("saves_optimizer", "bool", "checkpoints include the optimizer state"),
    FactSpec("sharded_checkpoint", "bool", "each rank writes its own shard (FSDP/DCP/ZeRO) rather than rank 0 gathering everything"),
    FactSpec("startup_skew_s", "int", "how far apart (seconds) the nodes or ranks start"),
    FactSpec("waiting_ops", "dict", "per rank (or dumped process): the torch.distributed call its traceback or stack dump was waiting in (all_reduce, all_gather, barrier, ...)"),
    FactSpec("duplicate_ranks", "list", "global ranks announced by more than one process (two nodes computed the same ranks)"),
    FactSpec("awaited_rank", "int", "the rank whose key the store waited for (the last number of a `keys: .../N` store key)"),
    FactSpec("launched_on_one_node_only", "bool", "the launcher ran the job on this machine alone (DeepSpeed found no hostfile): "
             "on a multi-node job the other nodes are not part of the world"),
    FactSpec("rank_outside_world", "bool", "a rank id at or beyond the world size was used or awaited"),
    FactSpec("world_as_launched", "bool", "the world size the log shows equals what was started (nodes, or nodes x GPUs "
             "per node, as answered): false when the log's world is larger or smaller"),
    FactSpec("socket_ifname_set", "bool", "the log shows NCCL_SOCKET_IFNAME set: the job names NCCL's interface itself"),
    FactSpec("world_joined", "bool", "a line says the ranks of a process group all arrived (Lightning's 'All distributed "
             "processes registered', torch's completed store-based barrier, an NCCL communicator's Init COMPLETE): they "
             "agreed on its size"),
    FactSpec("later_group_barrier", "bool", "the store-based barrier that waits is a process group's created after the default "
             "one (new_group): every rank already joined the default group, so the world size was right"),
    FactSpec("store_setup_failed", "bool", "a traceback runs through the creation of the rendezvous store (TCPStore "
             "construction in torch.distributed's rendezvous handlers or the elastic rendezvous): the failure came "
             "while the ranks were creating or reaching the store, before any process group existed"),
    FactSpec("worker_group_restarted", "bool", "torchrun's elastic agent restarted its worker group (max_restarts > 0, or nodes joined)"),
    FactSpec("peer_lost", "bool", "a connection to another rank was closed or reset: that peer died or was killed"),
    FactSpec("peer_silent", "bool", "a peer was lost and some rank of the world printed no `[rankN]:` line at all, while "
             "others did (torch >= 2.3 prefixes a rank's uncaught traceback): it died without a traceback (a signal, the "
             "OOM killer) or finished, or its output is not in this log"),
    FactSpec("peer_fate", "str", "how the rank that stopped first ended, from its own log",
             ("exception", "killed", "host-oom", "gpu-oom", "hardware", "hang", "finished", "not-a-rank")),
    FactSpec("root_cause_rank", "int", "the rank torchrun's failure summary names as the first observed failure"),
    FactSpec("root_cause_exit_code", "int", "that rank's exit code (negative: killed by that signal)"),
    FactSpec("others_exited_cleanly", "bool", "torchrun's failure summary lists no other failed worker (<NO_OTHER_FAILURES>): "
             "the agent's other ranks ended without an error"),
    FactSpec("others_stopped_by_agent", "bool", "torchrun's failure summary lists other failed workers, but each exited with the "
             "signal the agent sent it (\"Sending process N closing signal SIGTERM\") after the root-cause rank failed: "
             "they were still alive then"),
    FactSpec("packing", "bool", "TRL/HF dataset packing is on"),
    FactSpec("cuda_error", "str", "the CUDA runtime's error string a failing CUDA call reported (cudaGetErrorString), "
             "as a tool that checks each call prints it (nccl-tests' 'Test CUDA failure <file>:<line> '<error>'')"),
    FactSpec("wrong_results", "bool", "collectives completed but returned wrong data (nccl-tests' '# Out of bounds values : N FAILED' "
             "or 'rank=N #wrong=N'): some data path corrupts what it carries"),
    FactSpec("jit_during_inference", "bool", "an inference engine compiled a kernel while serving (vLLM's jit_monitor "
             "warning): that step is far slower than the others"),
    FactSpec("p2p_unavailable", "bool", "NCCL says CUDA allows no peer-to-peer between two GPUs it sees connected, so it "
             "routes their traffic through host memory (/dev/shm) instead (src/graph/paths.cc, src/transport/p2p.cc INFO lines)"),
    FactSpec("stray_peer", "str", "the address of a connection that reached an NCCL listening port without NCCL's magic number "
             "(NCCL 2.27.3+ prints it; 'unknown' when only the older wrong-magic warning shows): something that is not a rank"),
    FactSpec("nccl_ras_addr", "str", "the address NCCL's RAS thread listens on for its clients (NCCL >= 2.24 prints it at init)"),
    FactSpec("ras_queried", "bool", "something queries NCCL's RAS port while the job runs (the ncclras tool, a monitoring agent on port 28028)"),
    FactSpec("uses_vllm", "bool", "GRPO/online training with a separate vLLM server"),
    FactSpec("trl_trainer", "str", "which TRL trainer runs (its module in a traceback, SFTTrainer's metric, or answered)",
             ("sft", "grpo", "dpo", "orpo", "cpo", "kto", "ppo", "rloo", "reward", "gkd", "bco", "prm", "xpo", "nash_md", "other")),
    FactSpec("trl_version", "version", "TRL version (the framework's own under TRL; asked for under Open-R1, which has no releases)"),
    FactSpec("accelerate_version", "version", "accelerate version"),
    FactSpec("deepspeed_version", "version", "DeepSpeed version"),
    FactSpec("uses_deepspeed", "bool", "DeepSpeed creates the process group (ZeRO under HF Trainer, accelerate or Lightning, or the deepspeed launcher)"),
    FactSpec("use_cpu", "bool", "HF TrainingArguments use_cpu / no_cuda: training on CPU with gloo"),
    FactSpec("save_on_one_rank", "bool", "the script calls the save (or a collective around it) under a rank check "
             "(`if rank == 0`, `is_global_zero`, `is_main_process`)"),
    FactSpec("training_finished", "bool", "the training loop reported its normal end before the failure "
             "(Lightning's `Trainer.fit` stopped, the HF Trainer's Training completed)"),
    FactSpec("resumed", "bool", "the run resumed from a checkpoint past step 0"),
    FactSpec("harmless_reading", "bool", "a quiet log whose recognised lines include harmless ones: it reads as a hang "
             "and as a healthy run with warnings alike (set after ranking, for the run_outcome question)"),
    FactSpec("run_outcome", "str", "how the run ended as its owner saw it: stuck, stopped with an error, or finished normally "
             "(a quiet log is any of the three)", ("hung", "crashed", "finished")),
    # from Flight Recorder dumps (advisor.fr_join)
    FactSpec("fr_mismatch", "bool", "Flight Recorder: ranks issued different collectives (op, sizes or dtypes) at the same sequence number"),
    FactSpec("fr_stragglers", "list", "Flight Recorder: ranks with a dump that never entered the collective the others wait in"),
    FactSpec("fr_missing_ranks", "list", "Flight Recorder: ranks without a usable dump"),
    FactSpec("fr_missing_culprits", "list", "Flight Recorder: ranks the others wait for that left no usable dump (dead, or the dump was lost)"),
    FactSpec("fr_dead_rank", "bool", "Flight Recorder: the rank the others wait for left no dump, and the log shows it exiting"),
    FactSpec("straggler_activity", "list", "what the ranks the others wait for are doing, read from their stacks (the Flight "
             "Recorder stack of a culprit's last collective, or a stack dump of a process outside any collective)",
             ("save", "eval", "data", "dataloader", "logging")),
    FactSpec("dump_stragglers", "list", "stack dumps (py-spy, faulthandler): processes outside any torch.distributed call while others wait in one"),
]
FACTS: dict[str, FactSpec] = {s.name: s for s in _SPECS}

# Exception types raised *because* a collective or the launcher failed: consequences, not causes.
_CASCADE_EXCEPTIONS = re.compile(
    r"(?:DistBackendError|DistError|DistStoreError|DistNetworkError|ChildFailedError|SignalException"
    r"|Rendezvous\w*Error|KeyboardInterrupt|SystemExit|BrokenPipeError|ConnectionResetError"
    # torch.multiprocessing.spawn wraps a child's failure: the child's own traceback and exception
    # are printed with it, and its signal (ProcessExitedException) is read by the catalogue
    r"|ProcessRaisedException|ProcessExitedException)$"
)
_CASCADE_MESSAGE = re.compile(
    r"NCCL|[Gg]loo|ProcessGroup|[Ww]atchdog|collective|timed out|[Tt]imeout|SIGTERM|signal|[Ss]ocket"
    r"|[Cc]onnection (?:reset|closed|refused)|store|rendezvous|c10d|abort",
)
_OOM_MESSAGE = re.compile(r"out of memory|OutOfMemoryError", re.IGNORECASE)
# torch/_utils.py ExceptionWrapper.reraise: "Caught <type> <where>." then "Original Traceback ...":
# the exception a worker, the pin-memory thread or a DataParallel replica raised, re-raised wrapped
_WRAPPER_MESSAGE = re.compile(r"Caught \w+ in (?:DataLoader worker process|pin memory thread|replica) ")

_KV = {
    "seq": re.compile(r"SeqNum=(\d+)"),
    "op": re.compile(r"OpType=(\w+)"),
    "nin": re.compile(r"NumelIn=(-?\d+)"),
    "nout": re.compile(r"NumelOut=(-?\d+)"),
    "tmo": re.compile(r"Timeout\(ms\)=(\d+)"),
    "ran": re.compile(r"ran for (\d+) milliseconds"),
    "rank": re.compile(r"\[(?:PG[^\]]{0,80}?)?Rank (\d+)\]"),
}

_GLOG_TS = re.compile(r"(?:^|[\[\s:])[IWEF](\d{1,2})(\d\d) (\d\d):(\d\d):(\d\d)(?:\.\d+)?")
_ISO_TS = re.compile(r"(20\d\d)-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)")


# A timestamp is a line prefix: only this much of a line is searched for one, so the hits on a giant
# line (up to the scanner's 64 KiB window each) cost constant time, not the line's length.
TIMESTAMP_SCAN = 1024
# On a line longer than LONG_LINE, the per-hit field regexes (`_KV`) read only the text from NEAR_BEFORE
# characters ahead of the match to NEAR_AFTER past its start: a WorkNCCL description and its
# `[Rank N]` prefix and `ran for` suffix are a few hundred characters long.
LONG_LINE = 4096
NEAR_BEFORE, NEAR_AFTER = 256, 768
MAX_DIGITS = 18
"""the longest number a fact takes from a log: no count, size or duration a log prints is longer, a
longer run is junk, and int() refuses runs over 4300 digits (a hostile `SeqNum=999...` line)."""


def _int(text: str | None) -> int | None:
    """A number a probe captured, or None when there is none or it is too long to be real."""
    if not text or len(text.lstrip("+-")) > MAX_DIGITS:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _float(text: str | None) -> float | None:
    if not text or len(text) > 2 * MAX_DIGITS:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _version(text: str | None) -> str | None:
    """A version a probe captured, or None when it is too long to be one (`torch==99999...`)."""
    if not text or len(text) > 64 or re.search(r"\d{10}", text):
        return None
    return text


# NCCL source path (as its lines print it, from src/) -> the part of NCCL it belongs to; first match wins
_NCCL_AREAS = (
    ("ras/", "ras"), ("net_ib", "ib"), ("ibvwrap", "ib"), ("ibvcore", "ib"), ("ibvsymbols", "ib"), ("gdrwrap", "ib"),
    ("net_socket", "socket"), ("socket", "socket"), ("bootstrap", "bootstrap"), ("proxy", "proxy"),
    ("transport/shm", "shm"), ("shm", "shm"), ("transport/p2p", "p2p"), ("nvls", "nvls"), ("coll_net", "collnet"),
    ("graph/", "topology"), ("topo", "topology"), ("register", "registration"), ("cudawrap", "cumem"),
    ("mem_manager", "cumem"), ("allocator", "cumem"), ("plugin/", "plugin"), ("net.cc", "plugin"), ("init.c", "init"),
)


def nccl_area_of(path: str) -> str | None:
    """The part of NCCL a source file printed by its lines belongs to (None: no part a fix names)."""
    for fragment, area in _NCCL_AREAS:
        if fragment in path:
            return area
    return None


def _keep_site(sites: list[tuple[str, int]], hit: LineHit) -> None:
    """Remember a printed NCCL source line (`file.cc`, N) once, a bounded number of them."""
    line = _int(hit.group("line"))
    site = (hit.group("file") or "", line)
    if line is not None and site not in sites and len(sites) < 64:
        sites.append(site)


def timestamp_of(text: str) -> tuple[int, int, int] | None:
    """(month, day, second-of-day) from a glog or ISO timestamp on the line; years are ignored
    because glog lines have none and a job rarely spans New Year."""
    text = text[:TIMESTAMP_SCAN]
    m = _ISO_TS.search(text)
    if m:
        _, mo, d, hh, mm, ss = (int(x) for x in m.groups())
        return mo, d, hh * 3600 + mm * 60 + ss
    m = _GLOG_TS.search(text)
    if m:
        mo, d, hh, mm, ss = (int(x) for x in m.groups())
        if 1 <= mo <= 12 and 1 <= d <= 31:
            return mo, d, hh * 3600 + mm * 60 + ss
    return None


def op_family(op: str) -> str:
    o = op.lower().lstrip("_")
    table = [
        ("reduce_scatter", "reduce_scatter"), ("reducescatter", "reduce_scatter"),
        ("allgather", "allgather"), ("all_gather", "allgather"),
        ("allreduce", "allreduce"), ("all_reduce", "allreduce"),
        ("alltoall", "alltoall"), ("all_to_all", "alltoall"),
        ("broadcast", "broadcast"), ("barrier", "barrier"),
        ("send", "send_recv"), ("recv", "send_recv"),
        ("reduce", "reduce"), ("gather", "gather"), ("scatter", "scatter"),
    ]
    for key, fam in table:
        if key in o:
            return fam
    return "other"


# Path segments that place a traceback frame inside a framework's own code (a site-packages
# install or a source checkout), innermost first when several match.
FRAMEWORK_PATHS = [
    ("llamafactory/", "llama-factory"), ("open_r1/", "open-r1"), ("trl/", "trl"), ("torchtitan/", "torchtitan"),
    ("pytorch_lightning/", "lightning"), ("lightning/pytorch/", "lightning"), ("lightning/fabric/", "lightning"),
    ("lightning_fabric/", "lightning"), ("deepspeed/", "deepspeed"), ("accelerate/", "accelerate"),
    ("transformers/", "transformers"),
]
_LIBRARY_PATH = re.compile(r"(?:site-packages|dist-packages)/torch/|/torch/(?:distributed|nn|utils|_dynamo|cuda)/|/lib/python3\.\d+/(?!site-packages|dist-packages)|<frozen |^<")


# The console scripts launchers install next to python (bin/ of a venv or prefix; each package's
# entry_points.txt in the integration environment: torch's torchrun, accelerate's accelerate[-launch],
# TRL's trl, Lightning's fabric; DeepSpeed's bin/deepspeed and ds scripts; LLaMA-Factory's
# llamafactory-cli, the launcher kb/frameworks/llama-factory.yaml names): a frame in one is the
# launcher's own code, not the user's
LAUNCHER_SCRIPTS = {
    "torchrun": "torch", "accelerate": "accelerate", "accelerate-launch": "accelerate", "deepspeed": "deepspeed",
    "ds": "deepspeed", "trl": "trl", "fabric": "lightning", "llamafactory-cli": "llama-factory",
}


def frame_owner(path: str) -> str | None:
    """'torch' for torch/stdlib frames, a framework id for framework code, None for user code."""
    p = path.replace("\\", "/")
    if _LIBRARY_PATH.search(p):
        return "torch"
    _, in_bin, script = p.rpartition("/bin/")
    if in_bin and script in LAUNCHER_SCRIPTS:
        return LAUNCHER_SCRIPTS[script]
    for marker, fw in FRAMEWORK_PATHS:
        if marker in p:
            return fw
    if "site-packages/" in p or "dist-packages/" in p:
        return "library"
    return None


# --- the fact probes: message formats of PyTorch, NCCL and the launchers ----------------------

@dataclass(frozen=True)
class FactProbe:
    id: str
    pattern: str
    ignore_case: bool = True
    recurring: str | None = None
    """"first" when its handler keeps only the first values it sees (a version banner), "latest" when
    only the most recent (a progress bar): on a line printed a million times the scanner may then
    skip the repeats (advisor.scan)."""


# What launchers and log collectors put before each line a rank prints, so that probes anchored at a
# line's start still find their text: torchrun's `[rank3]:` / `[default3]:` (torch >= 2.3's
# excepthook, --tee), Open MPI's --tag-output `[1,3]<stderr>:`, horovodrun's `[3]<stderr>:` (after
# its own date), srun --label's `  3: `, pdsh's `host-3: ` (DeepSpeed's multi-node runner; a host
# name with a digit, or an IPv4 address), Ray's `(RayTrainWorker pid=123, ip=10.0.0.3) `, and a
# collector's timestamp (`2026-09-18 19:29:44 `, `[2024-03-18 17:38:50,208] `). Up to three, in any
# order (a timestamp, then pdsh's host, then torchrun's rank).
_TIMESTAMP_TAG = r"\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]? "
_HOST_TAG = r"(?:[A-Za-z][\w-]{0,40}\d[\w-]{0,20}(?:\.[\w-]{1,63}){0,5}|\d{1,3}(?:\.\d{1,3}){3}): "
LINE_PREFIX = (
    r"(?:\[(?:rank|default)\d+\]:"
    r"|\[\d+,\d+\]<std(?:out|err)>:"
    r"|(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})?\[\d+\]<std(?:out|err)>:"
    r"| {0,5}\d{1,5}: "
    r"|\((?:\w+ )?pid=\d+(?:, ip=[\d.]+)?\) "
    rf"|{_TIMESTAMP_TAG}|{_HOST_TAG}){{0,3}}"
)


# py-spy prints its dumps itself, so no launcher prefixes its lines; a user who dumps each rank may
# label them the way torchrun does. A small prefix keeps these line-anchored probes cheap.
_DUMP_PREFIX = r"(?:\[(?:rank|default)\d{1,6}\]:)?"
_FH_FRAME_HEAD = re.compile(_DUMP_PREFIX)


FACT_PROBES: list[FactProbe] = [
    # ProcessGroupNCCL WorkNCCL descriptions (watchdog timeout, desync report, "Timeout at NCCL work")
    FactProbe("work-nccl", r"WorkNCCL\(SeqNum=\d+", ignore_case=False),
    FactProbe("work-progress", r"last enqueued (?:NCCL )?work: (?P<enq>-?\d+), last completed (?:NCCL )?work: (?P<done>-?\d+)"),
    FactProbe("gloo-timeout", r"Timed out waiting (?P<ms>\d+) ?ms for (?:recv|send) operation"),
    FactProbe("torch-version", r"(?:\btorch(?:==| version[: ]|-)|PyTorch version[: ] ?)v?(?P<v>\d+\.\d+(?:\.\d+)?(?:\.?(?:dev|a|rc)\d*)?(?:\+\w+)?)", recurring="first"),
    FactProbe("nccl-version", r"NCCL version (?P<v>\d+\.\d+(?:\.\d+)?)(?:\+cuda(?P<cuda>\d+\.\d+))?", recurring="first"),
    # nccl-tests' header (src/common.cu, 2.18.5 on): "# nccl-tests version 2.19.6 nccl-headers=22703
    # nccl-library=22703", NCCL_VERSION_CODE and ncclGetVersion; the library is what ran
    FactProbe("nccl-tests-header", r"# nccl-tests version \S{1,20} nccl-headers=\d{4,6} nccl-library=(?P<code>\d{4,6})\b",
              ignore_case=False, recurring="first"),
    FactProbe("nccl-compiled", r"compiled with NCCL (?P<v>\d+\.\d+(?:\.\d+)?)", recurring="first"),
    FactProbe("cuda-version", r"\bCUDA (?:runtime |Version:? |version:? )(?P<v>\d+\.\d+)", recurring="first"),
    FactProbe("transformers-version", r"\btransformers`?(?:==| version[: ] ?)v?(?P<v>\d+\.\d+(?:\.\d+)?)", recurring="first"),
    FactProbe("member", r"GLOBAL_RANK: (?P<rank>\d+), MEMBER: (?P<member>\d+)/(?P<world>\d+)"),
    FactProbe("lf-tasks", r"Initializing (?P<world>\d+) distributed tasks at: (?P<host>[\w.:\[\]-]+?):(?P<port>\d+)"),
    FactProbe("nranks", r"\brank (?P<rank>\d+) nranks (?P<world>\d+)\b"),
    FactProbe("world-size-kv", r"\b(?:world_size|WORLD_SIZE)[=:] ?(?P<world>\d+)"),
    FactProbe("nnodes", r"(?:--nnodes[= ]|\bnnodes[=:] ?|\bnum_nodes[=:] ?|NNODES=|--nodes[= ]|\bmin_nodes: ?)(?P<n>\d+)"),
    FactProbe("nproc", r"(?:--nproc[_-]per[_-]node[= ]|\bnproc_per_node[=:] ?|NPROC_PER_NODE=|\bdevices[=:] ?|\bgpus[=:] ?|\bnGpus )(?P<n>\d+)\b"),
    FactProbe("nccl-host", r"(?m)^" + LINE_PREFIX + r"(?P<host>[A-Za-z0-9][\w.-]{0,62}):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:NCCL (?:INFO|WARN)|[\w/.]+:\d+ NCCL WARN)", ignore_case=False),
    FactProbe("nccl-test-rank", r"Rank +(?P<rank>\d+) (?:Group +\d+ )?(?:Pid +\d+ )?on +(?P<host>[\w.-]+) device +(?P<dev>\d+)"),
    # a rank's transport address is loopback: gloo's connect errors name the remote and local
    # addresses (gloo/transport/tcp: "SO_ERROR: Connection refused, remote=[127.0.0.1]:port",
    # "(rank=8, size=16, local=[127.0.0.1])"), NCCL names the interface it uses ("Using [0]lo:127.0.0.1")
    FactProbe("loopback-transport", r"(?:(?:remote|local)=\[(?:127\.\d+\.\d+\.\d+|::1)\]|NCCL INFO (?:Bootstrap|NET/Socket) ?: Using (?:\[\d+\])?lo:)"),
    # NCCL prints the source line of each warning: the lines date the NCCL build (advisor.frames)
    FactProbe("nccl-warn-site", r"\] (?P<file>[\w/.-]{1,80}\.(?:cc|cu|h|cpp)):(?P<line>\d{1,6}) NCCL WARN", ignore_case=False),
    # ... and of each check an error passes on its way up ("NCCL INFO bootstrap.cc:701 -> 6",
    # src/include/checks.h): those lines date it too
    FactProbe("nccl-trail-site", r"NCCL INFO (?P<file>[\w/.-]{1,80}\.(?:cc|cu|h|cpp)):(?P<line>\d{1,6}) -> -?\d", ignore_case=False),
    # Docker's default bridge (docker0, whose default subnet is 172.17.0.0/16:
    # https://docs.docker.com/engine/network/drivers/bridge/,
    # https://docs.mirantis.com/mke/current/install/plan-deployment/mcr-considerations/docker0.html) as the interface NCCL
    # or gloo picked ("Using docker0:172.17.0.1", "Using [0]eth0:172.17.0.5" inside a bridged
    # container) or as the address a rank dials ("connect to (172.17.0.2, 44737)", "Connect to
    # 172.17.0.2<39133>", gloo's "remote=[172.17.0.3]:port")
    FactProbe("bridge-address", r"(?:Using (?:\[\d+\])?docker0:|Using (?:\[\d+\])?\w{1,15}:172\.17\.\d{1,3}\.\d{1,3}\b|[Cc]onnect to \(?172\.17\.\d{1,3}\.\d{1,3}\b|remote=\[172\.17\.\d{1,3}\.\d{1,3}\])"),
    # NCCL's error trail ("file:line -> code", src/include/checks.h) prints each source file an error
    # passes through: one under src/transport/ names the transport that failed (net_ib.cc/.cu and
    # net_ib/*.cc InfiniBand/RoCE verbs, net_socket TCP, p2p, shm, nvls, coll_net). Only the trail
    # counts: a WARN line is already its own catalogued message (one line, one vote). NCCL < 2.4
    # printed "INFO" without the "NCCL" word.
    # NCCL's bootstrap (src/bootstrap.cc: the TCP connections to the root and ring peers it opens
    # at init, over the interface NCCL_SOCKET_IFNAME picks) in the trail with ncclSystemError (2, a
    # socket call failed) counts too: its other codes are NCCL's own state, not the network
    FactProbe("nccl-transport-site", r"\bINFO (?:transport/(?P<transport>net_ib|net_socket|p2p|shm|nvls|coll_net)(?:/\w{1,40})?\.(?:cc|cu):\d{1,6} -> -?\d"
                                     r"|(?P<boot>bootstrap)\.c[cu]:\d{1,6} -> 2\b)", ignore_case=False),
    FactProbe("gloo-connect-world", r"\brank=(?P<rank>\d+), size=(?P<world>\d+)"),
    FactProbe("connect-target", r"(?:connect to \((?P<h1>[^,()\s]+), (?P<p1>\d+)\)|Connect to (?P<h2>[\w.:-]+)<(?P<p2>\d+)>|network address of \((?P<h3>[^,()\s]+), (?P<p3>\d+)\)|connect/validate to host (?P<h4>[^\s:]+):(?P<p4>\d+)|MASTER_ADDR[=:] ?(?P<h5>[\w.-]+)|rdzv[_-]endpoint[=: ]+(?P<h6>[\w.-]+):(?P<p6>\d+))"),
    FactProbe("store-timeout", r"(?:timed out after (?P<s1>\d+)s? |Timed out after (?P<s2>\d+) seconds waiting for clients|wait timeout after (?P<ms>\d+) ?ms|timed out after (?P<ms2>\d+) ?ms)"),
    FactProbe("exception-line", r"(?m)^" + LINE_PREFIX + r" ?(?P<type>(?:[A-Za-z_]\w*\.){0,6}[A-Z]\w*(?:Error|Exception|Interrupt))(?:: (?P<msg>.{0,500}))?$", ignore_case=False),
    FactProbe("traceback-start", r"Traceback \(most recent call last\)", ignore_case=False),
    # a traceback's frame ('File "p", line n, in f'); without the comma, a faulthandler dump's frame
    # (below): one probe for both keeps the scanner's automaton small
    FactProbe("frame", r'File "(?P<path>[^"\n]{1,400})", line (?P<lineno>\d+)(?P<tb>,)? in (?P<func>[\w<>.]+)', ignore_case=False),
    # the same frame as rich prints it (accelerate, Lightning): "/…/transformers/trainer.py:1624 in train"
    FactProbe("rich-frame", r"(?P<path>/[\w./+-]{1,400}\.py):(?P<lineno>\d+) in (?P<func>\w+)", ignore_case=False),
    # torchrun's failure summary pairs each failed rank with its pid ("rank      : 1 (local_rank: 1)",
    # then "exitcode  : -15 (pid: 29713)", torch.distributed.elastic.multiprocessing.errors, 1.13 .. 2.13)
    FactProbe("exitcode", r"exitcode ?: ?(?P<code>-?\d+)(?: \(pid: (?P<pid>\d{1,10})\))?"),
    # the agent stopping the workers still running after the first failure (elastic/multiprocessing/api.py,
    # "Sending process %s closing signal %s", torch 1.9-2.13): a worker listed later with that signal's
    # exit code was alive until then
    FactProbe("closing-signal", r"Sending process (?P<pid>\d{1,10}) closing signal (?P<sig>SIG[A-Z]{2,8})", ignore_case=False),
    # py-spy dumps of hung processes (advisor.stackdumps; format from py-spy's src/dump.rs; torch
    # >= 2.11's debug server puts each rank's under "=== Rank <i>: <address> ==="):
    # "Process <pid>: <command line>", "Thread <tid> (idle|active|active+gil): "<name>"", and each
    # frame as "    <function> (<file>:<line>)" (native frames: "(<library or source file>)")
    FactProbe("dump-rank", r"(?m)^=== Rank (?P<rank>\d{1,6}): [^\n]{0,200} ===[ \t]*$", ignore_case=False),
    FactProbe("dump-process", r"(?m)^Process (?P<pid>\d{1,10}): \S", ignore_case=False),
    FactProbe("dump-thread", r"(?m)^" + _DUMP_PREFIX + r"Thread (?P<tid>\d{1,10}|0[xX][0-9a-fA-F]{1,16}) \((?:idle|active|active\+gil)\)"
                             r"(?:: \"(?P<name>[^\"\n]{0,200})\")?", ignore_case=False),
    FactProbe("dump-frame", r"(?m)^" + _DUMP_PREFIX + r" {4}(?P<func>[^\s()][^()\n]{0,150}?) \((?P<path>[^()\s]{1,250}?\.(?:py|pyx|so[\w.]{0,12}|cc|cpp|cu|c|h)|<\w{1,20}>)"
                            r"(?::(?P<lineno>\d{1,7}))?\)\s*$", ignore_case=False),
    # Python's faulthandler dumps (CPython Python/traceback.c: write_thread_id, dump_frame), printed on a fatal signal when faulthandler is on (PYTHONFAULTHANDLER=1, `python -X
    # faulthandler`, torch.distributed.elastic's @record), on SIGABRT from NCCL's watchdog too, or on
    # demand (faulthandler.dump_traceback_later / register): "Fatal Python error: Aborted" or
    # "Timeout (0:05:00)!", then "Current thread 0x<id> (most recent call first):" / "Thread 0x<id>
    # [name] (most recent call first):" (CPython's main branch adds the thread's name) / "Stack (most recent call first):",
    # and each frame, innermost first, as '  File "<path>", line <n> in <function>'
    # (frames: the "frame" probe's comma-less form)
    FactProbe("fh-start", r"(?m)^" + _DUMP_PREFIX + r"(?:Fatal Python error: |Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!)", ignore_case=False),
    FactProbe("fh-thread", r"(?m)^" + _DUMP_PREFIX + r"(?:(?:Current thread|Thread) 0x(?P<tid>[0-9a-fA-F]+)(?: \[(?P<name>[^\]\n]+)\]| <[^>\n]+>)?|Stack)"
                           r" \(most recent call first\):", ignore_case=False),
    # lines that read like a failure, sampled (first and latest) for the similar-text fallback
    FactProbe("error-like", r"\b(?:error|exception|failed|failure|fatal|timed out|timeout|abort(?:ed|ing)?|killed|refused|unreachable|segmentation fault|core dumped|hang(?:s|ing)?|stuck)\b", recurring="latest"),
    # torch.distributed.elastic's ChildFailedError summary: the "Root Cause" block names the rank
    # that failed first (errors/__init__.py, torch 1.9-2.13)
    FactProbe("root-cause-header", r"Root Cause \(first observed failure\):", ignore_case=False),
    FactProbe("elastic-rank", r"(?m)^" + LINE_PREFIX + r"\s*rank\s*: (?P<rank>\d+) \(local_rank: \d+\)", ignore_case=False),
    # init_process_group / new_group's store-based barrier names its group in the key: torch <= 2.0
    # keys it by the group count after the group is made (the default group is
    # "store_based_barrier_key:1") and prints "worker_count="; torch >= 2.1 by the group's name ("0"
    # for the default group, the next number or a hash of the ranks for new_group) and prints
    # "num_workers_joined=" (distributed_c10d.py's _store_based_barrier and _new_process_group_helper,
    # read in torch 1.13.1, 2.0.1, 2.1.2, 2.3.1 and 2.13.0)
    FactProbe("barrier-key", r"key: ?store_based_barrier_key:(?P<group>\w{1,64})\b[^\n]{0,80}?\((?:world_size=\d+, )?(?P<field>worker_count|num_workers_joined)=",
              ignore_case=False),
    # TCPStore wait on a gloo/c10d key whose last segment is a rank ("keys: /default_pg/0//cpu//0/2")
    FactProbe("store-key-rank", r"(?:keys?:|waiting for key:?) ?\[?'?/?[\w.-]{0,40}pg[\w/.:-]{0,160}?/(?P<rank>\d{1,6})'?\]?(?:$|[\s,.)\]])"),
    FactProbe("signal", r"Signal (?P<num>\d+) \((?P<name>SIG[A-Z]+)\) received by PID|got signal: (?P<num2>\d+)|signal: (?P<name2>SIG[A-Z]+)"
                        r"|Caught signal (?P<crash>\d+) \(|(?P<shell>Bus error|Segmentation fault|Aborted) \(core dumped\)"
                        # bash's report of a job a fatal signal ended (jobs.c): a script's "<script>: line N: <pid> <name>"
                        # or an interactive job's "[1]+ <name>" (kb/messages/shell.yaml)
                        r"|(?m:^)(?:\[\d+\][+-]? +|[^\n]*: line \d+: +\d+ )"
                        r"(?P<job>Segmentation fault|Bus error|Illegal instruction|Floating point exception)\b"
                        # Python's faulthandler (Modules/faulthandler.c, faulthandler_handlers)
                        r"|Fatal Python error: (?P<fatal>Segmentation fault|Bus error|Illegal instruction|Floating[ -]point exception|Aborted)\b"
                        # Open MPI's signal handler and mpirun's summary (kb/messages/open-mpi.yaml): the catalogue
                        # entries carry the failure event, this only names the signal
                        r"|:\d{5,}\] Signal: [A-Z][\w -]{0,40} \((?P<ompi>\d{1,2})\)|exited on signal (?P<mpirun>\d{1,2})\b"),
    FactProbe("tqdm", r"(?P<pct>\d{1,3})%\|[^|\n]{0,200}\| *(?P<cur>\d+)/(?P<tot>\d+) \[[^\]\n]{0,60}?(?:, *(?P<rate>[\d.]+)(?P<unit>s/it|it/s))?\]", recurring="latest"),
    FactProbe("titan-step", r"step: *(?P<step>\d+) +loss: [^\n]{0,200}?tps: *(?P<tps>[\d,]+)", recurring="latest"),
    # transformers >= 5.0 prints the floats as strings ({'loss': '4.17', ..., 'epoch': '0.0625'})
    FactProbe("hf-step", r"\{'loss': '?[\d.]+[^}\n]{0,400}'epoch': '?(?P<epoch>[\d.]+)'?\}", recurring="first"),
    # which TRL trainer runs: its module in a traceback, or SFTTrainer's own metric (trl/trainer/*_trainer.py)
    FactProbe("trl-trainer", r"trl/trainer/(?P<t>sft|grpo|dpo|orpo|cpo|kto|ppo|rloo|reward|online_dpo|gkd|bco|prm|xpo|nash_md)_trainer\.py"
                             r"|open_r1/(?P<recipe>sft|grpo)\.py|\b(?P<metric>mean_token_accuracy)\b", recurring="first"),
    FactProbe("model-size-name", r"[A-Za-z][\w.]*?[-_](?P<b>\d{1,4}(?:\.\d{1,2})?)[bB](?:[-_/ ]|$)", recurring="first"),
    FactProbe("model-params", r"(?:all params|total parameters|Number of parameters|num_params|total params)[:= ]*(?P<n>\d{1,3}(?:,\d{3})+|\d{7,})", recurring="latest"),
    FactProbe("titan-resume", r"Loading the checkpoint from \S*?step-(?P<step>\d+)", recurring="first"),
    FactProbe("titan-model-size", r"size: (?P<n>\d{1,3}(?:,\d{3})+) total parameters", recurring="latest"),
    # `nvidia-smi topo -m`: a GPU row lists its link to every other GPU (NV# = NVLink; PIX, PXB,
    # PHB, NODE, SYS = PCIe paths of increasing distance)
    FactProbe("topo-row", r"(?m)^" + LINE_PREFIX + r"\s*GPU\d+(?:\s+(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS)){2,}", ignore_case=False),
    FactProbe("backend-nccl", r"ProcessGroupNCCL|\bNCCL (?:INFO|WARN)\b|ncclSystemError|ncclInternalError|ncclUnhandledCudaError", ignore_case=False, recurring="first"),
    FactProbe("backend-gloo", r"ProcessGroupGloo|gloo/transport|\bgloo\b", ignore_case=False, recurring="first"),
    # ProcessGroupNCCL's log prefix, whose format some torch releases only print (shared/reference/
    # facts.md §1.4); the messages' own wordings are dated by the catalogue (advisor.dating)
    FactProbe("prefix-pg-guid", r"\[PG ID \d+ PG GUID", ignore_case=False, recurring="first"),
    FactProbe("prefix-pg-rank", r"\[PG \d+ Rank \d+\]", ignore_case=False, recurring="first"),
]

# The torch releases that print each ProcessGroupNCCL log prefix format, as a version specifier over
# the releases the catalogue was mined from. Read from libtorch_cuda.so's strings: `[PG ID ` and
# ` PG GUID ` first in the 2.5.0 wheel (absent from 2.4.1; shared/reference/facts.md §1.4 says 2.6,
# and a real torch 2.5 log shows the GUID prefix with 2.5's "Exception (either an error or timeout)"
# wording); `[PG ` from 2.3 (absent from 2.2.2), and still in the 2.5.0 strings, so its end is left
# at 2.6.
_PREFIX_RELEASES = {"prefix-pg-guid": ">=2.5", "prefix-pg-rank": ">=2.3,<2.6"}
_PREFIX_COMPONENT = "c10d-nccl"  # the component that prints the prefix: its software's releases apply


# Where a traceback shows a training step is under way (so the job is past start-up): the step and
# backward functions of Lightning, the HF Trainer and plain loops, and the frameworks' loop files.
TRAINING_LOOP_CALLS = frozenset({"training_step", "train_step", "_inner_training_loop", "optimizer_step", "backward",
                                 "_run_optimization", "training_loop"})
TRAINING_LOOP_PATHS = ("loops/training_epoch_loop.py", "loops/optimization/automatic.py", "torch/autograd/__init__.py")

# Where a traceback shows the model still being wrapped for distributed training (start-up, before any
# step): DDP's and FSDP's constructors (their first collectives: the parameter-shape check and the
# broadcast of rank 0's weights, in torch/distributed/utils.py), accelerate's prepare and DeepSpeed's
# initialize. Names as in the mined sources (kb/frames/torch.json, accelerate.json) and DeepSpeed's
# deepspeed/__init__.py and runtime/engine.py.
SETUP_FRAMES = frozenset({
    ("torch/nn/parallel/distributed.py", "__init__"),
    ("torch/distributed/fsdp/fully_sharded_data_parallel.py", "__init__"),
    ("torch/distributed/utils.py", "_verify_param_shape_across_processes"),
    ("torch/distributed/utils.py", "_sync_module_states"),
    ("accelerate/accelerator.py", "prepare"),
    ("accelerate/accelerator.py", "prepare_model"),
    ("accelerate/accelerator.py", "_prepare_one"),
    ("accelerate/accelerator.py", "_prepare_deepspeed"),
    ("accelerate/accelerator.py", "_prepare_fsdp2"),
    ("deepspeed/__init__.py", "initialize"),
    ("deepspeed/runtime/engine.py", "_broadcast_model"),
})


# Frames of the functions that construct the rendezvous TCPStore (function names checked in every
# mined torch release, kb/frames/torch.json): an exception raised with one of them on the stack was
# raised while the store was being created or reached.
STORE_SETUP_FRAMES = frozenset({
    ("torch/distributed/rendezvous.py", "_create_c10d_store"),
    ("torch/distributed/rendezvous.py", "_tcp_rendezvous_handler"),
    ("torch/distributed/rendezvous.py", "_env_rendezvous_handler"),
    ("torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", "next_rendezvous"),
    ("torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", "_create_tcp_store"),
    ("torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", "_create_tcp_store_server"),
})


# torch.distributed calls a rank can wait in: the function names of distributed_c10d.py's public
# collectives and point-to-point calls (torch 2.x), as they appear in a traceback's frames.
_AUTOGRAD_RUN = frozenset({"_engine_run_backward", "run_backward"})
COLLECTIVE_CALLS = frozenset({
    "all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "_all_gather_base", "all_gather_object",
    "all_gather_coalesced", "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base", "all_to_all",
    "all_to_all_single", "broadcast", "broadcast_object_list", "reduce", "gather", "gather_object", "scatter",
    "scatter_object_list", "barrier", "monitored_barrier", "send", "recv", "isend", "irecv", "batch_isend_irecv",
    "send_object_list", "recv_object_list",
})


def fact_probes() -> list[Probe]:
    return [Probe(f"fact:{p.id}", p.pattern, "fact", p.id, p.ignore_case, recurring=p.recurring) for p in FACT_PROBES]


# --- the collector ----------------------------------------------------------------------------


def near_hit(hit: LineHit, before: int = NEAR_BEFORE, after: int = NEAR_AFTER) -> str:
    """The text a hit's fields are read from: its line when that is of a normal length, else the
    part of the line from `before` characters ahead of the match to `after` characters past its
    start. A giant line can hold a hit every few dozen characters; reading all of it for every hit
    made such a line cost hits x line length (a 64 MB line of `WorkNCCL(SeqNum=1, ...)` repeated
    ran for minutes)."""
    text = hit.text
    if len(text) <= LONG_LINE:
        return text
    try:
        window, start, end = hit.match.string, hit.match.start(), hit.match.end()
    except (AttributeError, TypeError):
        return text[: before + after]
    # the same line bounds as LineHit.text (advisor.scan), looked for only this far from the match
    lo = window.rfind("\n", max(0, start - before), start) + 1 or max(0, start - before)
    stop = min(len(window), max(end, start + after))
    nl = window.find("\n", max(end - 1, start), stop)
    return window[lo : stop if nl < 0 else nl]


def hit_line(hit: LineHit, limit: int = 300) -> str:
    """A hit's line as shown in evidence and fact sources: its first `limit` characters, or on a
    giant line the `limit` characters around the match (the line's start can be megabytes away)."""
    if len(hit.text) <= LONG_LINE:
        return hit.text[:limit]
    return near_hit(hit, limit // 3, limit - limit // 3)[:limit]


_TRANSPORTS = {"net_ib": "ib", "net_socket": "socket", "coll_net": "collnet"}  # NCCL source module -> fact value
_MAX_RANKS = 8192
ERROR_SAMPLE = 32
_MAX_EVENTS = 256
# the signals torch's elastic agent stops workers with (its death signal, SIGKILL when one does not exit)
_SIGNAL_NUMBERS = {"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGKILL": 9, "SIGUSR1": 10, "SIGUSR2": 12, "SIGTERM": 15}


@dataclass
class _Value:
    value: Any
    line: int | None
    text: str | None
    origin: str = "log"
    detail: str | None = None


@dataclass
class _RankReport:
    seq: int | None = None
    op: str | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    line: int | None = None
    timed_out: bool = False  # this rank's own collective timed out (it was waiting, not busy elsewhere)


def captured_value(fact: str, value: str):
    """A value a KB pattern captured, held to what its fact can be: a version no longer than a
    version, a number no longer than a number, a known value of a closed set."""
    spec = FACTS.get(fact)
    if spec is not None and spec.kind == "version":
        return _version(value.strip())
    coerced = _coerce(value)
    if spec is not None and spec.kind in ("int", "float") and not isinstance(coerced, (int, float)):
        return None
    if spec is not None and spec.domain:
        key = str(coerced).lower()
        coerced = dict(spec.aliases).get(key, key)
        if coerced not in spec.domain:
            return None
    return coerced


def _coerce(value: str):
    """A captured value as a number when it is one; None for a number too long to be real (a
    hostile `stuck for 999...9 seconds`: int() refuses over 4300 digits, float() gives infinity)."""
    text = value.strip()
    body = text.lstrip("+-")
    if len(body) > MAX_DIGITS and body.replace(".", "", 1).isdigit():
        return None
    try:
        number = int(text)
    except ValueError:
        number = _float(text)  # None for nan, inf and anything long
        return value if number is None else number
    return number if abs(number) < 10**MAX_DIGITS else None



@dataclass
class FactCollector:
    """Accumulates facts from scanner hits in bounded memory."""

    phase_of: dict[str, str] = field(default_factory=dict)  # phase probe id -> phase
    framework_detect: dict[str, tuple[str, float]] = field(default_factory=dict)  # probe id -> (fw, w)
    framework_versions: dict[str, str] = field(default_factory=dict)  # probe id -> fw
    values: dict[str, _Value] = field(default_factory=dict)
    reports: dict[int, _RankReport] = field(default_factory=dict)
    events: list[FailureEvent] = field(default_factory=list)
    framework_score: Counter = field(default_factory=Counter)
    framework_evidence: dict[str, tuple[int, str]] = field(default_factory=dict)
    fw_versions: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    hosts: dict[str, set[int]] = field(default_factory=dict)
    phase_now: tuple[str, int, str] | None = None
    phase_at_failure: tuple[str, int, str] | None = None
    cause_lines: set[int] = field(default_factory=set)
    """lines holding a catalogued message that points to a cause (bounded)."""
    printed: list[tuple[str, str, tuple[str, ...], int, str]] = field(default_factory=list)
    """(component, message id or prefix probe, version specifiers its wording fits, line, text) per
    dated message (advisor.dating), the first sighting of each."""
    rates: list[tuple[int, float]] = field(default_factory=list)  # (line, throughput), thinned evenly
    last_rate: tuple[int, float] | None = None
    step_now: tuple[int, int] | None = None
    step_at_failure: tuple[int, int] | None = None
    logged_steps: int = 0  # HF step dicts seen: with no progress bar, they say training is past step 1
    exceptions: list[tuple[int, str, str, bool]] = field(default_factory=list)  # line, type, msg, cascade
    tracebacks: dict[int | None, tuple[int, list[str]]] = field(default_factory=dict)  # rank -> (start line, frame paths)
    last_traceback: int | None = None
    frames_seen: bool = False
    exception_owner: str | None = None
    wrapped_on: tuple[int | None] | None = None  # (rank,) whose user_exception so far only wraps an original below it
    first_timeout_line: int | None = None
    first_nccl_error_line: int | None = None  # the first line NCCL's own error (ncclGetErrorString text) was reported on
    ops_by_seq: dict[int, set[str]] = field(default_factory=dict)
    error_lines: int = 0
    announced: dict[int, int] = field(default_factory=dict)  # global rank -> times a process announced it
    error_sample: dict[str, int] = field(default_factory=dict)  # failure-looking line -> its line number
    in_root_cause: bool = False
    training_frame: tuple[int, str] | None = None  # first traceback frame inside a training loop
    setup_frame: tuple[int, str] | None = None  # first traceback frame wrapping the model (SETUP_FRAMES)
    waiting: dict[int, str] = field(default_factory=dict)  # rank -> torch.distributed call its traceback waits in
    dumps: StackDumps = field(default_factory=StackDumps)  # py-spy dumps of hung processes
    summary_rank: tuple[int, int] | None = None  # (rank, line) of the failure summary's last "rank :" line
    pid_ranks: dict[str, int] = field(default_factory=dict)  # pid -> rank, from torchrun's failure summary
    agent_signals: dict[str, set[int]] = field(default_factory=dict)  # pid -> signal numbers the agent sent it
    summary_others: list[tuple[str | None, int, int]] = field(default_factory=list)  # (pid, exit code, line) of the summary's other failures
    package_frames: dict[str, list] = field(default_factory=dict)  # package -> frames in its mined files (advisor.frames)
    nccl_sites: list[tuple[str, int]] = field(default_factory=list)  # (file, line) of NCCL's WARN lines
    nccl_trail: list[tuple[str, int]] = field(default_factory=list)  # (file, line) of NCCL's error-trail lines

    # -- listener --
    def on_hit(self, hit: LineHit) -> None:
        kind = hit.probe.kind
        if kind == "fact":
            handler = getattr(self, "_on_" + hit.probe.owner.replace("-", "_"), None)
            if handler is not None:
                handler(hit)
        elif kind == "phase":
            self.phase_now = (hit.probe.owner, hit.line_no, hit_line(hit, 400))
        elif kind == "framework":
            fw, weight = hit.probe.payload
            if self.framework_score[fw] < 100:
                self.framework_score[fw] += weight
                self.framework_evidence.setdefault(fw, (hit.line_no, hit_line(hit, 400)))
        elif kind == "version":
            version = hit.group("version")
            if version:
                self.fw_versions.setdefault(hit.probe.owner, (version, hit.line_no, hit_line(hit, 400)))

    def on_event(self, event: FailureEvent) -> None:
        """A KB signature declared its line a failure of some kind (see Signature.event)."""
        if event.kind != "cascade":
            self.error_lines += 1
        if len(self.events) < _MAX_EVENTS:
            self.events.append(event)
        if event.kind != "cascade" and self.phase_at_failure is None:
            self.phase_at_failure = self.phase_now
            self.step_at_failure = self.step_now
        if event.kind in ("timeout", "heartbeat", "store-timeout") and self.first_timeout_line is None:
            self.first_timeout_line = event.line
        if event.kind == "nccl-error" and self.first_nccl_error_line is None:
            self.first_nccl_error_line = event.line

    # -- helpers --
    def capture(self, name: str, raw: str, hit: LineHit) -> None:
        """A fact a catalogue message or a cause signature captured: set while the log is read, so
        what finalize() reasons with (the world size against the ranks seen) includes it."""
        value = captured_value(name, raw)
        if value is not None:
            self._set(name, value, hit)

    def establish(self, name: str, value: Any, hit: LineHit) -> None:
        """A fact a catalogue message sets by being printed at all (its `sets`)."""
        self._set(name, value, hit, detail="what this message means")

    def _set(self, name: str, value: Any, hit: LineHit | None, *, overwrite: bool = False, origin: str = "log", detail: str | None = None) -> None:
        if name in self.values and not overwrite:
            return
        self.values[name] = _Value(value, hit.line_no if hit else None, hit_line(hit, 400) if hit else None, origin, detail)

    def _report(self, rank: int) -> _RankReport | None:
        if rank not in self.reports and len(self.reports) >= _MAX_RANKS:
            return None
        return self.reports.setdefault(rank, _RankReport())

    # -- fact handlers, one per FACT_PROBES id --
    def _on_work_nccl(self, hit: LineHit) -> None:
        t = near_hit(hit)
        found = {k: (m.group(1) if (m := rx.search(t)) else None) for k, rx in _KV.items()}
        rank = _int(found["rank"])
        rank = hit.rank if rank is None else rank
        tmo, ran, seq = _int(found["tmo"]), _int(found["ran"]), _int(found["seq"])
        if tmo is not None:
            self._set("timeout_ms", tmo, hit)
        if ran is not None:
            self._set("ran_for_ms", ran, hit)
        if found["op"]:
            self._set("op_type", found["op"], hit)
            self._set("op_family", op_family(found["op"]), hit)
        if seq is not None:
            self._set("seq_num", seq, hit)
            if found["op"] and len(self.ops_by_seq) < 1024:
                self.ops_by_seq.setdefault(seq, set()).add(found["op"].lower().lstrip("_"))
        nin, nout = _int(found["nin"]), _int(found["nout"])
        if nin is not None and nout is not None:
            self._set("numel_in", nin, hit)
            self._set("numel_out", nout, hit)
            if found["op"] and "gather" in found["op"].lower() and nin > 0 and nout % nin == 0:
                self._set("group_size", nout // nin, hit)
        if rank is not None and "caught collective operation timeout" in t.lower() or (rank is not None and "Timeout at NCCL work" in t):
            report = self._report(rank)
            if report is not None:
                report.timed_out = True
            if report is not None and report.seq is None:
                report.seq = seq
                report.op = found["op"]
                report.line = hit.line_no

    def _on_work_progress(self, hit: LineHit) -> None:
        m = _KV["rank"].search(near_hit(hit))
        rank = _int(m.group(1)) if m else hit.rank
        enq, done = _int(hit.group("enq")), _int(hit.group("done"))
        if rank is None or enq is None or done is None:
            return
        report = self._report(rank)
        if report is not None:
            report.last_enqueued, report.last_completed = enq, done
            report.line = report.line or hit.line_no

    def _on_gloo_timeout(self, hit: LineHit) -> None:
        ms = _int(hit.group("ms"))
        if ms is None:
            return
        self._set("timeout_ms", ms, hit)
        self._set("backend", "gloo", hit)
        if hit.rank is not None:
            report = self._report(hit.rank)
            if report is not None:
                report.timed_out = True

    def _on_torch_version(self, hit: LineHit) -> None:
        version = _version(hit.group("v"))
        if version is None:
            return
        self._set("torch_version", version, hit)
        cu = re.search(r"\+cu(\d+)(\d)\b", version)
        if cu:
            self._set("cuda_version", f"{cu.group(1)}.{cu.group(2)}", hit, origin="inferred", detail="from the torch build tag")

    def _on_nccl_version(self, hit: LineHit) -> None:
        if _version(hit.group("v")):
            self._set("nccl_version", hit.group("v"), hit)
        if _version(hit.group("cuda")):
            self._set("cuda_version", hit.group("cuda"), hit)
        self._set("backend", "nccl", hit)

    def _on_nccl_tests_header(self, hit: LineHit) -> None:
        version = nccl_version_from_code(int(hit.group("code")))
        if version is not None:
            self._set("nccl_version", version, hit)
            self._set("backend", "nccl", hit)

    def _on_nccl_compiled(self, hit: LineHit) -> None:
        self._set_version("nccl_version", hit)

    def _on_cuda_version(self, hit: LineHit) -> None:
        self._set_version("cuda_version", hit)

    def _on_transformers_version(self, hit: LineHit) -> None:
        self._set_version("transformers_version", hit)

    def _set_version(self, name: str, hit: LineHit) -> None:
        version = _version(hit.group("v"))
        if version is not None:
            self._set(name, version, hit)

    def _set_world(self, hit: LineHit) -> None:
        world = _int(hit.group("world"))
        if world is not None:
            self._set("world_size", world, hit)

    def _on_member(self, hit: LineHit) -> None:
        self._set_world(hit)
        rank = _int(hit.group("rank"))
        if rank is not None and len(self.announced) < _MAX_RANKS:
            self.announced[rank] = self.announced.get(rank, 0) + 1

    def _on_error_like(self, hit: LineHit) -> None:
        line = hit_line(hit).strip()
        if not line or line in self.error_sample:
            return
        self.error_sample[line] = hit.line_no
        if len(self.error_sample) > ERROR_SAMPLE:
            # keep the first few and the latest: the error that ended a run is usually near its end
            del self.error_sample[list(self.error_sample)[ERROR_SAMPLE // 4]]

    def _on_root_cause_header(self, hit: LineHit) -> None:
        self.in_root_cause = True

    def _on_elastic_rank(self, hit: LineHit) -> None:
        rank = _int(hit.group("rank"))
        if rank is not None:
            self.summary_rank = (rank, hit.line_no)
        if self.in_root_cause and rank is not None:
            self._set("root_cause_rank", rank, hit)

    def _on_barrier_key(self, hit: LineHit) -> None:
        group, field = hit.group("group") or "", hit.group("field")
        default = "1" if field == "worker_count" else "0"  # the default group's key, by release
        if "later_group_barrier" not in self.values:
            self._set("later_group_barrier", group != default, hit, origin="inferred",
                      detail=f"barrier key {group!r}; the default group's is {default!r} in the torch releases that print {field}=")

    def _on_store_key_rank(self, hit: LineHit) -> None:
        rank = _int(hit.group("rank"))
        if rank is not None:
            self._set("awaited_rank", rank, hit)

    def _on_lf_tasks(self, hit: LineHit) -> None:
        self._set_world(hit)
        self._rendezvous(hit.group("host"), hit)

    def _on_nranks(self, hit: LineHit) -> None:
        self._set_world(hit)

    def _on_world_size_kv(self, hit: LineHit) -> None:
        self._set_world(hit)

    def _on_nnodes(self, hit: LineHit) -> None:
        n = _int(hit.group("n"))
        if n is not None and 0 < n < 100000:
            self._set("nodes", n, hit)

    def _on_nproc(self, hit: LineHit) -> None:
        n = _int(hit.group("n"))
        if n is not None and 0 < n <= 64:
            self._set("gpus_per_node", n, hit)

    def _on_nccl_host(self, hit: LineHit) -> None:
        host = hit.group("host")
        if host and (host in self.hosts or len(self.hosts) < 4096):
            devs = self.hosts.setdefault(host, set())
            dev = _int(hit.group("dev"))
            if len(devs) < 64 and dev is not None:
                devs.add(dev)
        self._set("backend", "nccl", hit)

    def _on_nccl_test_rank(self, hit: LineHit) -> None:
        host = hit.group("host")
        dev = _int(hit.group("dev"))
        if host and dev is not None and (host in self.hosts or len(self.hosts) < 4096):
            devs = self.hosts.setdefault(host, set())
            if len(devs) < 64:
                devs.add(dev)

    def _on_nccl_warn_site(self, hit: LineHit) -> None:
        _keep_site(self.nccl_sites, hit)

    def _on_nccl_trail_site(self, hit: LineHit) -> None:
        _keep_site(self.nccl_trail, hit)

    def _on_bridge_address(self, hit: LineHit) -> None:
        if "bridge_address" not in self.values:
            self._set("bridge_address", True, hit)

    def _on_nccl_transport_site(self, hit: LineHit) -> None:
        if "nccl_failed_transport" not in self.values:
            module = hit.group("transport") or hit.group("boot") or ""
            self._set("nccl_failed_transport", _TRANSPORTS.get(module, module), hit)

    def _on_loopback_transport(self, hit: LineHit) -> None:
        if "loopback_transport" not in self.values:
            self._set("loopback_transport", True, hit)

    def _on_gloo_connect_world(self, hit: LineHit) -> None:
        if "world_size" not in self.values:
            self._set_world(hit)

    def _on_connect_target(self, hit: LineHit) -> None:
        host = next((hit.group(g) for g in ("h1", "h2", "h3", "h4", "h5", "h6") if hit.group(g)), None)
        if host:
            self._rendezvous(host, hit)

    def _rendezvous(self, host: str, hit: LineHit) -> None:
        host = host.strip("[]")
        self._set("rendezvous_host", host, hit)
        if "rendezvous_loopback" not in self.values:
            loop = host in ("localhost", "::1", "0.0.0.0") or host.startswith("127.")
            self._set("rendezvous_loopback", loop, hit)

    def _on_store_timeout(self, hit: LineHit) -> None:
        s = hit.group("s1") or hit.group("s2")
        ms = hit.group("ms") or hit.group("ms2")
        seconds = _int(s) if s else (_int(ms) // 1000 if _int(ms) is not None else None)
        if seconds is not None and "collective operation" not in near_hit(hit):
            self._set("store_timeout_s", seconds, hit)

    def _on_traceback_start(self, hit: LineHit) -> None:
        if hit.rank in self.tracebacks or len(self.tracebacks) < 256:
            self.tracebacks[hit.rank] = (hit.line_no, [])
            self.last_traceback = hit.rank

    def _open_traceback(self, rank: int | None):
        """The traceback a frame or exception line belongs to: its rank's, else the latest one
        (a pasted traceback often lost the rank prefix of its first line)."""
        if rank in self.tracebacks:
            return rank
        return self.last_traceback if self.last_traceback in self.tracebacks else None

    def _on_rich_frame(self, hit: LineHit) -> None:
        self._package_frame(hit)

    def _package_frame(self, hit: LineHit) -> None:
        """Keep frames of the files whose line spans per release are mined: they date the package."""
        from advisor.frames import MAX_FRAMES, frame_of

        lineno = _int(hit.group("lineno"))
        frame = frame_of(hit.group("path") or "", lineno, hit.group("func") or "") if lineno else None
        if frame is not None:
            kept = self.package_frames.setdefault(frame.package, [])
            if len(kept) < MAX_FRAMES and frame not in kept:
                kept.append(frame)

    def _on_frame(self, hit: LineHit) -> None:
        if hit.group("tb") is None:
            self._faulthandler_frame(hit)
            return
        self._package_frame(hit)
        self.frames_seen = True  # a traceback, even one whose header and exception line were cut: not a silent log
        rank = self._open_traceback(hit.rank)
        tb = self.tracebacks.get(rank)
        if tb is not None and len(tb[1]) < 128:
            tb[1].append(hit.group("path") or "")
        path, func = hit.group("path") or "", hit.group("func") or ""
        if "store_setup_failed" not in self.values and any(path.endswith(f) and func == fn for f, fn in STORE_SETUP_FRAMES):
            self._set("store_setup_failed", True, hit)
        if self.training_frame is None and (func in TRAINING_LOOP_CALLS or any(p in path for p in TRAINING_LOOP_PATHS)):
            self.training_frame = (hit.line_no, hit_line(hit, 400))
        if self.setup_frame is None and any(path.endswith(f) and func == fn for f, fn in SETUP_FRAMES):
            self.setup_frame = (hit.line_no, hit_line(hit, 400))
        if rank is not None and path.endswith("distributed_c10d.py") and func in COLLECTIVE_CALLS and len(self.waiting) < _MAX_RANKS:
            self.waiting[rank] = func  # the innermost torch.distributed call of this rank's traceback
        elif (rank is not None and func in _AUTOGRAD_RUN and path.endswith(("autograd/graph.py", "autograd/__init__.py"))
              and len(self.waiting) < _MAX_RANKS):
            # a collective error raised out of backward comes from DDP's reducer: the gradient all-reduce
            self.waiting[rank] = "all_reduce"

    def _on_dump_rank(self, hit: LineHit) -> None:
        rank = _int(hit.group("rank"))
        if rank is not None:
            self.dumps.rank_header(hit.line_no, rank)

    def _on_dump_process(self, hit: LineHit) -> None:
        self.dumps.process(hit.line_no, hit.group("pid") or "")

    def _on_dump_thread(self, hit: LineHit) -> None:
        prefix = rank_prefix(hit.text.split("Thread ", 1)[0])  # the probe is anchored at the line's start
        rank = hit.rank if hit.rank is not None else prefix
        self.dumps.thread(hit.line_no, rank, hit.group("tid") or "", hit.group("name"), prefix=prefix)

    def _on_dump_frame(self, hit: LineHit) -> None:
        self.dumps.frame(hit.line_no, hit.group("func") or "", hit.group("path") or "", _int(hit.group("lineno")),
                         prefix=rank_prefix(hit.text[:24]))

    def _on_fh_start(self, hit: LineHit) -> None:
        self.dumps.dump_start(hit.line_no, rank_prefix(hit.text[:24]))

    def _on_fh_thread(self, hit: LineHit) -> None:
        prefix = rank_prefix(hit.text[:24])
        rank = hit.rank if hit.rank is not None else prefix
        self.dumps.thread(hit.line_no, rank, hit.group("tid") or "", hit.group("name"), prefix=prefix, faulthandler=True)

    def _faulthandler_frame(self, hit: LineHit) -> None:
        """'  File "<path>", line <n> in <function>' alone on its line (two spaces, after a launcher's
        prefix): a frame of a faulthandler dump."""
        head, _, rest = hit.text.partition('  File "')
        if not _FH_FRAME_HEAD.fullmatch(head) or not rest.rstrip().endswith(" in " + (hit.group("func") or "")):
            return
        self._package_frame(hit)  # a dump's frame dates the installed package as a traceback's does
        self.dumps.frame(hit.line_no, hit.group("func") or "", hit.group("path") or "", _int(hit.group("lineno")),
                         prefix=rank_prefix(head))

    def _on_exception_line(self, hit: LineHit) -> None:
        etype = hit.group("type") or ""
        msg = (hit.group("msg") or "").strip()
        short = etype.rsplit(".", 1)[-1]
        if short in ("Warning", "UserWarning") or short.endswith("Warning"):
            return
        tb = self.tracebacks.pop(self._open_traceback(hit.rank), None)
        cascade = bool(_CASCADE_EXCEPTIONS.search(short) or _CASCADE_MESSAGE.search(msg))
        oom = bool(_OOM_MESSAGE.search(etype + " " + msg))
        if len(self.exceptions) < _MAX_EVENTS:
            self.exceptions.append((hit.line_no, etype, msg[:300], cascade or oom))
        if not cascade and not oom:
            # the original under a wrapper says what failed: it takes the wrapper's place
            unwrap = self.wrapped_on is not None and self.wrapped_on == (hit.rank,)
            if "user_exception" not in self.values or unwrap:
                self.exception_owner = _caller(tb[1]) if tb else None
                self.wrapped_on = (hit.rank,) if _WRAPPER_MESSAGE.match(msg) else None
            self._set("user_exception", f"{short}: {msg}"[:300] if msg else short, hit, overwrite=unwrap)
            self.on_event(FailureEvent(kind="exception", line=hit.line_no, rank=hit.rank, text=hit_line(hit), timestamp=timestamp_of(hit.text)))

    def _on_exitcode(self, hit: LineHit) -> None:
        code = _int(hit.group("code"))
        pid = hit.group("pid")
        if pid and self.summary_rank is not None and 0 < hit.line_no - self.summary_rank[1] <= 2 and len(self.pid_ranks) < _MAX_RANKS:
            self.pid_ranks[pid] = self.summary_rank[0]  # the summary's next line: this rank's pid
        if not self.in_root_cause and code is not None and self.summary_rank is not None and len(self.summary_others) < _MAX_RANKS:
            self.summary_others.append((pid, code, hit.line_no))
        if self.in_root_cause and code is not None:
            self._set("root_cause_exit_code", code, hit)
            self.in_root_cause = False
            if code != 0:  # the first observed failure's code says more than a survivor's SIGTERM
                self._set("exit_code", code, hit, overwrite=self.values.get("exit_code", _Value(0, 0, "")).value in (-15, 0))
        if code is not None and code != 0:
            self._set("exit_code", code, hit)

    def _on_closing_signal(self, hit: LineHit) -> None:
        number = _SIGNAL_NUMBERS.get(hit.group("sig"))
        if number is not None and len(self.agent_signals) < _MAX_RANKS:
            self.agent_signals.setdefault(hit.group("pid"), set()).add(number)

    def _on_signal(self, hit: LineHit) -> None:
        name = hit.group("name") or hit.group("name2")
        num = hit.group("num") or hit.group("num2") or hit.group("crash") or hit.group("ompi") or hit.group("mpirun")
        names = {"9": "SIGKILL", "15": "SIGTERM", "6": "SIGABRT", "11": "SIGSEGV", "7": "SIGBUS", "2": "SIGINT", "4": "SIGILL", "8": "SIGFPE"}
        shell = {"Bus error": "SIGBUS", "Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Illegal instruction": "SIGILL",
                 "Floating point exception": "SIGFPE", "Floating-point exception": "SIGFPE"}
        fatal = hit.group("fatal")
        name = name or names.get(num or "", None) or shell.get(hit.group("shell") or hit.group("job") or fatal or "")
        # faulthandler's SIGABRT is no crash of its own: NCCL's watchdog and C++'s terminate (an
        # uncaught exception, printed above it) abort the process; the other fatal signals are
        if name and (hit.group("crash") or hit.group("shell") or hit.group("job") or (fatal and fatal != "Aborted")):
            # a crash report (UCX's signal handler, the shell's "(core dumped)"): the process died of it
            self.on_event(FailureEvent(kind="killed", line=hit.line_no, rank=hit.rank, text=hit_line(hit),
                                       timestamp=timestamp_of(hit.text)))
        if name:
            # SIGTERM is what the launcher sends to the survivors: keep looking for a harder signal
            self._set("signal", name, hit, overwrite=self.values.get("signal", _Value("SIGTERM", 0, "")).value == "SIGTERM")

    def _on_tqdm(self, hit: LineHit) -> None:
        cur, tot = _int(hit.group("cur")), _int(hit.group("tot"))
        if cur is None or tot is None:
            return
        self.step_now = (cur, tot)
        rate, unit = hit.group("rate"), hit.group("unit")
        value = _float(rate)
        if value is not None:
            per_sec = value if unit == "it/s" else (1.0 / value if value else 0.0)
            self._sample_rate(hit.line_no, per_sec)

    def _on_titan_step(self, hit: LineHit) -> None:
        step, tps = _int(hit.group("step")), _float(hit.group("tps").replace(",", ""))
        if step is None or tps is None:
            return
        self.step_now = (step, 0)
        self._sample_rate(hit.line_no, tps)

    def _on_hf_step(self, hit: LineHit) -> None:
        self.logged_steps += 1
        if self.step_now is None:
            self.step_now = (1, 0)
        elif self.step_now == (1, 0) and self.logged_steps > 1:
            # a second step dict and still no progress bar or step counter: past the first step (how
            # far is unknown, as logging_steps apart; 2 is only a lower bound)
            self.step_now = (2, 0)

    def _sample_rate(self, line: int, value: float) -> None:
        if self.phase_at_failure is None:  # only the run-up to the failure matters
            # the whole run's history, thinned to every other sample when full: the reference level
            # must not depend on how densely the scanner sampled (advisor.scan summarises repeats)
            if self.last_rate is not None:
                self.rates.append(self.last_rate)
                if len(self.rates) > 128:
                    del self.rates[::2]
            self.last_rate = (line, value)

    def _on_trl_trainer(self, hit: LineHit) -> None:
        # Open-R1's recipes: src/open_r1/sft.py runs SFTTrainer, grpo.py GRPOTrainer
        trainer = hit.group("t") or hit.group("recipe") or ("sft" if hit.group("metric") else None)
        if trainer:
            self._set("trl_trainer", trainer.replace("online_dpo", "dpo"), hit)

    def _on_model_size_name(self, hit: LineHit) -> None:
        b = float(hit.group("b"))
        if 0.05 <= b <= 2000:
            self._set("model_size_b", b, hit, origin="inferred", detail="from the model name")

    def _on_model_params(self, hit: LineHit) -> None:
        n = _int(hit.group("n").replace(",", ""))
        if n is not None and n >= 10_000_000:
            self._set("model_size_b", round(n / 1e9, 2), hit, overwrite=True)

    def _on_titan_resume(self, hit: LineHit) -> None:
        """torchtitan's CheckpointManager.load names the step it loads (`.../step-1000`)."""
        step = _int(hit.group("step"))
        if step is not None and "resumed" not in self.values:
            self._set("resumed", step > 0, hit, origin="inferred", detail=f"loads the checkpoint of step {step}")

    def _on_titan_model_size(self, hit: LineHit) -> None:
        self._on_model_params(hit)

    def _on_topo_row(self, hit: LineHit) -> None:
        links = re.findall(r"\b(NV\d+|PIX|PXB|PHB|NODE|SYS)\b", hit.text)
        if not links:
            return
        nvlink = any(link.startswith("NV") for link in links)
        current = self.values.get("interconnect")
        if nvlink or current is None:
            self._set("interconnect", "nvlink" if nvlink else "pcie", hit, overwrite=True, origin="inferred",
                      detail="GPU links in an nvidia-smi topo -m matrix")

    def _on_backend_nccl(self, hit: LineHit) -> None:
        self._set("backend", "nccl", hit)

    def _on_backend_gloo(self, hit: LineHit) -> None:
        self._set("backend", "gloo", hit)

    def on_cause_message(self, hit: LineHit) -> None:
        """A line holds a catalogued message that names a cause other than the rank's own exception."""
        if len(self.cause_lines) < 4096:
            self.cause_lines.add(hit.line_no)

    def date_message(self, component: str, message_id: str, specs: tuple[str, ...], hit: LineHit) -> None:
        """A catalogued message whose printed wording only some releases of its software print."""
        if len(self.printed) < 64:
            self.printed.append((component, message_id, specs, hit.line_no, hit_line(hit)))

    def _prefix(self, hit: LineHit) -> None:
        self.date_message(_PREFIX_COMPONENT, f"the log prefix {hit.match.group(0)}", (_PREFIX_RELEASES[hit.probe.owner],), hit)

    _on_prefix_pg_guid = _on_prefix_pg_rank = _prefix

    # -- the result --
    def finalize(self, ranks_prefixed: set[int], frameworks: dict[str, Any],
                 releases: dict[str, tuple[str, list[str]]] | None = None) -> Facts:
        """The facts of the whole log. `releases`: component -> (software, mined releases), to date
        the printed wordings (KnowledgeBase.releases)."""
        v = dict(self.values)
        out: dict[str, FactValue] = {}

        def put(name: str, value: Any, line: int | None = None, text: str | None = None, origin: str = "log",
                detail: str | None = None, basis: str | None = None) -> None:
            out[name] = FactValue(value=value, origin=origin, line=line, text=text, detail=detail, basis=basis)

        for name, val in v.items():
            put(name, val.value, val.line, val.text, val.origin, val.detail)

        self._finalize_framework(put, frameworks)
        self._finalize_frame_versions(put, out)
        self._finalize_printed_versions(put, out, releases or {})
        self._finalize_ranks(put, out, ranks_prefixed)
        self._finalize_rank_ids(put, out, ranks_prefixed)
        self._finalize_peer_silence(put, out, ranks_prefixed)
        self._finalize_topology(put, out)
        self._finalize_failures(put, out)
        self._finalize_agent_stops(put, out)
        self._finalize_nccl_areas(put, out)
        return Facts(values=out, events=first_in_time(list(self.events))[:64])

    def _finalize_framework(self, put, frameworks: dict[str, Any]) -> None:
        for fw, (version, vline, vtext) in self.fw_versions.items():
            name = fw.replace("-", "_") + "_version"  # trl_version under Open-R1, accelerate_version under HF
            if name in FACTS and name not in self.values:
                put(name, version, vline, vtext[:400])
        if not self.framework_score:
            return
        candidates = {fw: s for fw, s in self.framework_score.items() if s >= 3}
        if not candidates:
            return
        if "deepspeed" in candidates:
            dline, dtext = self.framework_evidence["deepspeed"]
            put("uses_deepspeed", True, dline, dtext[:400], origin="inferred", detail="DeepSpeed's own lines are in the log")
        # a framework that builds on another one wins over it when both are seen
        def specificity(fw: str, seen: frozenset = frozenset()) -> int:
            parents = [p for p in (getattr(frameworks.get(fw), "builds_on", []) or []) if p not in seen]
            return 1 + max((specificity(p, seen | {fw}) for p in parents), default=0) if parents else 0
        best = max(candidates, key=lambda fw: (specificity(fw), candidates[fw], fw))
        line, text = self.framework_evidence[best]
        put("framework", best, line, text[:400], detail=f"detection score {candidates[best]:g}")
        if best in self.fw_versions:
            version, vline, vtext = self.fw_versions[best]
            put("framework_version", version, vline, vtext[:400])

    def _finalize_frame_versions(self, put, out) -> None:
        """A package's version from its traceback frames: the releases that fit (a list, oldest
        first), when the log did not print the version itself."""
        from advisor.frames import nccl_version_range, version_range

        if (self.nccl_sites or self.nccl_trail) and "nccl_version" not in out:
            found = nccl_version_range(self.nccl_sites, self.nccl_trail)
            if found is not None:
                put("nccl_version", list(found.versions), None, None, origin="inferred", detail=found.describe(),
                    basis="NCCL source lines")
        for package, frames in self.package_frames.items():
            name = f"{package}_version"
            if name not in FACTS or name in out:
                continue
            found = version_range(frames)
            if found is not None:
                put(name, list(found.versions), None, None, origin="inferred", detail=found.describe(),
                    basis="traceback frames")

    def _finalize_printed_versions(self, put, out, releases: dict[str, tuple[str, list[str]]]) -> None:
        """A release from the wordings the log shows (advisor.dating), for each software whose
        version the log neither printed nor dated by its frames."""
        if not self.printed:
            return
        from advisor.dating import VERSION_FACTS, date_release

        by_software: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        first: dict[str, tuple[int, str]] = {}
        mined: dict[str, list[str]] = {}
        for component, message_id, specs, line, text in self.printed:
            if component not in releases:
                continue
            software, versions = releases[component]
            by_software.setdefault(software, []).append((message_id, specs))
            first.setdefault(software, (line, text))
            mined[software] = versions
        for software, printed in by_software.items():
            name = VERSION_FACTS.get(software)
            if name is None or name in out:
                continue
            found = date_release(software, mined[software], printed)
            if found is not None:
                line, text = first[software]
                put(name, list(found.versions), line, text, origin="inferred", detail=found.describe(),
                    basis="message wording")

    def _finalize_open_tracebacks(self, put, out) -> None:
        """A traceback cut off before its exception line (a truncated paste) still shows where it
        failed; one that ends inside a torch collective is the cascade, not the cause."""
        if "user_exception" in out:
            return
        for rank, (line, frames) in sorted(self.tracebacks.items(), key=lambda kv: kv[1][0]):
            if not frames or frame_owner(frames[-1]) == "torch" and "distributed_c10d" in frames[-1]:
                continue
            if self.first_timeout_line is not None and line > self.first_timeout_line:
                continue  # printed after a collective timed out: the stack of a rank that was waiting
            if self.first_nccl_error_line is not None and line > self.first_nccl_error_line:
                continue  # printed after NCCL reported an error: most likely that error's own stack
            if all(frame_owner(path) == "torch" for path in frames):
                continue  # only interpreter/torch frames: nothing says whose error it was
            owner = _caller(frames)
            put("user_exception", "traceback without its final line (cut off)", line, None, origin="inferred",
                detail=f"innermost frame: {frames[-1][-120:]}")
            put("exception_cut_off", True, line, None, origin="inferred", detail="the traceback ends before its exception line")
            self.exception_owner = owner
            self.events.append(FailureEvent(kind="exception", line=line, rank=rank, text="Traceback (most recent call last):"))
            return

    def _finalize_ranks(self, put, out, ranks_prefixed: set[int]) -> None:
        reporting = sorted(self.reports)
        if reporting:
            put("ranks_reporting", reporting[:512])
            put("reporting_count", len(reporting))
            # only meaningful when the log shows other ranks too (a paste of rank 0's output alone
            # says nothing about what the others reported)
            others_visible = any(r != 0 for r in ranks_prefixed) or len(self.hosts) > 1
            if others_visible:
                put("only_rank0_reported", reporting == [0], origin="inferred")
            progress = {
                str(r): {"seq": rep.seq, "op": rep.op, "last_enqueued": rep.last_enqueued, "last_completed": rep.last_completed}
                for r, rep in sorted(self.reports.items())[:256]
            }
            put("rank_progress", progress)
            seqs = {rep.seq for rep in self.reports.values() if rep.seq is not None}
            enq = {rep.last_enqueued for rep in self.reports.values() if rep.last_enqueued is not None}
            if seqs or enq:  # gloo prints no sequence numbers: then nothing is known about the spread
                put("seq_spread", len(seqs) > 1 or len(enq) > 1)
            world = out.get("world_size")
            # a higher rank printed under torchrun's summary (the agent's console, which carries its
            # local ranks' output) means rank 0 exists and would have printed its own failure there
            launcher_view = "root_cause_rank" in out and any(r > 0 for r in ranks_prefixed)
            rank0_exists = 0 in ranks_prefixed or (world is not None and isinstance(world.value, int) and world.value > 1) or launcher_view
            if rank0_exists:
                put("rank0_silent", 0 not in self.reports, origin="inferred")
        if any(len(ops) > 1 for ops in self.ops_by_seq.values()):
            put("op_mismatch", True)
        if ranks_prefixed:
            put("ranks_seen", sorted(ranks_prefixed)[:512])
        world = out.get("world_size")
        if world is None and ranks_prefixed and max(ranks_prefixed) + 1 > 1:
            # the highest rank that printed anything bounds the world size from below
            pass
        if world is not None and reporting and isinstance(world.value, int) and world.value <= 65536:
            silent = [r for r in range(world.value) if r not in self.reports]
            put("silent_ranks", silent[:512], origin="inferred", detail=f"world size {world.value} minus the ranks that reported")
            if world.value >= 2 and all(r in self.reports and self.reports[r].timed_out for r in range(world.value)):
                put("every_rank_timed_out", True, origin="inferred",
                    detail=f"all {world.value} ranks report their own collective timeout: every rank was waiting")

    def _finalize_peer_silence(self, put, out, ranks_prefixed: set[int]) -> None:
        """A lost peer that printed nothing: from torch 2.3 init_process_group installs an excepthook
        that prefixes an uncaught exception's every line with `[rankN]:` (distributed_c10d.py's
        _distributed_excepthook, first in the 2.3.0 wheel: kb/frames/torch.json), and torchrun's
        `--tee` prefixes `[defaultN]:`. Only when the log shows such prefixes does a rank without
        any say something: it did not raise; a signal (the OOM killer, SIGKILL) or a clean exit
        leaves no traceback."""
        world = out["world_size"].value if "world_size" in out else None
        if "peer_lost" not in out or out["peer_lost"].value is not True or not ranks_prefixed or not isinstance(world, int):
            return
        if not 2 <= world <= 65536 or max(ranks_prefixed) >= world:
            return
        missing = [r for r in range(world) if r not in ranks_prefixed]
        if missing:
            lost = out["peer_lost"]
            put("peer_silent", True, lost.line, lost.text, origin="inferred",
                detail=f"rank(s) {', '.join(map(str, missing[:8]))} of {world} printed no line of their own")

    def _finalize_rank_ids(self, put, out, ranks_prefixed: set[int]) -> None:
        """Rank ids against each other and the world size: a rank announced twice, a rank id the
        world cannot hold, and ranks waiting in different torch.distributed calls."""
        duplicates = sorted(r for r, n in self.announced.items() if n > 1)
        if duplicates:
            put("duplicate_ranks", duplicates[:64], origin="inferred",
                detail="the same GLOBAL_RANK was announced by more than one process")
        world = out["world_size"].value if "world_size" in out else None
        awaited = out["awaited_rank"].value if "awaited_rank" in out else None
        if isinstance(world, int) and isinstance(awaited, int) and awaited >= world:
            put("rank_outside_world", True, out["awaited_rank"].line, out["awaited_rank"].text, origin="inferred",
                detail=f"the store waited for rank {awaited}, but the world size is {world}")
        elif isinstance(awaited, int) and ranks_prefixed and awaited > max(ranks_prefixed) + 1:
            put("rank_outside_world", True, out["awaited_rank"].line, out["awaited_rank"].text, origin="inferred",
                detail=f"the store waited for rank {awaited}, beyond every rank that printed")
        waiting = {str(r): op for r, op in sorted(self.waiting.items())[:256]}
        dumped = self.dumps.processes(self.pid_ranks)
        for proc in dumped:
            if proc.waits_in and len(waiting) < 256:
                waiting.setdefault(proc.key.removeprefix("rank "), proc.waits_in)
        if waiting:
            put("waiting_ops", waiting, origin="log",
                detail="the torch.distributed call in each rank's traceback or stack dump")
            ops = {_normal_call(op) for op in waiting.values()}
            if len(ops) > 1 and "op_mismatch" not in out and len(waiting) > 1:
                put("op_mismatch", True,
                    detail="ranks' stacks wait in different calls: " + ", ".join(sorted(ops)))
        self._finalize_stack_dumps(put, dumped)

    def _finalize_stack_dumps(self, put, dumped: list) -> None:
        """Stack dumps where some processes wait in a collective and others do not: those are the
        ones being waited for, and what their frames show them doing is the straggler's activity."""
        waiting = [p for p in dumped if p.waits_in]
        busy = [p for p in dumped if not p.waits_in]
        if not waiting or not busy:
            return
        put("dump_stragglers", [p.key for p in busy][:64], busy[0].line, None, origin="inferred",
            detail=f"{len(busy)} of {len(dumped)} dumped processes are outside any torch.distributed call "
                   f"while {len(waiting)} wait in {', '.join(sorted({p.waits_in for p in waiting}))}")
        doing = [p for p in busy if p.activity]
        if doing:
            first = doing[0]
            put("straggler_activity", sorted({p.activity for p in doing}), first.line, None, origin="inferred",
                detail=f"stack dump: {first.key} is in {first.where} ({first.activity}) while the others wait")

    def _finalize_nccl_areas(self, put, out) -> None:
        """Which parts of NCCL failed, from the source files its WARN and error-trail lines name (and
        the transport of the trail): what a later release's fix must touch to be this log's."""
        areas: list[str] = []
        for path, _ in self.nccl_sites + self.nccl_trail:
            area = nccl_area_of(path)
            if area and area not in areas:
                areas.append(area)
        transport = out.get("nccl_failed_transport")
        if transport is not None and transport.value not in areas:
            areas.append(transport.value)
        if areas:
            put("nccl_areas", areas, None, None, origin="inferred", basis="NCCL source lines",
                detail="the NCCL source files its WARN and error-trail lines name")

    def _finalize_topology(self, put, out) -> None:
        if self.hosts:
            hosts = sorted(self.hosts)
            put("hosts", hosts[:64])
            if "nodes" not in out:
                put("nodes", len(hosts), origin="inferred", detail="distinct host names in NCCL lines")
            if "gpus_per_node" not in out:
                per = max(len(d) for d in self.hosts.values())
                if per > 1:
                    put("gpus_per_node", per, origin="inferred", detail="distinct GPU indices per host in NCCL lines")

    def _finalize_agent_stops(self, put, out) -> None:
        """torchrun's summary lists other failed workers, but each exited with the signal the agent
        itself sent it after the root cause failed: they were alive until then, so none of them
        failed first. The first failure must be the root-cause rank's own."""
        if "root_cause_rank" not in out or not self.summary_others or "others_exited_cleanly" in out:
            return
        if not all(pid is not None and -code in self.agent_signals.get(pid, ()) for pid, code, _ in self.summary_others):
            return
        first = first_in_time([e for e in self.events if e.kind != "cascade"])
        if not first or first[0].rank != out["root_cause_rank"].value:
            return
        line = self.summary_others[0][2]
        put("others_stopped_by_agent", True, line, None, origin="inferred",
            detail="every other worker in torchrun's failure summary exited with the signal the agent sent it after the first failure")

    def _finalize_failures(self, put, out) -> None:
        self._finalize_open_tracebacks(put, out)
        events = first_in_time([e for e in self.events if e.kind != "cascade"])
        if events:
            first = events[0]
            put("first_failure", first.kind, first.line, first.text)
            put("failure_kinds", sorted({e.kind for e in events}))
        else:
            put("no_error_lines", self.error_lines == 0 and not self.exceptions and not self.tracebacks and not self.frames_seen,
                origin="inferred",
                detail="no failure message was recognised in the log")
        if self.phase_at_failure or (self.phase_now and not events):
            phase, line, text = self.phase_at_failure or self.phase_now
            step = self.step_at_failure or self.step_now
            if phase == "train" and step is not None and step[0] <= 1:
                put("phase", "first-step", line, text, origin="inferred", detail=f"progress at step {step[0]} when it failed")
            elif phase in ("train", "eval") and step is not None and step[1] and step[0] >= step[1]:
                put("phase", "end-of-epoch", line, text, origin="inferred", detail=f"progress bar at {step[0]}/{step[1]}")
            elif phase != "end-of-epoch" and (done := out.get("training_finished")) is not None and done.value is True \
                    and done.line is not None and done.line > line and all(e.line > done.line for e in events):
                # the training loop announced its normal end after the last cue (the saves and evaluations
                # before it finished too): whatever fails after it is past training
                put("phase", "end-of-epoch", done.line, done.text, origin="inferred",
                    detail="the training loop had ended normally before the failure")
            elif phase == "init" and self.training_frame is not None and self.training_frame[0] > line:
                # start-up was announced, but the failing traceback is inside the training loop
                put("phase", "train", self.training_frame[0], self.training_frame[1], origin="inferred",
                    detail="the traceback runs through the training loop, after the last start-up line")
            else:
                put("phase", phase, line, text, detail="the last phase cue before the failure")
        elif self.setup_frame is not None and self.training_frame is None:
            # no cue said what the job was doing, but the failing traceback is still wrapping the model
            put("phase", "init", self.setup_frame[0], self.setup_frame[1], origin="inferred",
                detail="the traceback runs through the model's wrapping for distributed training (DDP/FSDP, accelerate's prepare, DeepSpeed's initialize)")
        if self.step_at_failure or self.step_now:
            put("step", (self.step_at_failure or self.step_now)[0], origin="inferred")
        if "user_exception" in out and self.exception_owner is not None:
            owner = self.exception_owner
            put("exception_module", owner, detail="innermost traceback frame outside torch")
            put("exception_in_framework", owner not in ("user", "library"), detail="read from the traceback's frames")
        if "user_exception" in out and out["user_exception"].origin == "log":
            put("exception_catalogued", out["user_exception"].line in self.cause_lines, out["user_exception"].line,
                origin="inferred", detail="whether the exception's line is a catalogued message that names its cause")
        user_exc = [x for x in self.exceptions if not x[3]]
        if user_exc and self.first_timeout_line is not None:
            put("exception_before_timeout", user_exc[0][0] < self.first_timeout_line, user_exc[0][0], None, origin="inferred")
        if len(self.rates) >= 2 and self.last_rate is not None:
            import statistics

            before = statistics.median(r for _, r in self.rates)
            line, now = self.last_rate
            if before > 0 and now < before / 5:
                put("slowdown", True, line, None, origin="inferred",
                    detail=f"throughput fell from ~{before:g} to {now:g} per second")


def nccl_version_from_code(code: int) -> str | None:
    """NCCL's version code as nccl.h's NCCL_VERSION(X,Y,Z) builds it: X*1000+Y*100+Z up to 2.8,
    X*10000+Y*100+Z from 2.9 (read in src/nccl.h.in at v2.21.5-1)."""
    if code >= 20900:
        major, minor, patch = code // 10000, code % 10000 // 100, code % 100
    elif 2000 <= code < 3000:
        major, minor, patch = code // 1000, code % 1000 // 100, code % 100
    else:
        return None
    return f"{major}.{minor}.{patch}"


def _caller(frames: list[str]) -> str:
    """Who called into the failing code: the innermost frame that is neither torch nor stdlib."""
    for path in reversed(frames):
        owner = frame_owner(path)
        if owner != "torch":
            return owner or "user"
    return "user"


def first_in_time(events: list[FailureEvent]) -> list[FailureEvent]:
    """Events earliest first: by timestamp when every event has one (ranks' logs are often
    concatenated rank by rank, so log order is not time order), else by line."""
    if events and all(e.timestamp is not None for e in events):
        return sorted(events, key=lambda e: (tuple(e.timestamp), e.line))
    return sorted(events, key=lambda e: e.line)


_CALL_FAMILY = {"all_gather_into_tensor": "all_gather", "_all_gather_base": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
                "_reduce_scatter_base": "reduce_scatter", "isend": "send", "irecv": "recv", "monitored_barrier": "barrier",
                "all_reduce_coalesced": "all_reduce", "all_gather_coalesced": "all_gather", "all_to_all_single": "all_to_all"}


def _normal_call(name: str) -> str:
    """One name per collective whatever API spelled it (all_gather_into_tensor is an all_gather).
    send and recv pair up, so they count as one exchange."""
    family = _CALL_FAMILY.get(name, name)
    return "send/recv" if family in ("send", "recv") else family
