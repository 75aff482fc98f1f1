"""Throughput and peak memory of `advisor suggest --log` on big logs, next to grep in the same run.

For each size (default 1 MB, 100 MB and 1 GB) it builds a realistic multi-rank log with a buried
failure (benchmarks/make_big_log.py, cached under .bench/), then times, as separate processes:

  baseline  `grep -E -c -f <patterns>` with the knowledge base's own probe patterns (signatures,
            phase cues, framework detectors, fact extractors) translated to POSIX ERE, one grep for
            the case-insensitive ones (-i) and one for the rest, back to back;
  advisor   `advisor suggest --log FILE --json`, the whole diagnosis, start-up included.

It prints MB/s for both and their ratio, each process's peak RSS (from wait4, measured from a bare
launcher so that this process's own memory is not counted), and whether the
diagnosis (status, top cause, the facts that drive it) is the same at every size.
Targets (issue 6): throughput >= 0.5x grep; peak RSS <= 150 MB at every size; the same diagnosis.

Usage:  python benchmarks/scan.py [--sizes 1M,100M,1G] [--ranks 64] [--seed 0] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_big_log import EXPECTED_CODE, build_cached, parse_size  # noqa: E402

RSS_TARGET_MB = 150
RATIO_TARGET = 0.5
SAME_FACTS = ("phase", "op_type", "timeout_ms", "framework", "world_size", "first_failure", "backend", "only_rank0_reported", "rank0_silent")


# --- the baseline's patterns --------------------------------------------------------------------

_ERE_CLASS_ESCAPES = {"d": "0-9", "s": "[:space:]", "w": "[:alnum:]_"}
_ERE_ESCAPES = {"d": "[0-9]", "D": "[^0-9]"}  # GNU grep knows \s \S \w \W \b \< \> itself


def to_ere(pattern: str) -> tuple[str, bool] | None:
    """A KB pattern (RE2 syntax) as GNU ERE, with whether it needs -i; None if ERE cannot say it.

    grep reads line by line, so multi-line flags drop out; lazy quantifiers become greedy (the same
    lines match); named and non-capturing groups become plain groups."""
    ignore_case = False
    lead = re.match(r"\(\?([ims]+)\)", pattern)
    if lead:
        ignore_case = "i" in lead.group(1)
        pattern = pattern[lead.end():]
    if re.search(r"\(\?[=!<][^P]|\(\?<[=!]|\\[1-9]|\(\?P=|\\[AzZnrtfvx]", pattern):
        return None  # look-arounds, back-references, anchors and escapes ERE lacks
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            n = pattern[i + 1]
            if in_class:
                if n in _ERE_CLASS_ESCAPES:
                    out.append(_ERE_CLASS_ESCAPES[n])
                elif n in "nr":
                    pass  # grep reads lines: there is never a line break to exclude or include
                elif n == "t":
                    out.append("\t")
                elif n in "DSW]\\^-":
                    return None  # no portable spelling inside an ERE bracket expression
                else:
                    out.append(n)
            else:
                out.append(_ERE_ESCAPES.get(n, "\\" + n))
            i += 2
            continue
        if in_class:
            in_class = c != "]"
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            j = i + 1 + (pattern[i + 1:i + 2] == "^")
            j += pattern[j:j + 1] == "]"
            out.append(pattern[i:j])
            i = j
            continue
        if c == "(" and pattern[i + 1:i + 2] == "?":
            group = re.match(r"\(\?(?::|P<\w+>|<\w+>)", pattern[i:])
            if not group:
                return None  # inline flag groups such as (?i:...)
            out.append("(")
            i += len(group.group(0))
            continue
        if c in "*+?}" and pattern[i + 1:i + 2] == "?":
            out.append(c)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out), ignore_case


def baseline_patterns(directory: Path) -> tuple[list[Path], int, int]:
    """Pattern files for grep (case-insensitive, case-sensitive) from the loaded KB's probes."""
    from advisor.knowledge import load_kb

    probes = load_kb().probe_table.probes
    groups: dict[bool, list[str]] = {True: [], False: []}
    skipped = 0
    for probe in probes:
        converted = to_ere(probe.pattern)
        if converted is None:
            skipped += 1
            continue
        ere, inline_i = converted
        groups[probe.ignore_case or inline_i].append(ere)
    files = []
    for ignore_case, patterns in groups.items():
        if patterns:
            path = directory / ("patterns-i.txt" if ignore_case else "patterns.txt")
            path.write_text("\n".join(patterns) + "\n")
            files.append(path)
    return files, len(probes) - skipped, len(probes)


# --- measuring one process ----------------------------------------------------------------------


# A child's peak RSS from wait4 includes the memory of the process it was forked from: Linux keeps
# the larger of the pre-exec image's high-water mark and the new program's. This process holds the
# knowledge base and the pattern lists (well over 100 MB), so the measured command is started from a
# bare interpreter that reports the command's own figures (its own image is a few MB).
_LAUNCHER = """
import json, os, subprocess, sys, time
out = open(sys.argv[1], "wb") if sys.argv[1] != "-" else subprocess.DEVNULL
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(json.dumps([time.perf_counter() - start, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)]))
"""


def run_measured(command: list[str], stdout_path: Path | None = None) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MB (the command alone, from wait4 in a bare launcher), exit code."""
    launched = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER, str(stdout_path or "-"), *command],
                              capture_output=True, text=True, check=True)
    elapsed, rss, code = json.loads(launched.stdout)
    return elapsed, rss, code


def advisor_command() -> list[str]:
    script = Path(sys.executable).with_name("advisor")
    return [str(script)] if script.exists() else [sys.executable, "-m", "advisor"]


def summary_of(diagnosis: dict) -> dict:
    top = diagnosis["causes"][0] if diagnosis.get("causes") else {}
    return {
        "status": diagnosis.get("status"),
        "top": top.get("id"),
        "code": top.get("code"),
        **{name: diagnosis.get("facts", {}).get(name) for name in SAME_FACTS},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1M,100M,1G", help="comma-separated sizes (default 1M,100M,1G)")
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=HERE.parent / ".bench", help="where generated logs are cached")
    args = parser.parse_args()
    if shutil.which("grep") is None:
        raise SystemExit("grep is not on PATH: it is the baseline")

    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    work = Path(tempfile.mkdtemp(prefix="advisor-scan-"))
    env_cache = str(work / "kb-cache")
    os.environ["ADVISOR_CACHE_DIR"] = env_cache
    try:
        pattern_files, converted, total = baseline_patterns(work)
        subprocess.run([*advisor_command(), "suggest", "--error", "warm the KB cache"], capture_output=True, check=False)
        grep_version = subprocess.run(["grep", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.platform()}; {grep_version}")
        print(f"baseline: grep -E -c with {converted} of the KB's {total} probe patterns "
              f"(the rest use syntax ERE lacks), in {len(pattern_files)} runs (-i and case-sensitive)\n")
        print(f"{'size':>8} {'grep s':>8} {'MB/s':>7} {'RSS MB':>7} | {'advisor s':>9} {'MB/s':>7} {'RSS MB':>7} | "
              f"{'ratio':>6}  diagnosis")
        seen: list[dict] = []
        worst_rss, worst_ratio = 0.0, float("inf")
        for size in sizes:
            started = time.perf_counter()
            log = build_cached(size, args.data, args.ranks, args.seed)
            built = time.perf_counter() - started
            mb = log.stat().st_size / 1e6
            grep_s, grep_rss = 0.0, 0.0
            for path in pattern_files:
                flags = ["-E", "-c", "-i"] if path.name == "patterns-i.txt" else ["-E", "-c"]
                seconds, rss, code = run_measured(["grep", *flags, "-f", str(path), str(log)])
                if code not in (0, 1):
                    raise SystemExit(f"grep failed ({code}) on {path}")
                grep_s += seconds
                grep_rss = max(grep_rss, rss)
            out = work / "diagnosis.json"
            adv_s, adv_rss, code = run_measured([*advisor_command(), "suggest", "--log", str(log), "--json"], out)
            if code not in (0, 1):
                raise SystemExit(f"advisor failed ({code}) on {log}")
            found = summary_of(json.loads(out.read_text()))
            seen.append(found)
            ratio = (mb / adv_s) / (mb / grep_s)
            worst_rss, worst_ratio = max(worst_rss, adv_rss), min(worst_ratio, ratio)
            label = f"{found['code']} ({found['phase']})" + ("" if found["code"] == EXPECTED_CODE else "  <- expected " + EXPECTED_CODE)
            print(f"{mb:>7.0f}M {grep_s:>8.2f} {mb / grep_s:>7.1f} {grep_rss:>7.0f} | {adv_s:>9.2f} {mb / adv_s:>7.1f} "
                  f"{adv_rss:>7.0f} | {ratio:>5.2f}x  {label}" + (f"   (log built in {built:.0f} s)" if built > 5 else ""))
        same = all(s == seen[0] for s in seen)
        print()
        print(f"throughput: worst ratio {worst_ratio:.2f}x grep (target >= {RATIO_TARGET}x): "
              f"{'met' if worst_ratio >= RATIO_TARGET else 'NOT met'}")
        print(f"memory: worst peak RSS {worst_rss:.0f} MB (target <= {RSS_TARGET_MB} MB): "
              f"{'met' if worst_rss <= RSS_TARGET_MB else 'NOT met'}")
        print(f"same diagnosis at every size: {'yes' if same else 'NO'}")
        if not same:
            for size, found in zip(sizes, seen):
                print(f"  {size:>12,}: {found}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
