"""benchmarks/scan.py reports each measured command's own peak memory, not the benchmark's."""

from __future__ import annotations

import shutil
import sys

import pytest

from helpers import benchmark_module


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("true") is None, reason="wait4 RSS semantics of Linux")
def test_a_small_command_reads_small_while_the_benchmark_holds_much_memory(tmp_path):
    scan = benchmark_module("scan")
    ballast = bytearray(300 << 20)  # touched below, so resident: the forking process is big
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    seconds, rss_mb, code = scan.run_measured(["true"], tmp_path / "out.txt")
    assert code == 0 and seconds >= 0
    assert rss_mb < 100, f"the measured command read {rss_mb:.0f} MB: the benchmark's own memory was counted"
    del ballast
