"""Ranking, rules, answers and questions: the behaviour the KB relies on."""

from __future__ import annotations

import pytest

from advisor import schema
from advisor.answers import AnswerError, parse_answer
from advisor.diagnose import diagnose
from advisor.matcher import prose
from advisor.models import DiagnoseRequest
from advisor.rules import condition_holds

TIMEOUT = ("[rank1]:[E101 01:00:00.100 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=522, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800021 milliseconds before timing out.")
PLUGIN = ("node:1:1 [3] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory "
          "No plugin found (libnccl-net.so), using internal implementation")


def run(kb, log: str, **answers) -> object:
    return diagnose(DiagnoseRequest(log=log, answers={k: str(v) for k, v in answers.items()}), kb)


def test_harmless_lines_never_outrank_a_real_cause(kb):
    d = run(kb, PLUGIN + "\n" + TIMEOUT)
    assert not d.causes[0].benign
    assert [n.cause_id for n in d.notices] == ["nccl-plugin-noise"]


# torch >= 2.6 prints the Flight Recorder hint (harmless) right after a bare watchdog timeout, which
# many causes explain about equally: the hint must not lead because no real cause stands out
BARE_TIMEOUT_WITH_FR_HINT = """\
[rank1]:[E918 19:29:53.175630041 ProcessGroupNCCL.cpp:689] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=712, OpType=ALLREDUCE, NumelIn=5939, NumelOut=5939, Timeout(ms)=600000) ran for 600040 milliseconds before timing out.
[rank1]:[E918 19:29:53.176093056 ProcessGroupNCCL.cpp:736] Stack trace of the failed collective not found, potentially because FlightRecorder is disabled. You can enable it by setting TORCH_NCCL_TRACE_BUFFER_SIZE to a non-zero value.
"""


def test_a_harmless_line_never_leads_a_log_that_failed(kb):
    d = run(kb, BARE_TIMEOUT_WITH_FR_HINT)
    assert max(c.score for c in d.causes if not c.benign) < 0.15  # no real cause stands out ...
    assert not d.causes[0].benign  # ... and still the timeout, not the hint, is what needs explaining
    assert "launcher-noise" in [n.cause_id for n in d.notices]  # the hint is still explained as harmless


def test_harmless_line_alone_is_reported_as_harmless(kb):
    d = run(kb, PLUGIN)
    assert d.causes[0].id == "nccl-plugin-noise" and d.causes[0].benign
    assert "harmless" in d.headline.lower()


# an nccl-tests run that printed its header and NCCL's start-up lines, then nothing: the same text
# is a hang in the first collective or a healthy run whose user asks about the warnings
QUIET_NCCL_TESTS = """# nThread 1 nGpus 4 minBytes 8 maxBytes 268435456 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  4711 on gpu-box device  0 [0x02] GeForce GTX 1080 Ti
#   Rank  1 Pid  4711 on gpu-box device  1 [0x03] GeForce GTX 1080 Ti
gpu-box:4711:4711 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.5<0>
gpu-box:4711:4711 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so).
gpu-box:4711:4711 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]
gpu-box:4711:4711 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>
NCCL version 2.4.8+cuda10.0
gpu-box:4711:4711 [1] NCCL INFO nranks 2
"""


def test_a_quiet_log_lists_its_harmless_lines_right_after_the_lead(kb):
    d = run(kb, QUIET_NCCL_TESTS)
    assert not d.causes[0].benign and d.status != "diagnosed"
    assert d.causes[1].benign and d.causes[1].code == "benign-warning"


def test_harmless_lines_stay_last_beside_a_printed_failure(kb):
    d = run(kb, QUIET_NCCL_TESTS + TIMEOUT)
    real = [c for c in d.causes if not c.benign]
    assert d.causes[: len(real)] == real


def test_nothing_recognised_says_so_and_suggests_diagnostics(kb):
    d = run(kb, "epoch 3 finished\nall good\n")
    assert d.status == "no-match"
    assert d.headline.startswith("No confident match")
    assert any("NCCL_DEBUG" in n for n in d.fix.next_run)
    assert "NCCL_DEBUG=INFO" in d.fix.snippets[0].content


def test_deterministic(kb):
    a = run(kb, PLUGIN + "\n" + TIMEOUT, phase="save")
    b = run(kb, PLUGIN + "\n" + TIMEOUT, phase="save")
    assert a.model_dump_json() == b.model_dump_json()


def test_answer_overrides_the_log_and_changes_the_ranking(kb):
    log = "Saving model checkpoint to out/checkpoint-100\n" + TIMEOUT
    assert run(kb, log).causes[0].code == "checkpoint-save-straggler"
    after = run(kb, log, phase="eval")
    assert after.causes[0].code == "eval-straggler"
    assert after.fact_sources["phase"].origin == "answer"


def test_oom_before_the_timeouts_is_the_cause(kb):
    log = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n" + TIMEOUT
    assert run(kb, log).causes[0].code == "gpu-oom-on-rank"


def test_exception_on_one_rank_is_the_cause_not_the_timeouts(kb):
    log = ("[rank2]: Traceback (most recent call last):\n[rank2]:   File \"/work/train.py\", line 9, in load\n"
           "[rank2]: ValueError: bad sample at index 7\n" + TIMEOUT)
    d = run(kb, log)
    assert d.causes[0].code == "rank-exception"
    assert d.facts["exception_before_timeout"] is True


def test_chinese_description_is_matched(kb):
    d = diagnose(DiagnoseRequest(description="保存模型时NCCL超时", framework="llama-factory"), kb)
    assert d.causes[0].code == "checkpoint-save-straggler"
    assert d.facts["phase"] == "save"


def test_english_description_is_matched(kb):
    d = diagnose(DiagnoseRequest(description="multi gpu training hangs with no error on a single machine, gpus at 100 percent"), kb)
    assert d.causes[0].code == "p2p-topology-issue"


def test_log_lines_do_not_fuzzy_match_symptom_phrases():
    assert prose("initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2\n[E socket.cpp:793] [c10d] timed out") == ""
    assert prose("root : INFO Namespace(config_yaml='./a.yaml', gpus=7)") == ""
    assert prose("the job hangs while saving the model\n保存模型时NCCL超时") == "the job hangs while saving the model\n保存模型时NCCL超时"


def test_evidence_names_lines_and_facts(kb):
    d = run(kb, "Saving model checkpoint to out/checkpoint-100\n" + TIMEOUT)
    top = d.causes[0]
    assert top.evidence["lines"][0]["line"] == 2
    assert any(f["fact"] == "phase" and f["line"] == 1 for f in top.evidence["facts"])


@pytest.mark.parametrize(("name", "value", "cond", "expected"), [
    ("phase", "save", "save", True),
    ("phase", "save", ["eval", "save"], True),
    ("phase", "train", "save", False),
    ("phase", None, "save", None),
    ("timeout_ms", 60000, schema.Comparison(lt=300000), True),
    ("timeout_ms", 600000, schema.Comparison(lt=300000), False),
    ("user_exception", "KeyError: x", schema.Comparison(present=True), True),
    ("user_exception", None, schema.Comparison(present=False), True),
    ("torch_version", "2.4.1+cu121", ">=2.2", True),
    ("torch_version", "2.1.2", ">=2.2", False),
    ("framework_version", "main", "==0.15.0", None),
    ("packing", False, False, True),
    ("failure_kinds", ["oom", "timeout"], "oom", True),
])
def test_condition_semantics(name, value, cond, expected):
    assert condition_holds(name, value, cond) is expected


@pytest.mark.parametrize(("qid", "raw", "expected"), [
    ("phase", "save", "save"),
    ("phase", "SAVE", "save"),
    ("phase", "unknown", None),
    ("phase", "?", None),
    ("framework", "LlamaFactory", "llama-factory"),
    ("framework", "pytorch_lightning", "lightning"),
    ("framework", "axolotl", "other"),
    ("nodes", "4", 4),
    ("model_size_b", "7B", 7.0),
    ("packing", "no", False),
    ("framework_version", "v0.15.0", "0.15.0"),
])
def test_answers_are_parsed(kb, qid, raw, expected):
    assert parse_answer(kb, kb.questions[qid], raw) == expected


@pytest.mark.parametrize(("qid", "raw"), [("phase", "lunch"), ("nodes", "many"), ("packing", "sometimes"), ("nodes", "-2")])
def test_bad_answers_say_what_would_fit(kb, qid, raw):
    with pytest.raises(AnswerError) as err:
        parse_answer(kb, kb.questions[qid], raw)
    assert qid in str(err.value)


def test_unknown_question_id_is_an_error(kb):
    with pytest.raises(AnswerError, match="no such question"):
        run(kb, TIMEOUT, bogus="1")


def test_questions_never_ask_what_the_log_answered(kb):
    d = run(kb, "Saving model checkpoint to out/checkpoint-100\n" + TIMEOUT)
    assert "phase" not in [q.id for q in d.questions]
    d2 = run(kb, TIMEOUT)
    assert "phase" in [q.id for q in d2.questions][:2]


def test_questions_are_ordered_by_expected_gain(kb):
    d = run(kb, TIMEOUT)
    gains = [q.gain for q in d.questions]
    assert gains == sorted(gains, reverse=True)
    assert all(q.reason for q in d.questions)


SYSTEM_ERROR = ("RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, "
                "NCCL version 2.7.8\n")


def test_questions_weigh_the_causes_the_log_points_to(kb):
    """An NCCL system error points to the network interface and to /dev/shm: the node count and the
    container decide between them. The phase only reshuffles causes the log gives nothing to, so it
    is not what to ask first (it was, while those weighed in)."""
    d = run(kb, SYSTEM_ERROR)
    top = {c.id for c in d.causes[:2]}
    assert top == {"wrong-socket-interface", "dev-shm-too-small"}
    asked = [q.id for q in d.questions]
    assert asked[0] in {"nodes", "container"} and "phase" not in asked[:2]
    one_node = run(kb, SYSTEM_ERROR, nodes="1")
    assert one_node.causes[0].id == "dev-shm-too-small"
    two = run(kb, SYSTEM_ERROR, nodes="2")
    assert two.causes[0].id == "wrong-socket-interface"


def test_a_log_with_one_lead_still_asks_across_the_rest(kb):
    d = run(kb, TIMEOUT)  # a bare timeout: no cause stands out, the phase is what separates them
    assert "phase" in [q.id for q in d.questions][:2]


def test_answered_questions_are_not_asked_again_even_when_unknown(kb):
    d = run(kb, TIMEOUT, phase="unknown")
    assert "phase" not in [q.id for q in d.questions]


def test_a_lone_watchdog_line_names_the_symptom_and_asks(kb):
    """One pasted timeout line: say what failed (op, SeqNum, limit), not "nothing recognised"."""
    line = ("[rank3]:[E506 08:41:53.511 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=59709, OpType=_ALLGATHER_BASE, NumelIn=1, NumelOut=8, Timeout(ms)=1800000) ran for 1800098 "
            "milliseconds before timing out.")
    d = run(kb, line)
    assert d.status == "no-match"
    assert d.headline.startswith("Cause not yet known: A collective timed out (_ALLGATHER_BASE at SeqNum 59709 after 30 min)")
    assert d.questions, "the answers are what can narrow a lone timeout down"
    assert d.questions[0].id in {"phase", "framework"}


def test_words_never_claim_more_than_the_numbers(kb):
    """"Likely" is kept for a lead of at least 35 %; between questions the standing follows the status."""
    from advisor.diagnose import _headline
    from advisor.models import Fix
    from advisor.render import standing

    d = run(kb, TIMEOUT)
    top = d.causes[0]
    fix = Fix(cause_id=top.id, summary=top.summary, explanation="")
    for score, lead in ((0.22, "Possibly:"), (0.34, "Possibly:"), (0.35, "Likely:"), (0.49, "Likely:")):
        cause = top.model_copy(update={"score": score})
        assert _headline("uncertain", [cause], cause, fix).startswith(lead)
    low = d.model_copy(update={"status": "uncertain", "causes": [top.model_copy(update={"score": 0.10})]})
    assert standing(low).startswith("ahead so far, not yet sure") and "leading" not in standing(low)
    assert standing(d.model_copy(update={"status": "no-match"})) == "no cause stands out yet"
    assert standing(d.model_copy(update={"status": "diagnosed"})).startswith("leading: ")


def test_one_line_one_vote_is_the_stronger_vote(kb):
    """A line matched both by a cause's own (generic) signature and by a catalogue entry pointing to
    the cause counts once, at the larger of the two weights: the generic regex must not mute it."""
    from advisor.diagnose import diagnose
    from advisor.models import DiagnoseRequest

    line = ("srv-2:9463:9471 [0] transport/net_ib.cc:100 NCCL WARN NET/IB : mlx5_0:1 Got async event : "
            "local access violation work queue error")
    catalogued = next(p.weight for p in kb.messages["nccl-ib.net-ib-got-non-fatal-async-event"].points_to
                      if p.cause == "ib-rdma-fault")
    own = next(s.weight for s in kb.causes["ib-rdma-fault"].signatures if s.id == "wc-status-name")
    assert own < catalogued  # the situation under test
    cause = next(c for c in diagnose(DiagnoseRequest(log=line)).causes if c.id == "ib-rdma-fault")
    assert [e["signature"] for e in cause.evidence["lines"]] == ["wc-status-name"]  # counted once
    assert cause.raw_score == catalogued + kb.causes["ib-rdma-fault"].prior


SAVE_TIMEOUT = ("[rank3]:[E217 14:55:02.441920337 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
                "WorkNCCL(SeqNum=38, OpType=_ALLGATHER_BASE, NumelIn=9510912, NumelOut=38043648, Timeout(ms)=1800000) "
                "ran for 1800033 milliseconds before timing out.")


def test_an_answered_phase_ranks_but_does_not_decide(kb):
    """The user's phase says when, not why (a straggler, a rank-conditional save and uneven shards
    all show in a save or an evaluation): ranked first, stated as likely, never the verdict alone."""
    d = run(kb, SAVE_TIMEOUT, phase="save")
    assert d.causes[0].code == "checkpoint-save-straggler" and d.status == "uncertain"


def test_a_phase_the_log_shows_is_evidence(kb):
    """The Trainer's own save line right before the timeout: the log shows the save never ended."""
    d = run(kb, "[INFO|trainer.py:3984] 2025-01-10 12:00:01,123 >> Saving model checkpoint to /ckpt/checkpoint-500\n" + SAVE_TIMEOUT)
    assert d.causes[0].code == "checkpoint-save-straggler" and d.status == "diagnosed"


def test_ncclremoteerror_lists_both_networks_it_can_come_from(kb):
    """ncclRemoteError ('remote process exited or there was a network error') ends NCCL's socket
    failures as well as its InfiniBand ones: both transports' causes are candidates."""
    d = run(kb, "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, "
                "remote process exited or there was a network error, NCCL version 2.18.6")
    ids = [c.id for c in d.causes[:3]]
    assert "ib-rdma-fault" in ids and "wrong-socket-interface" in ids and d.status != "diagnosed"
