"""Build a realistic multi-rank training log of a given size, deterministically from a seed.

The log reads like the combined output of a `torchrun` job with many ranks (Hugging Face Trainer on
top): launcher banner, NCCL initialisation from every rank (bootstrap, topology, channels, Init
COMPLETE), then training: tqdm progress bars redrawn with carriage returns, loss dictionaries, rank
warnings, evaluations and checkpoint saves. Halfway through, a real failure is buried: a checkpoint
save on rank 0 outlasts the 30-minute NCCL timeout, every other rank's watchdog fires on the same
_ALLGATHER_BASE, the processes are torn down and torchrun's elastic agent restarts the group. The job
then resumes from the last checkpoint and trains on until the file reaches the requested size.

So the diagnosis must be the same at 1 MB and at 1 GB: the failure is in the middle, surrounded by
ever more noise, and the restart afterwards must not be mistaken for the phase that failed.

Usage:  python benchmarks/make_big_log.py SIZE OUT [--ranks 64] [--seed 0]
        SIZE like 1M, 100M, 1G (bytes, powers of 1024)
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Callable, TextIO

GENERATOR_VERSION = 2  # bump when the output changes, so cached benchmark files are rebuilt
EXPECTED_CODE = "checkpoint-save-straggler"  # the buried failure's canonical cause code
BAR = "█▏▎▍▌▋▊▉"
HF_HOSTS = 8  # ranks per node


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


class LogWriter:
    """Writes lines with a running clock and byte count; everything random comes from one seed."""

    def __init__(self, out: TextIO, ranks: int, seed: int) -> None:
        self.out = out
        self.ranks = ranks
        self.rng = random.Random(seed)
        self.written = 0
        self.clock = 8 * 3600.0  # seconds since midnight, day 0506
        self.buffer: list[str] = []
        self.pids = [41000 + 17 * r + self.rng.randrange(5) for r in range(ranks)]
        self.hosts = [f"gpu-node-{r // HF_HOSTS:03d}" for r in range(ranks)]

    def emit(self, text: str) -> None:
        self.buffer.append(text)
        self.written += len(text.encode()) if not text.isascii() else len(text)
        if len(self.buffer) >= 4096:
            self.flush()

    def flush(self) -> None:
        self.out.write("".join(self.buffer))
        self.buffer.clear()

    def tick(self, seconds: float) -> None:
        self.clock += seconds

    # --- timestamp formats -----------------------------------------------------------------
    def hms(self) -> str:
        t = int(self.clock) % 86400
        return f"{t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"

    def glog(self, level: str) -> str:
        """c10d / torch C++ prefix: `E0506 08:41:53.511000`."""
        micro = int((self.clock % 1) * 1_000_000)
        return f"{level}0506 {self.hms()}.{micro:06d}"

    def iso(self) -> str:
        millis = int((self.clock % 1) * 1000)
        return f"2025-05-06 {self.hms()},{millis:03d}"

    def nccl(self, rank: int, text: str) -> str:
        pid = self.pids[rank]
        return f"{self.hosts[rank]}:{pid}:{pid + 1 + rank % 3} [{rank % HF_HOSTS}] NCCL INFO {text}\n"


def launcher_banner(w: LogWriter, attempt: int) -> None:
    pid = 40000 + attempt
    stamp = w.glog("W")
    for line in ("", "*" * 41,
                 "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your "
                 "system being overloaded, please further tune the variable for optimal performance in your "
                 "application as needed. ", "*" * 41):
        w.emit(f"{stamp} {pid} torch/distributed/run.py:852] {line}\n")


def nccl_init(w: LogWriter) -> None:
    rng = w.rng
    for rank in range(w.ranks):
        if rank == 0:
            w.emit(w.nccl(0, "NCCL version 2.21.5+cuda12.4"))
        w.emit(w.nccl(rank, f"cudaDriverVersion 12040"))
        w.emit(w.nccl(rank, f"Bootstrap : Using ib0:10.12.{rank // HF_HOSTS}.{11 + rank % HF_HOSTS}<0>"))
        w.emit(w.nccl(rank, f"NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; "
                            f"OOB ib0:10.12.{rank // HF_HOSTS}.{11 + rank % HF_HOSTS}<0>"))
        w.emit(w.nccl(rank, "Using network IB"))
        comm = f"0x{rng.getrandbits(40):x}"
        w.emit(w.nccl(rank, f"comm {comm} rank {rank} nranks {w.ranks} cudaDev {rank % HF_HOSTS} nvmlDev {rank % HF_HOSTS} "
                            f"busId {0x18000 + 0x10000 * (rank % HF_HOSTS):x} commId 0x7d3c2a1f99e05b11 - Init START"))
        w.emit(w.nccl(rank, f"Setting affinity for GPU {rank % HF_HOSTS} to ffffffff,00000000,ffffffff"))
        w.emit(w.nccl(rank, "NVLS multicast support is not available on dev %d" % (rank % HF_HOSTS)))
        w.emit(w.nccl(rank, f"Trees [0] {(rank + 1) % w.ranks}/-1/-1->{rank}->{(rank - 1) % w.ranks} "
                            f"[1] {(rank + 1) % w.ranks}/-1/-1->{rank}->{(rank - 1) % w.ranks}"))
        w.emit(w.nccl(rank, "P2P Chunksize set to 524288"))
        for channel in range(4):
            w.emit(w.nccl(rank, f"Channel {channel:02d}/0 : {rank}[{rank % HF_HOSTS}] -> {(rank + 1) % w.ranks}"
                                f"[{(rank + 1) % HF_HOSTS}] via P2P/CUMEM/read"))
        w.emit(w.nccl(rank, "Connected all rings"))
        w.emit(w.nccl(rank, "Connected all trees"))
        w.emit(w.nccl(rank, "threadThresholds 8/8/64 | 512/8/64 | 512 | 512"))
        w.emit(w.nccl(rank, "24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer"))
        w.emit(w.nccl(rank, f"comm {comm} rank {rank} nranks {w.ranks} cudaDev {rank % HF_HOSTS} nvmlDev {rank % HF_HOSTS} "
                            f"busId {0x18000 + 0x10000 * (rank % HF_HOSTS):x} commId 0x7d3c2a1f99e05b11 - Init COMPLETE"))
        w.tick(0.002)


def trainer_start(w: LogWriter, total_steps: int, resume_from: int | None) -> None:
    w.emit(f"[INFO|trainer.py:2414] {w.iso()} >> ***** Running training *****\n")
    w.emit(f"[INFO|trainer.py:2415] {w.iso()} >>   Num examples = 1,204,117\n")
    w.emit(f"[INFO|trainer.py:2416] {w.iso()} >>   Num Epochs = 3\n")
    w.emit(f"[INFO|trainer.py:2417] {w.iso()} >>   Instantaneous batch size per device = 4\n")
    w.emit(f"[INFO|trainer.py:2420] {w.iso()} >>   Total train batch size (w. parallel, distributed & accumulation) = {4 * 8 * w.ranks}\n")
    w.emit(f"[INFO|trainer.py:2422] {w.iso()} >>   Total optimization steps = {total_steps:,}\n")
    if resume_from is not None:
        w.emit(f"[INFO|trainer.py:2447] {w.iso()} >>   Continuing training from checkpoint, will skip to saved global_step\n")
        w.emit(f"[INFO|trainer.py:2449] {w.iso()} >>   Continuing training from global step {resume_from}\n")


def progress(w: LogWriter, step: int, total: int) -> str:
    """One tqdm redraw: `\\r 12%|█▏        | 600/5000 [10:02<1:13:40,  1.00s/it]`."""
    frac = step / total
    cells = frac * 10
    full = int(cells)
    bar = "█" * full + (BAR[int((cells - full) * 8)] if full < 10 else "")
    elapsed = int(step * 1.9)
    left = int((total - step) * 1.9)
    return (f"\r{int(frac * 100):3d}%|{bar:<10}| {step}/{total} [{elapsed // 60:02d}:{elapsed % 60:02d}<"
            f"{left // 3600}:{left // 60 % 60:02d}:{left % 60:02d},  1.9{step % 10}s/it]")


def train_steps(w: LogWriter, first: int, total: int, until_bytes: int, save_every: int, on_save: Callable[[int], bool]) -> int:
    """Train from step `first` until the log reaches `until_bytes`; returns the next step.

    `on_save(step)` runs at each checkpoint save and returns True to stop there (the failure)."""
    rng = w.rng
    step = first
    while w.written < until_bytes:
        bar = []
        for _ in range(10):  # tqdm redraws several times between newlines
            step += 1
            w.tick(1.9)
            bar.append(progress(w, min(step, total), total))
        w.emit("".join(bar) + "\n")
        loss = 2.2 * (0.999 ** (step / 10)) + rng.random() * 0.05
        w.emit(f"{{'loss': {loss:.4f}, 'grad_norm': {0.5 + rng.random():.4f}, 'learning_rate': {2e-5 * (1 - step / total):.4e}, "
               f"'epoch': {3 * step / total:.2f}}}\n")
        if rng.random() < 0.15:
            rank = rng.randrange(w.ranks)
            w.emit(f"[default{rank}]:/opt/conda/lib/python3.11/site-packages/torch/utils/checkpoint.py:87: UserWarning: None of "
                   "the inputs have requires_grad=True. Gradients will be None\n")
        if rng.random() < 0.05:
            rank = rng.randrange(w.ranks)
            w.emit(f"[default{rank}]:[W0506 {w.hms()}.{rng.randrange(10**6):06d} {w.pids[rank]} torch/_dynamo/convert_frame.py:906] "
                   "torch._dynamo hit config.recompile_limit (8)\n")
        if step % (save_every // 2) < 10 and step % save_every >= 10:
            w.emit(f"[INFO|trainer.py:4226] {w.iso()} >> ***** Running Evaluation *****\n")
            w.emit(f"[INFO|trainer.py:4228] {w.iso()} >>   Num examples = 4096\n")
            w.emit(f"{{'eval_loss': {loss + 0.1:.4f}, 'eval_runtime': 61.2, 'eval_samples_per_second': 66.9, 'epoch': {3 * step / total:.2f}}}\n")
        if step % save_every < 10:
            saved = step - step % save_every
            w.emit(f"[INFO|trainer.py:3984] {w.iso()} >> Saving model checkpoint to /shared/out/checkpoint-{saved}\n")
            if on_save(saved):
                return step
            w.tick(95)
            w.emit(f"[INFO|configuration_utils.py:419] {w.iso()} >> Configuration saved in /shared/out/checkpoint-{saved}/config.json\n")
            w.emit(f"[INFO|modeling_utils.py:3042] {w.iso()} >> Model weights saved in /shared/out/checkpoint-{saved}/model.safetensors\n")
    w.flush()
    return step


def buried_failure(w: LogWriter, step: int) -> None:
    """Rank 0 is still writing the checkpoint when every other rank's 30-minute timeout expires."""
    seq = 40_000 + step * 7
    w.tick(1800.09)
    victims = list(range(1, w.ranks))
    for rank in victims:
        prefix = f"[rank{rank}]:[{w.glog('E')} {w.pids[rank]} ProcessGroupNCCL.cpp:616]"
        w.emit(f"{prefix} [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, "
               f"OpType=_ALLGATHER_BASE, NumelIn=194510848, NumelOut={194510848 * w.ranks}, Timeout(ms)=1800000) "
               f"ran for {1800000 + w.rng.randrange(40, 400)} milliseconds before timing out.\n")
        w.tick(0.0003)
    for rank in victims:
        prefix = f"[rank{rank}]:[{w.glog('E')} {w.pids[rank]} ProcessGroupNCCL.cpp:1785]"
        w.emit(f"{prefix} [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error or timeout) detected by "
               f"watchdog at work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.\n")
        w.emit(f"{prefix.replace('1785', '1834')} [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Timeout at NCCL work: {seq}, "
               f"last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.\n")
        w.emit(f"{prefix.replace('1785', '630')} [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Some NCCL operations have failed "
               "or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
               "corrupted/incomplete data.\n")
        w.emit(f"{prefix.replace('1785', '636')} [PG ID 0 PG GUID 0(default_pg) Rank {rank}] To avoid data inconsistency, "
               "we are taking the entire process down.\n")
    w.emit("terminate called after throwing an instance of 'c10::DistBackendError'\n")
    w.emit(f"  what():  [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with exception: "
           f"[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=_ALLGATHER_BASE, "
           f"NumelIn=194510848, NumelOut={194510848 * w.ranks}, Timeout(ms)=1800000) ran for 1800113 milliseconds before timing out.\n")
    w.tick(4)
    agent = 40000
    w.emit(f"{w.glog('W')} {agent} torch/distributed/elastic/multiprocessing/api.py:900] Sending process {w.pids[0]} closing signal SIGTERM\n")
    w.emit(f"{w.glog('E')} {agent} torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -6) local_rank: 1 "
           f"(pid: {w.pids[1]}) of binary: /opt/conda/bin/python3.11\n")
    w.emit(f"{w.glog('I')} {agent} torch/distributed/elastic/agent/server/api.py:944] [default] Worker group FAILED. "
           "3/3 attempts left; will restart worker group\n")
    w.tick(30)


def generate(out: TextIO, size: int, ranks: int = 64, seed: int = 0) -> dict:
    """Write about `size` bytes; return where the failure sits (for the benchmark's report)."""
    w = LogWriter(out, ranks, seed)
    total = max(2_000, size // 70 // 1000 * 1000)  # about 85 bytes of log per step: ends near 100%
    save_every = 500
    launcher_banner(w, 0)
    nccl_init(w)
    trainer_start(w, total, None)
    half = size // 2
    failure: dict = {}

    def fail_after_half(step: int) -> bool:
        if w.written < half:
            return False
        failure.update(step=step, offset=w.written)
        buried_failure(w, step)
        return True

    step = train_steps(w, 0, total, size, save_every, fail_after_half)
    if not failure:  # a tiny size: fail at the first save after the start
        failure.update(step=step, offset=w.written)
        buried_failure(w, step)
    # the elastic agent restarts the group, which resumes from the last good checkpoint
    launcher_banner(w, 1)
    nccl_init(w)
    resumed = failure["step"] - save_every
    trainer_start(w, total, resumed)
    train_steps(w, resumed, total, size, save_every, lambda _: False)
    w.flush()
    failure.update(size=w.written, ranks=ranks, seed=seed)
    return failure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("size", type=parse_size, help="target size: 1M, 100M, 1G ...")
    parser.add_argument("out", help="output file ('-' for standard output)")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.out == "-":
        info = generate(sys.stdout, args.size, args.ranks, args.seed)
    else:
        with open(args.out, "w", encoding="utf-8", newline="") as handle:
            info = generate(handle, args.size, args.ranks, args.seed)
    print(f"wrote {info['size']:,} bytes; failure at byte {info['offset']:,} (step {info['step']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def build_cached(size: int, directory: Path, ranks: int = 64, seed: int = 0) -> Path:
    """The log for (size, ranks, seed), built once and kept in `directory` (for the benchmarks)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"big-v{GENERATOR_VERSION}-{size}-r{ranks}-s{seed}.log"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8", newline="") as handle:
            generate(handle, size, ranks, seed)
        tmp.replace(path)
    return path
