"""HTTP throughput and latency of `advisor serve`, against a trivial endpoint of the same app.

Starts the real server (uvicorn) on 127.0.0.1 with 1 and then 2 workers, and drives it with an
asyncio HTTP client at a fixed concurrency: POST /v1/diagnose with a realistic 50-line log, and
GET /healthz (the baseline: same app, no diagnosis). Prints requests/s and p50/p99 latency for each,
and the diagnose/baseline throughput ratio. Every loop is bounded in requests and time, and only
loopback addresses are used.

Usage:  python benchmarks/http_load.py [--requests 600] [--concurrency 32] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

HOST = "127.0.0.1"


def fifty_line_log() -> str:
    lines = [
        "[INFO|2025-05-06 08:00:00] llamafactory.launcher:69 >> Initializing 8 distributed tasks at: 127.0.0.1:29500",
        "***** Running training *****",
    ]
    for step in range(1, 41):
        lines.append(f"{{'loss': {2.0 - step * 0.01:.4f}, 'grad_norm': 1.1, 'learning_rate': 1e-05, 'epoch': {step / 100:.2f}}}")
    lines.append("[INFO|trainer.py:3910] 2025-05-06 08:11:52,112 >> Saving model checkpoint to out/checkpoint-500")
    for rank in (1, 2, 3, 5, 6, 7):
        lines.append(
            f"[rank{rank}]:[E506 08:41:53.511 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=59709, OpType=_ALLGATHER_BASE, NumelIn=194510848, NumelOut=1556086784, "
            "Timeout(ms)=1800000) ran for 1800085 milliseconds before timing out."
        )
    lines.append("[rank2]:[E506 08:41:53.527 ProcessGroupNCCL.cpp:630] [Rank 2] Some NCCL operations have failed or timed out.")
    lines.append("[rank2]:[E506 08:41:53.527 ProcessGroupNCCL.cpp:636] [Rank 2] To avoid data inconsistency, we are taking the entire process down.")
    return "\n".join(lines[:50]) + "\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def start_server(workers: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "advisor", "serve", "--host", HOST, "--port", str(port), "--workers", str(workers)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    base = f"http://{HOST}:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the server did not come up within 60 s")


async def drive(base: str, method: str, path: str, body: dict | None, total: int, concurrency: int, budget_s: float) -> dict:
    latencies: list[float] = []
    failures = 0
    next_index = 0
    deadline = time.perf_counter() + budget_s
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:

        async def worker() -> None:
            nonlocal next_index, failures
            while next_index < total and time.perf_counter() < deadline:
                next_index += 1
                t0 = time.perf_counter()
                try:
                    r = await (client.post(path, json=body) if method == "POST" else client.get(path))
                    ok = r.status_code == 200
                except httpx.HTTPError:
                    ok = False
                latencies.append(time.perf_counter() - t0)
                failures += not ok

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "requests": len(latencies), "failures": failures, "rps": len(latencies) / elapsed if elapsed else 0.0,
        "p50_ms": 1000 * statistics.median(latencies) if latencies else 0.0,
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] if latencies else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=600, help="requests per measurement (bounded)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--budget", type=float, default=60.0, help="seconds per measurement at most")
    args = parser.parse_args(argv)
    body = {"log": fifty_line_log(), "answers": {"model_size_b": "7"}}
    print(f"concurrency {args.concurrency}, {args.requests} requests per row, 50-line log; machine: {os.cpu_count()} CPUs")
    print(f"{'workers':>7} {'endpoint':<16} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'failed':>6}")
    for workers in args.workers:
        proc, base = start_server(workers)
        try:
            asyncio.run(drive(base, "POST", "/v1/diagnose", body, 20, 4, 30))  # warm every worker
            rows = {}
            for name, method, path, payload in (("GET /healthz", "GET", "/healthz", None), ("POST /v1/diagnose", "POST", "/v1/diagnose", body)):
                rows[name] = asyncio.run(drive(base, method, path, payload, args.requests, args.concurrency, args.budget))
                r = rows[name]
                print(f"{workers:>7} {name:<16} {r['rps']:8.1f} {r['p50_ms']:8.1f} {r['p99_ms']:8.1f} {r['failures']:>6}")
            ratio = rows["POST /v1/diagnose"]["rps"] / rows["GET /healthz"]["rps"]
            print(f"{'':>7} diagnose / baseline throughput: {ratio:.2f}")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
