"""Property-based tests (hypothesis) of the reader, the scanner and the matcher on arbitrary input.

For any text or bytes: diagnosing never raises; the Diagnosis validates and is strict JSON; its
status is one of the three; causes are sorted by score; scores are probabilities. And the answer
does not depend on how the same log was delivered: as text or as its UTF-8 bytes, with LF or CRLF
line ends, with or without torchrun's `[rank0]:` prefix on every line.

The example budget is modest for CI; the long local run scales it with an environment variable:

    ADVISOR_FUZZ_EXAMPLES=3000 python -m pytest tests/test_properties.py -q   # about 5 min on two cores
"""

from __future__ import annotations

import json
import os
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from advisor.diagnose import diagnose, read_log
from advisor.models import DiagnoseRequest, Diagnosis
from advisor.reader import iter_blocks, normalize

EXAMPLES = int(os.environ.get("ADVISOR_FUZZ_EXAMPLES", "120"))
pytestmark = pytest.mark.timeout(max(60, EXAMPLES // 10))  # the per-test time guard grows with the budget
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize="ADVISOR_FUZZ_EXAMPLES" not in os.environ,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])

# Real message fragments (PyTorch, NCCL, torchrun): junk built from them reaches the probes.
FRAGMENTS = [
    "Watchdog caught collective operation timeout", "WorkNCCL(SeqNum=", "OpType=ALLREDUCE", "Timeout(ms)=600000",
    "ran for 600081 milliseconds before timing out.", "NCCL WARN", "NCCL INFO", "ncclUnhandledCudaError",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError", "[c10d] The client socket has failed to connect to",
    "[Rank 3] ", "[PG ID 0 PG GUID 0(default_pg) Rank 1] ", "last enqueued NCCL work: 7, last completed NCCL work: 6",
    "Traceback (most recent call last):", '  File "/work/train.py", line 12, in <module>', "RuntimeError: ",
    "torch.OutOfMemoryError: CUDA out of memory.", "exitcode  : -9 (pid: 1234)", "Signal 9 (SIGKILL) received by PID",
    "ProcessGroupNCCL's watchdog got stuck for", "Heartbeat monitor timed out!", "NCCL version 2.21.5+cuda12.4",
    "torch==2.4.1+cu121", "Saving model checkpoint to out/checkpoint-100", " 45%|####5     | 450/1000 [10:00<12:00,  1.31s/it]",
    "failed to extend /dev/shm/nccl-AB12 to 9637888 bytes", "No space left on device", "EADDRINUSE", "GLOBAL_RANK: 0, MEMBER: 1/4",
    "kernel: NVRM: Xid (PCI:0000:9b:00): 79", "node1:81240:81240 [3] ", "world_size=8", "--nnodes=2", "Killed",
]
JUNK = ["\x00", "\x1b[31m", "\x1b[0m", "\x1b[2K\x1b[1A", "\x1b]0;title\x07", "\r", "\r\n", "\n", "\t", "[rank0]:", "[rank12]:",
        "\ufffd", "é", "日本", "[", "(", "=", " " * 40, "9" * 30]

# One-line logs the advisor diagnoses from the line alone (KB positive examples), by cause.
REAL_LINES = {
    "dev-shm-too-small": "node3:2710:2730 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637888 bytes, error: No space left on device (28)",
    "master-port-in-use": "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
    "pcie-p2p-broken": "gpu-c:5512:5620 [2] transport/p2p.cc:275 NCCL WARN failed to peer with device 3(=3b000): 217 peer access is not supported between these two devices",
    "gpu-xid-ecc": "kernel: NVRM: Xid (PCI:0000:9b:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 11",
    "dataloader-worker-died": "RuntimeError: DataLoader worker (pid(s) 31557) exited unexpectedly",
    # (a store that saw 2 of 4 clients, or a store-based barrier timeout, is not on this list: late
    # nodes, wrong sizes and unreachable masters all print them, so alone they are no diagnosis)
    "world-size-mismatch": "gpu-node-7:1234:1290 [3] init.cc:1602 NCCL WARN Invalid rank requested : 7/4",
}
RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:")

# --- strategies ---------------------------------------------------------------------------------

pieces = st.one_of(st.sampled_from(FRAGMENTS), st.sampled_from(JUNK), st.text(max_size=30), st.integers(0, 10**12).map(str))


@st.composite
def mixed_logs(draw) -> str:
    """Real fragments, junk and arbitrary text, with a few pieces repeated into long lines."""
    parts = draw(st.lists(pieces, max_size=40))
    out = []
    for part in parts:
        times = draw(st.sampled_from([1, 1, 1, 2, 50, 400]))
        out.append(part * times)
    return "".join(out)


@st.composite
def long_lines(draw) -> str:
    """A line of a repeated unit up to a few hundred kilobytes (sizes drawn, not strings)."""
    unit = draw(st.one_of(st.sampled_from(FRAGMENTS + JUNK), st.text(min_size=1, max_size=8)))
    count = draw(st.integers(1, 300_000 // max(1, len(unit))))
    tail = draw(st.sampled_from([""] + list(REAL_LINES.values())))
    return unit * count + tail


junk_line = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\n\r\x00\x1b"), max_size=60).filter(
    lambda s: not RANK_PREFIX.match(s))
plain_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 .,;:-_", max_size=50)


def run(kb, log, **kw) -> Diagnosis:
    return diagnose(DiagnoseRequest(log=log, **kw), kb)


def check(d: Diagnosis) -> None:
    """The invariants every diagnosis keeps, whatever the input."""
    Diagnosis.model_validate(d.model_dump())
    json.dumps(d.model_dump(mode="json"), allow_nan=False)
    assert d.status in ("diagnosed", "uncertain", "no-match")
    for group in (True, False):
        scores = [c.score for c in d.causes if c.benign is group]
        assert scores == sorted(scores, reverse=True), scores
    real = [c.score for c in d.causes if not c.benign]
    assert all(0.0 <= c.score <= 1.0 for c in d.causes)
    assert sum(real) <= 1.0 + 1e-3  # one softmax over the causes and "none of these"
    if d.status == "diagnosed" and real:
        assert d.causes[0].score >= 0.5 or d.causes[0].benign
    for cause in d.causes:
        for line in cause.evidence["lines"]:
            assert line["line"] >= 0 and len(line["text"]) <= 300


def top(d: Diagnosis) -> str | None:
    return d.causes[0].id if d.causes else None


# --- never raises, always a valid diagnosis -----------------------------------------------------


@FUZZ
@given(text=st.text(max_size=3000))
def test_any_text(kb, text):
    check(run(kb, text))


@FUZZ
@given(data=st.binary(max_size=5000))
def test_any_bytes(kb, data):
    check(run(kb, data))


@FUZZ
@given(text=mixed_logs())
def test_real_fragments_mixed_with_junk(kb, text):
    check(run(kb, text))
    check(run(kb, text.encode("utf-8", "surrogatepass")))


@FUZZ
@given(text=long_lines())
def test_very_long_lines(kb, text):
    check(run(kb, text))


@FUZZ
@given(text=st.lists(st.one_of(st.integers(0xD800, 0xDFFF).map(chr), st.characters(categories=["Cc", "Co", "Zs", "Lo"]),
                               st.sampled_from(FRAGMENTS)), max_size=100).map("".join))
def test_lone_surrogates_and_control_characters(kb, text):
    """JSON bodies may carry lone surrogates; nothing may turn them into an exception."""
    check(run(kb, text, description=text[:100]))


NUMBER_SLOTS = [
    "[Rank {n}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={n}, OpType=ALLREDUCE, NumelIn={n}, "
    "NumelOut={n}, Timeout(ms)={n}) ran for {n} milliseconds before timing out.",
    "[Rank 1] last enqueued NCCL work: {n}, last completed NCCL work: {n}", "world_size={n}", "--nnodes={n} --nproc_per_node={n}",
    "exitcode  : {n} (pid: {n})", "torch=={n}.{n}.{n}", "NCCL version {n}.{n}", "{n}/{n} clients joined",
    " 45%|####| {n}/{n} [10:00<12:00,  {n}.{n}s/it]", "Timed out waiting {n}ms for recv operation to complete",
    "ProcessGroupNCCL's watchdog got stuck for {n} seconds without making progress in monitoring enqueued collectives",
    "total params: {n}", "step: {n}  loss: 1.0 tps: {n}", "GLOBAL_RANK: {n}, MEMBER: {n}/{n}", "host-{n}:{n}:{n} [{n}] NCCL INFO x",
]


@FUZZ
@given(slots=st.lists(st.sampled_from(NUMBER_SLOTS), min_size=1, max_size=6), digit=st.sampled_from("0179"),
       length=st.one_of(st.integers(1, 30), st.integers(4000, 20_000)))
def test_numbers_of_any_length(kb, slots, digit, length):
    """`int()` refuses over 4300 digits and a float overflows: a number too long is no fact."""
    n = digit * length
    d = run(kb, "\n".join(slot.format(n=n) for slot in slots))
    check(d)
    for name, value in d.facts.items():
        assert not (isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) >= 10**18), (name, value)


@FUZZ
@given(lines=st.lists(st.text(max_size=80), max_size=30), ranks=st.lists(st.integers(0, 10**7), min_size=1, max_size=30),
       sep=st.sampled_from(["\n", "\r\n", "\r"]), nul=st.booleans(), ansi=st.booleans())
def test_rank_prefixes_nuls_ansi_and_line_ends(kb, lines, ranks, sep, nul, ansi):
    out = []
    for i, line in enumerate(lines):
        if nul:
            line = line.replace(" ", "\x00")
        if ansi:
            line = f"\x1b[3{i % 8}m{line}\x1b[0m"
        out.append(f"[rank{ranks[i % len(ranks)]}]:{line}")
    check(run(kb, sep.join(out)))


@FUZZ
@given(text=mixed_logs(), answers=st.dictionaries(st.sampled_from(["phase", "model_size_b", "nodes", "storage", "framework"]),
                                                  st.sampled_from(["save", "7", "2", "network-fs", "unknown", "llama-factory"]), max_size=3))
def test_answers_on_junk(kb, text, answers):
    try:
        d = run(kb, text, answers=answers)
    except Exception as exc:  # an answer a question rejects is the caller's error, reported as such
        from advisor.answers import AnswerError

        assert isinstance(exc, AnswerError), exc
        return
    check(d)


# --- the same log, delivered differently --------------------------------------------------------


@FUZZ
@given(text=st.one_of(st.text(max_size=2000), mixed_logs()))
def test_text_and_its_utf8_bytes_give_the_same_diagnosis(kb, text):
    as_text, as_bytes = run(kb, text), run(kb, text.encode("utf-8"))
    assert top(as_text) == top(as_bytes)
    assert as_text.model_dump() == as_bytes.model_dump()


@FUZZ
@given(lines=st.lists(st.one_of(junk_line, st.sampled_from(FRAGMENTS), st.sampled_from(list(REAL_LINES.values()))), max_size=25))
def test_crlf_and_lf_give_the_same_causes(kb, lines):
    text = "\n".join(lines)
    assume(len(text.replace("\n", "\r\n")) <= 3900)  # both sides of the free-text (prose) size limit alike
    lf, crlf = run(kb, text), run(kb, text.replace("\n", "\r\n"))
    assert [(c.id, c.score) for c in lf.causes] == [(c.id, c.score) for c in crlf.causes]
    assert lf.facts == crlf.facts


@FUZZ
@given(cause=st.sampled_from(sorted(REAL_LINES)), before=st.lists(plain_words, max_size=8), after=st.lists(plain_words, max_size=8),
       rank=st.integers(0, 4095))
def test_rank_prefix_on_every_line_keeps_the_top_cause(kb, cause, before, after, rank):
    """torchrun's `--tee`/log prefix puts `[rankN]:` before every line a rank prints."""
    lines = [*before, REAL_LINES[cause], *after]
    plain = "\n".join(lines)
    prefixed = "\n".join(f"[rank{rank}]:{line}" for line in lines)
    assert top(run(kb, plain)) == cause
    assert top(run(kb, prefixed)) == cause


def test_rank_prefix_on_every_line_of_the_kb_examples_keeps_the_top_cause(kb):
    """The same over every KB positive example, prefixing the lines a rank would print (lines that
    already carry a prefix keep theirs: torchrun adds one, not two)."""
    checked = 0
    for cause in kb.causes.values():
        for ex in cause.examples.positive:
            if ex.recorded:
                continue  # several processes' output interleaved: one rank's prefix on every line would misattribute it
            prefixed = "\n".join(line if not line or RANK_PREFIX.match(line) else "[rank0]:" + line for line in ex.log.split("\n"))
            plain, ranked = run(kb, ex.log, answers=ex.answers), run(kb, prefixed, answers=ex.answers)
            if len(plain.causes) > 1 and plain.causes[0].score < 1.2 * plain.causes[1].score:
                continue  # a near tie: which of the two leads is not the property under test
            assert top(plain) == top(ranked), (cause.id, ex.name)
            checked += 1
    assert checked >= 30


# --- the reader on its own ----------------------------------------------------------------------


@FUZZ
@given(data=st.binary(max_size=3000), block=st.integers(1, 600))
def test_blocks_reassemble_the_normalized_input(data, block):
    """Whatever the block size, the blocks are the normalized input, split only at line ends
    (or inside a line longer than a block), with consistent line numbers."""
    import io

    blocks = list(iter_blocks(io.BytesIO(data), block_size=block))
    joined = b"".join(b.data for b in blocks)
    if b"\x1b" not in data:  # an escape sequence may straddle two reads, and is then kept
        assert joined == normalize(data)
    line = 1
    for b in blocks:
        assert b.first_line == line
        assert b.newlines == b.data.count(b"\n")
        line += b.newlines
        assert b"\r" not in b.data and b"\x00" not in b.data


@FUZZ
@given(text=mixed_logs())
def test_read_log_stats_count_the_input(kb, text):
    reading = read_log(kb, text)
    data = normalize(text.encode("utf-8", "surrogatepass"))
    if b"\x1b" not in data:
        assert reading.stats.bytes == len(data)
    assert reading.stats.lines <= data.count(b"\n") + 1


@pytest.mark.parametrize("cause", sorted(REAL_LINES))
def test_real_lines_are_diagnosed_alone(kb, cause):
    """The properties above rely on these lines naming their cause on their own."""
    d = run(kb, REAL_LINES[cause])
    assert top(d) == cause and d.status == "diagnosed"
