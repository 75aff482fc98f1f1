"""Reasoning that transfers: facts derived across ranks and messages, and verdicts that are never
confident without specific evidence. Log excerpts below were printed by torch 2.13 (gloo, torchrun
on 127.0.0.1) in the failures named; paths shortened."""

from __future__ import annotations

from advisor.diagnose import confident, diagnose
from advisor.models import DiagnoseRequest
from advisor.render import render_text

MISMATCH = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/tmp/exp/mismatch.py", line 6, in <module>
[rank0]:     dist.all_reduce(t)
[rank0]:   File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83, in wrapper
[rank0]:     return func(*args, **kwargs)
[rank0]:   File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252, in all_reduce
[rank0]:     work.wait()
[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 8000ms for recv operation to complete
[rank1]: Traceback (most recent call last):
[rank1]:   File "/tmp/exp/mismatch.py", line 9, in <module>
[rank1]:     dist.all_gather(out, t)
[rank1]:   File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 83, in wrapper
[rank1]:     return func(*args, **kwargs)
[rank1]:   File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 4287, in all_gather
[rank1]:     work.wait()
[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:129] Timed out waiting 8000ms for send operation to complete
"""

ROOT_CAUSE = """\
[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:5007. This is typically caused by a remote worker crashing. Check the logs of the remote worker before reporting an error. GLHF!
W1123 21:03:33.827000 16479 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 16590 closing signal SIGTERM
E1123 21:03:33.892000 16479 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 1 (pid: 16591) of binary: /venv/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
=======================================================
simple.py FAILED
-------------------------------------------------------
Failures:
[1]:
  time      : 2026-11-23_21:03:33
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 16590)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 16590
-------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-23_21:03:33
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 16591)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 16591
=======================================================
"""

STORE_KEY = """\
[W1123 21:04:35.188785852 socket.cpp:494] [c10d] waitForInput: socket SocketImpl(fd=13, addr=[::ffff:127.0.0.1]:50164, remote=[::ffff:127.0.0.1]:29515) timed out after 8000ms
torch.distributed.DistStoreError: wait timeout after 8000ms, keys: /default_pg/0//cpu//0/2
"""


def run(log: str, **answers: str):
    return diagnose(DiagnoseRequest(log=log, answers=answers, max_causes=10))


def test_ranks_waiting_in_different_collectives_are_a_mismatch():
    d = run(MISMATCH)
    assert d.facts["waiting_ops"] == {"0": "all_reduce", "1": "all_gather"}
    assert d.facts["op_mismatch"] is True
    assert d.causes[0].code == "collective-mismatch"


def test_the_same_collective_on_every_rank_is_no_mismatch():
    same = MISMATCH.replace("in all_gather", "in all_reduce")
    d = run(same)
    assert d.facts["waiting_ops"] == {"0": "all_reduce", "1": "all_reduce"}
    assert "op_mismatch" not in d.facts


def test_the_failure_summary_names_the_root_cause_rank_and_its_signal():
    d = run(ROOT_CAUSE)
    assert d.facts["root_cause_rank"] == 1
    assert d.facts["root_cause_exit_code"] == -9
    assert d.facts["exit_code"] == -9  # not the survivor's SIGTERM (-15)
    assert d.causes[0].code == "host-oom-or-killed"


def test_a_store_key_for_a_rank_beyond_the_world_is_outside_it():
    d = run(STORE_KEY + "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n")
    assert d.facts["awaited_rank"] == 2
    assert d.facts["world_size"] == 2
    assert d.facts["rank_outside_world"] is True


def test_a_store_key_inside_the_world_says_nothing_about_it():
    d = run(STORE_KEY.replace("//0/2", "//0/1") + "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n")
    assert d.facts["awaited_rank"] == 1
    assert "rank_outside_world" not in d.facts


def test_a_global_rank_announced_twice_is_a_duplicate():
    log = "".join(f"[{host}] Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4\n"
                  for host in ("node-a", "node-b") for r in (0, 1))
    d = run(log)
    assert d.facts["duplicate_ranks"] == [0, 1]
    once = run("".join(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/4\n" for r in range(4)))
    assert "duplicate_ranks" not in once.facts


def test_a_store_timeout_alone_is_no_confident_verdict():
    # late nodes, wrong sizes, an unreachable master and a crash before init all print it
    d = run(STORE_KEY.replace("//0/2", "//0/1"))
    assert d.status != "diagnosed"


def test_nothing_recognised_still_lists_low_confidence_candidates_marked_as_such():
    d = run("ERROR: the shared memory segment could not be created, no space left for the workers\n")
    similar = [c for c in d.causes if c.basis == "similar-text"]
    assert d.status == "no-match"
    assert similar and similar[0].code == "shm-exhausted"
    assert all(c.score <= 0.12 and c.evidence["lines"][0]["line"] == 1 for c in similar)
    assert "Low-confidence candidates" in render_text(d)


def test_unrelated_text_gets_no_candidates():
    d = run("Epoch 3: validation accuracy improved to 0.91, saving the best model\n")
    assert d.causes == [] or all(c.basis == "evidence" for c in d.causes)


def test_a_verdict_needs_a_clear_lead_over_another_code(kb):
    d = run(MISMATCH)
    top = d.causes[0]
    assert confident(d.causes, top) == (d.status == "diagnosed")
    rival = top.model_copy(update={"code": "uneven-inputs", "id": "uneven-batches", "score": top.score / 2})
    assert not confident([top, rival], top)


def test_a_requirement_that_fails_rules_a_cause_out_and_an_unknown_one_cannot_win(kb):
    from advisor.matcher import requirements
    from advisor.models import FactValue, Facts

    cause = kb.causes["trl-sft-token-accuracy-gather"].model_copy(update={"requires": {"framework_version": "==0.15.0"}})
    known = Facts(values={"framework_version": FactValue(value="0.15.0")})
    other = Facts(values={"framework_version": FactValue(value="0.16.1")})
    assert requirements(cause, known) == []
    assert requirements(cause, other) is None
    assert requirements(cause, Facts()) == ["framework_version"]


def test_a_question_that_presumes_a_lost_peer_waits_for_one(kb):
    from advisor.models import FactValue, Facts
    from advisor.questions import _makes_sense

    question = kb.questions["peer_fate"]
    assert question.ask_when == {"peer_lost": True}
    assert not _makes_sense(question, Facts())
    assert _makes_sense(question, Facts(values={"peer_lost": FactValue(value=True)}))
    assert all(q.id != "peer_fate" for q in run(MISMATCH).questions)


def test_captured_values_are_held_to_their_fact():
    from advisor.facts import captured_value as _captured

    assert _captured("nccl_version", "2.21.5") == "2.21.5"
    assert _captured("nccl_version", "2." + "9" * 5000) is None
    assert _captured("world_size", "8") == 8
    assert _captured("world_size", "eight") is None
    assert _captured("world_size", "9" * 5000) is None
    assert _captured("backend", "gloo") == "gloo" and _captured("backend", "mpi") is None


def test_an_answer_never_lets_a_cause_with_an_unknown_requirement_win():
    """Open-R1 save log: answering the advisor's own packing question with "no" while the TRL version
    is unknown must not promote TRL 0.15.0's gather bug over the save (issue 10)."""
    from helpers import scenario

    log = scenario("openr1-save-allgather")["log"]
    before = run(log)
    assert before.causes[0].code == "checkpoint-save-straggler"
    after = run(log, framework="open-r1", packing="no")
    assert after.causes[0].code == "checkpoint-save-straggler" and after.status != "diagnosed"
    bug = next(c for c in after.causes if c.id == "trl-sft-token-accuracy-gather")
    assert bug.unconfirmed == ["trl_version", "trl_trainer"] and bug.score < after.causes[0].score
    sft = run(log, framework="open-r1", packing="no", trl_trainer="sft")
    assert sft.causes[0].code == "checkpoint-save-straggler" and sft.status != "diagnosed"
    assert sft.questions[0].id == "trl_version"  # the answer that decides it is asked first
    confirmed = run(log, framework="open-r1", packing="no", trl_trainer="sft", trl_version="0.15.0")
    assert confirmed.causes[0].id == "trl-sft-token-accuracy-gather" and confirmed.status == "diagnosed"
    ruled_out = run(log, framework="open-r1", packing="no", trl_version="0.16.0")
    assert all(c.id != "trl-sft-token-accuracy-gather" for c in ruled_out.causes)


SAVE_FRAMES = """\
  File "/opt/venv/lib/python3.11/site-packages/transformers/trainer.py", line 2210, in _inner_training_loop
    self._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, epoch)
  File "/opt/venv/lib/python3.11/site-packages/transformers/trainer.py", line 2701, in _maybe_log_save_evaluate
    self._save_checkpoint(model, trial)
  File "/opt/venv/lib/python3.11/site-packages/transformers/trainer.py", line 2790, in _save_checkpoint
    self.save_model(output_dir, _internal_call=True)
"""
SAVE_TIMEOUT = ("[rank1]:[E1103 10:02:11.000000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
                "timeout: WorkNCCL(SeqNum=880, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
                "600046 milliseconds before timing out.\n")


def test_a_straggler_story_needs_someone_seen_waiting(kb):
    """A save-path traceback alone says the save failed or was cut off, not that the others timed out
    waiting for it: the save straggler may lead but is not the verdict until a wait is in the log."""
    alone = run(SAVE_FRAMES)
    assert alone.causes[0].code == "checkpoint-save-straggler"
    assert alone.status != "diagnosed"
    assert alone.facts.get("no_error_lines") is not True  # frames without their header are a traceback, not silence
    waited = run(SAVE_FRAMES + SAVE_TIMEOUT)
    assert waited.causes[0].code == "checkpoint-save-straggler" and waited.status == "diagnosed"


def test_straggler_causes_declare_that_they_need_a_wait(kb):
    """The causes whose story is ranks waiting for a slow one carry needs_wait (the verdict gate reads it)."""
    waiting = {c.id for c in kb.causes.values() if c.needs_wait}
    assert {"save-checkpoint-timeout", "eval-on-some-ranks", "rank0-logging-io", "collective-slower-than-timeout"} <= waiting
    assert not any(kb.causes[i].benign for i in waiting)


def test_crash_reports_name_their_signal():
    """UCX's "Caught signal N (...)" and the shell's "(core dumped)" lines are a process dying of a
    signal; a bus error points at /dev/shm, a segfault is not a kill from outside."""
    frames = "==== backtrace (tid:    381) ====\n 2 0x0000000000068d6c ncclGroupEnd()  ???:0\n"
    bus = run("[gpu-07:1    :0:381] Caught signal 7 (Bus error: nonexistent physical address)\n" + frames)
    assert bus.facts["signal"] == "SIGBUS" and bus.facts["first_failure"] == "killed"
    assert bus.causes[0].code == "shm-exhausted"
    seg = run("[gpu-07:1    :0:381] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x8)\n" + frames)
    assert seg.facts["signal"] == "SIGSEGV" and seg.status == "no-match"
    assert run("Bus error (core dumped)\n").facts["signal"] == "SIGBUS"


def test_a_save_on_one_rank_is_told_from_a_slow_save_by_one_answer():
    """After training ended, rank 0 alone waits in a one-element all-reduce while saving: a guarded
    save (its barrier) or a slow write. The advisor asks, and the answer decides."""
    log = "`Trainer.fit` stopped: `max_epochs=20` reached.\nsaving final checkpoint to final.ckpt\n" + SAVE_TIMEOUT.replace("Rank 1", "Rank 0").replace("rank1", "rank0")
    d = run(log)
    assert d.facts["training_finished"] is True and d.facts["phase"] == "save"
    assert "save_on_one_rank" in [q.id for q in d.questions]
    guarded = run(log, save_on_one_rank="yes")
    assert guarded.causes[0].id == "save-called-on-one-rank" and guarded.causes[0].code == "collective-mismatch"
    everywhere = run(log, save_on_one_rank="no", storage="network-fs")
    assert everywhere.causes[0].code == "checkpoint-save-straggler"


PEER_CLOSED = ("[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
               "closed by peer [127.0.0.1]:17280. This is typically caused by a remote worker crashing.\n")
SUMMARY = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
{others}
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-23_22:15:43
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 20046)
============================================================
"""
OTHER_KILLED = """\
[1]:
  time      : 2026-11-23_22:15:43
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 20047)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 20047"""


def test_a_peer_that_left_no_failure_had_finished():
    """torchrun lists no other failed worker while a rank lost its peer: the peer exited cleanly
    (uneven inputs), which a crashed or killed peer would not."""
    finished = run(PEER_CLOSED + SUMMARY.format(others="  <NO_OTHER_FAILURES>"))
    assert finished.facts["peer_fate"] == "finished" and finished.fact_sources["peer_fate"].origin == "inferred"
    assert finished.causes[0].code == "uneven-inputs"
    killed = run(PEER_CLOSED + SUMMARY.format(others=OTHER_KILLED))
    assert "peer_fate" not in killed.facts
    assert killed.causes[0].code != "uneven-inputs"
    two_nodes = run(PEER_CLOSED + SUMMARY.format(others="  <NO_OTHER_FAILURES>"), nodes="2")
    assert two_nodes.facts.get("peer_fate") != "finished"  # the other node's ranks are not in this summary


OTHER_STOPPED = """\
[1]:
  time      : 2026-11-23_22:15:43
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -15 (pid: 20047)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 20047"""
AGENT_STOPS = ("W1128 14:48:02.191000 5041 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 20047 "
               "closing signal SIGTERM\n")


def test_a_peer_the_agent_stopped_after_the_failure_had_finished():
    """The peer is listed as failed, but only with the SIGTERM torchrun sent it after rank 0 failed:
    it was alive with its connections closed, as a rank that left the group at the end of its loop
    is. A SIGTERM the agent did not send, or a peer that raised first, is no such evidence."""
    stopped = run(PEER_CLOSED + AGENT_STOPS + SUMMARY.format(others=OTHER_STOPPED))
    assert stopped.facts["others_stopped_by_agent"] is True
    assert stopped.facts["peer_fate"] == "finished" and stopped.causes[0].code == "uneven-inputs"
    outside = run(PEER_CLOSED + SUMMARY.format(others=OTHER_STOPPED))  # SIGTERM from elsewhere (a scheduler)
    assert "others_stopped_by_agent" not in outside.facts and "peer_fate" not in outside.facts
    killed = run(PEER_CLOSED + AGENT_STOPS.replace("20047", "20048") + SUMMARY.format(others=OTHER_STOPPED))
    assert "peer_fate" not in killed.facts  # the agent signalled another process
    raised = run("[rank1]: ValueError: labels contain NaN\n" + PEER_CLOSED + AGENT_STOPS
                 + SUMMARY.format(others=OTHER_STOPPED))
    assert raised.facts.get("peer_fate") != "finished"  # a rank failed with its own error first
    root_elsewhere = run(PEER_CLOSED + AGENT_STOPS + SUMMARY.format(others=OTHER_STOPPED).replace(
        "rank      : 0 (local_rank: 0)", "rank      : 2 (local_rank: 2)"))
    assert "others_stopped_by_agent" not in root_elsewhere.facts  # the summary's first failure is not the rank that lost its peer


def test_the_rendezvous_errors_are_machinery_not_the_application():
    """RendezvousTimeoutError (raised without a message) says the nodes did not all join: torch's
    machinery, so it is not an application exception on a rank."""
    d = run("Traceback (most recent call last):\n"
            '  File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py", line 680, in run\n'
            "    raise RendezvousTimeoutError\n"
            "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n")
    assert "user_exception" not in d.facts
    assert d.causes[0].code in ("slow-startup-skew", "rendezvous-unreachable", "rank-world-size-misconfig")


STORE_WAIT = "torch.distributed.DistStoreError: wait timeout after 15000ms, keys: /default_pg/0//cpu//0/2\n"


def test_the_answered_world_holds_the_awaited_rank_or_not():
    """1 node x 2 GPUs is a world of 2: a store waiting for rank 2's key waits for a rank the
    launcher never started, which points at mismatched sizes, not at a late rank."""
    small = run(STORE_WAIT, nodes="1", gpus_per_node="2")
    assert small.facts["world_size"] == 2 and small.facts["rank_outside_world"] is True
    assert small.causes[0].code == "rank-world-size-misconfig"
    big = run(STORE_WAIT, nodes="2", gpus_per_node="2")
    assert "rank_outside_world" not in big.facts
    assert big.causes[0].code != "rank-world-size-misconfig" or big.causes[0].score < small.causes[0].score


def test_lightning_validation_epoch_end_is_evaluation():
    """Lightning's logger connector has an on_epoch_end called at the end of validation too: a
    traceback through the sanity check or the evaluation epoch end is the eval phase."""
    frames = "".join(f'[rank1]:   File "/venv/lib/python3.11/site-packages/lightning/pytorch/{f}\n' for f in (
        'trainer/trainer.py", line 1150, in _run_sanity_check',
        'loops/evaluation_loop.py", line 381, in _on_evaluation_epoch_end',
        'trainer/connectors/logger_connector/logger_connector.py", line 205, in on_epoch_end',
    ))
    d = run("[rank1]: Traceback (most recent call last):\n" + frames +
            "[rank1]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 40000ms for recv operation to complete\n")
    assert d.facts["phase"] == "eval"
    hf = run('  File "/venv/lib/python3.11/site-packages/transformers/trainer_callback.py", line 480, in on_epoch_end\n' + SAVE_TIMEOUT)
    assert hf.facts["phase"] == "end-of-epoch"


def _gloo_timeout(rank: int, frames: list[str]) -> str:
    body = "".join(f'[rank{rank}]:   File "/venv/lib/python3.11/site-packages/{f}\n' for f in frames)
    return (f"[rank{rank}]: Traceback (most recent call last):\n{body}[rank{rank}]: RuntimeError: [/pytorch/third_party/gloo/"
            "gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 40000ms for recv operation to complete\n")


def test_every_rank_waiting_in_different_calls_is_a_mismatch_not_a_straggler():
    """Both ranks of a 2-rank world time out, rank 0 in a barrier and rank 1 in backward (DDP's
    gradient all-reduce): no rank was busy elsewhere, they wait in different collectives."""
    world = "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\nInitializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2\n"
    log = world + _gloo_timeout(0, ['torch/distributed/distributed_c10d.py", line 5356, in barrier']) + _gloo_timeout(
        1, ['torch/_tensor.py", line 623, in backward', 'torch/autograd/graph.py", line 979, in _engine_run_backward'])
    d = run(log)
    assert d.facts["every_rank_timed_out"] is True
    assert d.facts["waiting_ops"] == {"0": "barrier", "1": "all_reduce"}
    assert d.causes[0].code == "collective-mismatch"
    one = run(world + _gloo_timeout(1, ['torch/distributed/distributed_c10d.py", line 5356, in barrier']))
    assert "every_rank_timed_out" not in one.facts  # rank 0 said nothing: it may have been busy


def test_an_answer_the_user_could_not_give_cannot_be_what_the_verdict_assumes():
    """Open-R1 save log with the storage answered: the save straggler leads. Saying "unknown" to the
    TRL version leaves TRL 0.15.0's gather bug able to overtake it, so the lead is stated as likely,
    with a note naming the answer that would settle it; a version that rules the bug out restores the
    verdict."""
    from helpers import scenario

    log = scenario("openr1-save-allgather")["log"]
    unknown = run(log, framework="open-r1", storage="network-fs", trl_version="unknown")
    assert unknown.causes[0].code == "checkpoint-save-straggler" and unknown.status == "uncertain"
    note = next(n for n in unknown.notices if n.kind == "input")
    assert "trl_version" in note.title and "TRL 0.15.0" in note.title
    assert "trl_version" in render_text(unknown)
    known = run(log, framework="open-r1", storage="network-fs", trl_version="0.16.0")
    assert known.causes[0].code == "checkpoint-save-straggler" and known.status == "diagnosed"
    assert not [n for n in known.notices if n.kind == "input"]
    # an unknown answer that no rival's rule reads changes nothing
    other = run(log, framework="open-r1", storage="network-fs", trl_version="0.16.0", container="unknown")
    assert other.status == "diagnosed"


def test_the_world_is_asked_when_the_store_waits_for_a_rank():
    """torchrun started 2 ranks, the script told init_process_group 4: the store waits for rank 2.
    Whether rank 2 can exist is nodes x GPUs per node, so both are asked; the answer settles it."""
    from pathlib import Path

    log = (Path(__file__).resolve().parents[1] / "kb" / "recorded" / "wrong-world-size--torchrun.log").read_text(encoding="utf-8")
    asked = run(log)
    assert asked.facts["awaited_rank"] == 2 and "world_size" not in asked.facts
    reasons = {q.id: q.reason for q in asked.questions}
    assert {"nodes", "gpus_per_node"} <= set(reasons) and "rank 2" in reasons["nodes"]
    small = run(log, nodes="1", gpus_per_node="2")
    assert small.facts["rank_outside_world"] is True and small.causes[0].code == "rank-world-size-misconfig"
    big = run(log, nodes="2", gpus_per_node="2")
    assert "rank_outside_world" not in big.facts
    assert not {"nodes", "gpus_per_node"} & {q.id for q in big.questions}


CLIENTS_JOINED = "torch.distributed.DistStoreError: Timed out after 21 seconds waiting for clients. 1/2 clients joined.\n"


def test_clients_joined_against_what_was_started():
    """The store waited for 2 and 1 came (torchrun's static rendezvous, recorded with a node left
    out). Nodes x GPUs per node are asked; 2 nodes of 1 GPU is the store's world, so the sizes agree
    and the other node did not arrive; 1 node of 1 GPU is half the store's world: the sizes disagree."""
    asked = run(CLIENTS_JOINED)
    assert asked.facts["world_size"] == 2 and "world_as_launched" not in asked.facts
    reasons = {q.id: q.reason for q in asked.questions}
    assert {"nodes", "gpus_per_node"} <= set(reasons) and "1 joined" in reasons["nodes"]
    agree = run(CLIENTS_JOINED, nodes="2", gpus_per_node="1")
    assert agree.facts["world_as_launched"] is True
    assert agree.causes[0].code == "rendezvous-unreachable" and agree.status != "diagnosed"
    assert not {"nodes", "gpus_per_node"} & {q.id for q in agree.questions}
    short = run(CLIENTS_JOINED, nodes="1", gpus_per_node="1")
    assert short.facts["world_as_launched"] is False
    assert short.causes[0].code == "rank-world-size-misconfig" and short.status == "diagnosed"


def test_the_store_counts_agents_or_ranks():
    """torchrun's agents meet in a store of one client per node, init_process_group's in one of
    every rank: both agree with 2 nodes x 4 GPUs; a world between the two says nothing."""
    for world in (2, 8):
        d = run(CLIENTS_JOINED.replace("1/2", f"1/{world}"), nodes="2", gpus_per_node="4")
        assert d.facts["world_as_launched"] is True, world
    assert "world_as_launched" not in run(CLIENTS_JOINED.replace("1/2", "1/4"), nodes="2", gpus_per_node="4").facts
    assert run(CLIENTS_JOINED.replace("1/2", "1/16"), nodes="2", gpus_per_node="4").facts["world_as_launched"] is False


def test_a_bare_watchdog_timeout_lists_a_collective_mismatch_among_the_first_three():
    """ProcessGroupNCCL's own timeout text (torch >= 2.3) names the incorrect use of collectives as
    the most likely cause: a lone watchdog line, with nothing else to go on, lists it in the first three."""
    line = ("[E ProcessGroupNCCL.cpp:737] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3738, "
            "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1809440 milliseconds before timing out.\n")
    d = run(line)
    assert "collective-mismatch" in [c.code for c in d.causes[:3]] and d.status != "diagnosed"


def test_more_nodes_make_a_version_mismatch_between_them_likelier():
    """NCCL reading another release's bootstrap records yields an address of family 0: on several
    nodes (different images) that is likelier than on one."""
    line = "ncclSocketInit: connecting to address with family 0 is neither AF_INET(2) nor AF_INET6(10)\n"

    def score(**answers):
        return next(c.raw_score for c in run(line, **answers).causes if c.code == "version-mismatch")

    assert score(nodes="4") > score(nodes="1")


LOST_PEER = ("Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n"
             "[rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error "
             "[127.0.0.1]:2435: Connection reset by peer. This is typically caused by a remote worker hanging or bugs in "
             "the application. Check the logs of the remote worker before reporting an error. GLHF!\n")
PEER_TRACEBACK = ("[rank1]: Traceback (most recent call last):\n"
                  '[rank1]:   File "/tmp/train.py", line 40, in <module>\n'
                  "[rank1]: ValueError: bad sample 17\n")


def test_a_lost_peer_that_printed_nothing_died_without_a_traceback():
    """Rank 0 lost its peer in a world of 2, and rank 1 printed no `[rank1]:` line: it was killed
    (or finished) rather than raising, which would have printed its traceback. When rank 1's
    traceback is there, the peer is not silent and its exception leads."""
    silent = run(LOST_PEER)
    assert silent.facts["peer_silent"] is True
    assert silent.causes[0].code == "host-oom-or-killed" and silent.status != "diagnosed"
    spoke = run(LOST_PEER + PEER_TRACEBACK)
    assert "peer_silent" not in spoke.facts and spoke.causes[0].code == "rank-exception"
    unprefixed = run(LOST_PEER.replace("[rank0]: ", ""))
    assert "peer_silent" not in unprefixed.facts  # no rank prefixes: nothing says who printed what


def test_on_several_nodes_a_silent_peer_may_be_in_another_log():
    one = run(LOST_PEER, nodes="1")
    two = run(LOST_PEER, nodes="2")

    def killed(d):
        return next(c.raw_score for c in d.causes if c.code == "host-oom-or-killed")

    assert killed(two) < killed(one)


def test_the_store_host_closing_the_connection_means_a_peer_died_in_every_wording():
    """Rank 0 (or the agent) hosting the TCPStore went away: torch >= 2.8 says so in words (printed
    by torch 2.13 when the store's process was SIGKILLed), 2.5-2.7 say "failed to recv, got 0 bytes"
    (wheel strings), older releases report ECONNRESET's text. Each is a lost peer, and how it died is
    asked; the answer decides."""
    wordings = [
        "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?\n",
        "torch.distributed.DistBackendError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d "
        "key-value store by key '0', but store->get('0') got error: failed to recv, got 0 bytes\n",
        "torch.distributed.DistNetworkError: Connection reset by peer\n",
    ]
    for line in wordings:
        d = run(line)
        assert d.facts.get("peer_lost") is True, line
        assert "peer_fate" in {q.id for q in d.questions}, line
    killed = run(wordings[0], peer_fate="killed")
    assert killed.causes[0].code == "host-oom-or-killed"
    assert run("RuntimeError: Connection reset by peer while reading the dataset from S3\n").facts.get("peer_lost") is None


FIRST_TIMEOUT = ("[E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
                 "OpType=ALLGATHER, Timeout(ms)=1800000) ran for 1802965 milliseconds before timing out.\n")
CUT_TRACEBACK = ("Traceback (most recent call last):\n"
                 '  File "/work/train.py", line 750, in fit\n'
                 "    prepared = accelerator.prepare(model, optimizer)\n"
                 '  File "/venv/lib/python3.9/site-packages/accelerate/accelerator.py", line 1284, in prepare\n'
                 "    result = tuple(\n")


def test_a_cut_off_traceback_after_a_timeout_is_where_a_rank_waited_not_its_error():
    """The watchdog fired, then a traceback cut before its exception line shows the rank inside the
    framework's prepare(): that is where it waited in the collective, not an error of the framework.
    The same cut-off traceback with no timeout before it still counts as the failure."""
    after = run(FIRST_TIMEOUT + CUT_TRACEBACK)
    assert "user_exception" not in after.facts and "exception_in_framework" not in after.facts
    assert after.causes[0].code not in ("framework-version-bug", "rank-exception")
    for log in (CUT_TRACEBACK, CUT_TRACEBACK + FIRST_TIMEOUT):  # alone, or printed before the timeout
        first = run(log)
        assert first.facts["user_exception"].startswith("traceback without its final line")
        assert first.facts["exception_in_framework"] is True


def test_the_first_collective_of_a_group_timing_out_points_to_peer_to_peer_too():
    def p2p(line):
        return next((c.raw_score for c in run(line).causes if c.code == "p2p-topology-issue"), float("-inf"))

    first = p2p(FIRST_TIMEOUT)
    assert first > float("-inf") and first > p2p(FIRST_TIMEOUT.replace("SeqNum=1,", "SeqNum=4210,"))


STORE_SETUP = (
    '  File "/env/lib/python3.7/site-packages/torch/distributed/distributed_c10d.py", line 423, in init_process_group\n'
    "    store, rank, world_size = next(rendezvous_iterator)\n"
    '  File "/env/lib/python3.7/site-packages/torch/distributed/rendezvous.py", line 133, in _tcp_rendezvous_handler\n'
    "    store = TCPStore(result.hostname, result.port, world_size, start_daemon, timeout)\n")


def test_a_traceback_through_the_store_s_creation_failed_before_any_process_group():
    """A traceback that runs through the rendezvous handler's TCPStore construction failed while the
    store was being created (the master binding its port) or reached (the others connecting): the
    heartbeat monitor, which only a process group has, cannot be the story. Frames elsewhere in
    torch.distributed say nothing about the store."""
    d = run(STORE_SETUP)
    assert d.facts["store_setup_failed"] is True
    top3 = [c.code for c in d.causes[:3]]
    assert {"port-in-use", "rendezvous-unreachable"} <= set(top3) and "heartbeat-monitor-kill" not in top3
    other = run(STORE_SETUP.replace("_tcp_rendezvous_handler", "_new_process_group_helper").replace("rendezvous.py", "distributed_c10d.py"))
    assert "store_setup_failed" not in other.facts


def test_no_heartbeat_monitor_before_torch_2_2():
    """ProcessGroupNCCL got its heartbeat monitor in torch 2.2: on an older torch it is no candidate."""
    log = "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2\n"

    def codes(version):
        return [c.code for c in diagnose(DiagnoseRequest(log=log, answers={"torch_version": version}, max_causes=50)).causes]

    old, new = codes("2.1.0"), codes("2.4.0")
    assert "heartbeat-monitor-kill" not in old and "heartbeat-monitor-kill" in new


def test_rank0_silent_under_torchrun_s_summary():
    """Only rank 1 timed out, and torchrun's summary (its agent's console holds every local rank's
    output) names rank 1: rank 0 exists and said nothing, as a rank busy elsewhere does. Without the
    summary, a paste of rank 1's lines alone says nothing about rank 0."""
    timeout = ("[rank1]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out "
               "waiting 15000ms for recv operation to complete\n")
    summary = ("Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-23_22:15:30\n  host      : node0\n"
               "  rank      : 1 (local_rank: 1)\n  exitcode  : 1 (pid: 4242)\n")
    assert run(timeout + summary).facts["rank0_silent"] is True
    assert "rank0_silent" not in run(timeout).facts


# A framework's own check raised at launch (accelerate 1.15 on torch 2.13, kb/recorded) and a bug-like
# exception in the same framework file: only the second reads as a framework fault.
FRAMEWORK_CHECK = """\
Traceback (most recent call last):
  File "/workspace/.venv/lib/python3.11/site-packages/accelerate/commands/launch.py", line 1391, in launch_command
    args, defaults, mp_from_config_flag = _validate_launch_command(args)
  File "/workspace/.venv/lib/python3.11/site-packages/accelerate/commands/launch.py", line 1209, in _validate_launch_command
    raise ValueError("You need to use at least 2 processes to use `--multi_gpu`.")
ValueError: You need to use at least 2 processes to use `--multi_gpu`.
"""
FRAMEWORK_BUG = FRAMEWORK_CHECK.replace(
    'raise ValueError("You need to use at least 2 processes to use `--multi_gpu`.")', "nproc = args.num_processes + None").replace(
    "ValueError: You need to use at least 2 processes to use `--multi_gpu`.", "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'")


def test_a_check_the_framework_raises_on_purpose_is_not_a_framework_bug():
    check = diagnose(DiagnoseRequest(log=FRAMEWORK_CHECK))
    assert check.facts["exception_in_framework"] is True and check.facts["exception_catalogued"] is True
    assert check.causes[0].id == "world-size-mismatch" and check.status == "diagnosed"
    bug = diagnose(DiagnoseRequest(log=FRAMEWORK_BUG))
    assert bug.facts["exception_catalogued"] is False
    assert bug.causes[0].id == "framework-internal-error"


# A DataLoader worker's exception that is a catalogued check (MapAllocator, torch 2.13, recorded by
# repro/ with a 1 MB /dev/shm) and one whose only reading is "this rank raised" (a device-side assert).
SHM_IN_WORKER = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/train.py", line 41, in <module>
[rank1]:     for batch in loader:
[rank1]: RuntimeError: Caught RuntimeError in DataLoader worker process 0.
[rank1]: Original Traceback (most recent call last):
[rank1]:   File "/opt/venv/lib/python3.11/site-packages/torch/utils/data/_utils/worker.py", line 349, in _worker_loop
[rank1]:     data = fetcher.fetch(index)
[rank1]: RuntimeError: unable to allocate shared memory(shm) for file </torch_4242_3197502207_0>: Resource temporarily unavailable (11)
[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:48291
"""
ASSERT_ON_RANK = SHM_IN_WORKER.replace(
    "unable to allocate shared memory(shm) for file </torch_4242_3197502207_0>: Resource temporarily unavailable (11)",
    "CUDA error: device-side assert triggered")


def test_an_exception_whose_message_names_another_cause_is_not_read_as_the_rank_failing():
    shm = diagnose(DiagnoseRequest(log=SHM_IN_WORKER, max_causes=10))
    assert shm.facts["exception_catalogued"] is True
    assert shm.causes[0].id == "dev-shm-too-small" and shm.status == "diagnosed"
    rank = next(c for c in shm.causes if c.id == "python-exception-on-rank")
    assert any(f["fact"] == "exception_catalogued" and f["weight"] < 0 for f in rank.evidence["facts"])
    # a message that points only to "this rank raised" leaves the exception the answer
    assert_ = diagnose(DiagnoseRequest(log=ASSERT_ON_RANK, max_causes=10))
    assert assert_.facts["exception_catalogued"] is False
    assert assert_.causes[0].id == "python-exception-on-rank"


# Lightning 2.x on one node (lightning/fabric/utilities/distributed.py's banner): every rank
# registered, then silence while NCCL sets up its first communicator
REGISTERED_THEN_QUIET = """\
Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4
Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/4
Initializing distributed: GLOBAL_RANK: 2, MEMBER: 3/4
Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/4
----------------------------------------------------------------------------------------------------
distributed_backend=nccl
All distributed processes registered. Starting with 4 processes
----------------------------------------------------------------------------------------------------
"""
# two nodes given the same node rank: four processes claim ranks 0 and 1, and the count still fills
SAME_RANKS_REGISTERED = REGISTERED_THEN_QUIET.replace("GLOBAL_RANK: 3, MEMBER: 4/4", "GLOBAL_RANK: 1, MEMBER: 2/4").replace(
    "GLOBAL_RANK: 2, MEMBER: 3/4", "GLOBAL_RANK: 0, MEMBER: 1/4")


def test_every_rank_registered_says_the_world_size_was_right():
    quiet = diagnose(DiagnoseRequest(log=REGISTERED_THEN_QUIET, max_causes=10))
    assert quiet.facts["world_joined"] is True
    assert "world-size-mismatch" not in [c.id for c in quiet.causes[:3]]
    # duplicate global ranks fill the count too: then registering proves nothing
    dup = diagnose(DiagnoseRequest(log=SAME_RANKS_REGISTERED, max_causes=10))
    assert dup.facts["world_joined"] is True and dup.facts.get("duplicate_ranks")
    assert dup.causes[0].id == "world-size-mismatch"


# An excerpt of one node's NCCL lines (ranks 5-7 of 8, GPUs 1-3): the hosts and GPUs it shows are a
# lower bound of what was started, not a count of it
ONE_NODE_EXCERPT = """\
node-b:27377:27554 [1] NCCL INFO comm 0x7f6764444df0 rank 5 nranks 8 cudaDev 1 busId 1b000 - Init START
node-b:27378:27555 [2] NCCL INFO comm 0x7f44fc446140 rank 6 nranks 8 cudaDev 2 busId 3d000 - Init START
node-b:27379:27549 [3] NCCL INFO comm 0x7f334840d830 rank 7 nranks 8 cudaDev 3 busId 3e000 - Init START
"""


def test_hosts_and_gpus_an_excerpt_shows_do_not_say_the_sizes_disagree():
    d = diagnose(DiagnoseRequest(log=ONE_NODE_EXCERPT, max_causes=10))
    assert d.facts["world_size"] == 8 and d.facts["nodes"] == 1 and d.facts["gpus_per_node"] == 3
    assert "world_as_launched" not in d.facts
    assert d.causes[0].id != "world-size-mismatch"
    # what the user says was started does decide it
    assert diagnose(DiagnoseRequest(log=ONE_NODE_EXCERPT, answers={"nodes": "2", "gpus_per_node": "4"})).facts["world_as_launched"] is True
    assert diagnose(DiagnoseRequest(log=ONE_NODE_EXCERPT, answers={"nodes": "1", "gpus_per_node": "4"})).facts["world_as_launched"] is False


# A traceback whose exception line was lost in the paste, and torchrun's own entry point cut off the
# same way (the agent's traceback: bin/torchrun, line 8, in <module>)
CUT_OFF = """\
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/train.py", line 40, in <module>
[rank1]:     loss = step(batch)
[rank1]:   File "/work/train.py", line 22, in step
[rank1]:     out = model(batch["input_ids"])
E1123 22:13:34.292000 18141 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 18149) of binary: /workspace/.venv/bin/python3
"""
AGENT_CUT_OFF = """\
I0213 12:07:20.087000 870572 torch/distributed/elastic/agent/server/api.py:677] [default] Rendezvous'ing worker group
Traceback (most recent call last):
  File "/home/u/.venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
"""


def test_a_cut_off_traceback_is_a_lead_not_a_diagnosis():
    d = diagnose(DiagnoseRequest(log=CUT_OFF))
    assert d.facts["exception_cut_off"] is True and d.facts["exception_module"] == "user"
    assert d.causes[0].id == "python-exception-on-rank" and d.status != "diagnosed"
    # the launcher's own entry point is not the user's code: nothing says a rank raised
    agent = diagnose(DiagnoseRequest(log=AGENT_CUT_OFF, max_causes=10))
    assert "user_exception" not in agent.facts and "exception_cut_off" not in agent.facts
    assert agent.status == "no-match"


def test_launchers_console_scripts_are_not_user_code():
    from advisor.facts import frame_owner

    assert frame_owner("/home/u/.venv/bin/torchrun") == "torch"
    assert frame_owner("/opt/conda/bin/accelerate") == "accelerate"
    assert frame_owner("/usr/local/bin/deepspeed") == "deepspeed"
    assert frame_owner("/home/u/.venv/bin/llamafactory-cli") == "llama-factory"
    assert frame_owner("/home/u/bin/train.py") is None  # a user's script in a bin/ folder stays the user's
    assert frame_owner("/home/u/project/torchrun") is None


def _barrier_line(key: str, field: str) -> str:
    # distributed_c10d.py's _store_based_barrier: torch <= 2.0 prints worker_count=, torch >= 2.1 num_workers_joined=
    return (f"Timed out initializing process group in store based barrier on rank: 3, for key: store_based_barrier_key:{key} "
            f"(world_size=8, {field}=7, timeout=0:30:00)\n")


def test_a_later_groups_barrier_says_the_world_size_was_right(kb):
    cases = {("1", "worker_count"): False, ("2", "worker_count"): True,  # torch <= 2.0 numbers the default group 1
             ("0", "num_workers_joined"): False, ("1", "num_workers_joined"): True,  # torch >= 2.1 names it "0"
             ("5c3f9a0e21d4b7a8", "num_workers_joined"): True}  # a new_group keyed by its ranks' hash
    for (key, field), later in cases.items():
        d = diagnose(DiagnoseRequest(log=_barrier_line(key, field)), kb)
        assert d.facts.get("later_group_barrier") is later, (key, field)
    default = diagnose(DiagnoseRequest(log=_barrier_line("1", "worker_count")), kb)
    later = diagnose(DiagnoseRequest(log=_barrier_line("2", "worker_count")), kb)
    rank = {c.code: i for i, c in enumerate(later.causes)}
    assert rank["slow-startup-skew"] < rank.get("rank-world-size-misconfig", 99)
    world = {c.code: c.score for c in default.causes}
    assert world["rank-world-size-misconfig"] > next(c.score for c in later.causes if c.code == "rank-world-size-misconfig")


# the WARN's line and bootstrap.cc:701 fit releases on both sides of 2.27.3 (2.24.3-2.26.6, 2.28.3,
# 2.29.7): the trail leaves the version open (a longer trail would date it: tests/test_frames.py)
STRAY = """\
node0:5120:5120 [0] NCCL INFO Bootstrap : Using eth0:10.20.0.2<0>
node0:5120:5188 [0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer 10.20.0.9<51412>
node0:5120:5188 [0] NCCL INFO bootstrap.cc:701 -> 6
"""


def test_a_requirement_that_alone_keeps_the_best_supported_cause_down_is_asked():
    """The peer that closed NCCL's bootstrap connection was no rank (a scanner): the stray-connection
    bug of NCCL < 2.27.3 has the most evidence, but cannot win while the NCCL version is unknown, so
    the version is what the advisor asks; answering it settles the diagnosis either way."""
    held = run(STRAY, peer_fate="not-a-rank")
    bug = next(c for c in held.causes if c.id == "nccl-bootstrap-stray-connection")
    assert bug.unconfirmed == ["nccl_version"] and bug.held_back_score > held.causes[0].raw_score
    assert held.causes[0].id != bug.id
    assert held.questions[0].id == "nccl_version" and "would lead" in held.questions[0].reason
    old = run(STRAY, peer_fate="not-a-rank", nccl_version="2.26.2")
    assert old.causes[0].id == "nccl-bootstrap-stray-connection" and old.status == "diagnosed"
    fixed = run(STRAY, peer_fate="not-a-rank", nccl_version="2.27.5")
    assert all(c.id != "nccl-bootstrap-stray-connection" for c in fixed.causes)
    # near miss: the peer was a rank that raised; the bug is not held back by the version alone
    died = run(STRAY, peer_fate="exception")
    assert all(q.id != "nccl_version" or "would lead" not in q.reason for q in died.questions)


def test_the_original_exception_under_a_dataloader_wrapper_is_the_one_that_counts():
    """torch re-raises a worker's exception as "Caught X in DataLoader worker process N." with the
    original below it (torch/_utils.py ExceptionWrapper): the original says what failed. Printed by
    torch 2.13 with a 1 MB /dev/shm (repro shm-exhausted, kb/recorded)."""
    from pathlib import Path

    log = (Path(__file__).resolve().parents[1] / "kb" / "recorded" / "shm-exhausted--torchrun.log").read_text()
    d = run(log)
    assert d.facts["user_exception"].startswith("RuntimeError: unable to allocate shared memory(shm) for file")
    assert d.causes[0].code == "shm-exhausted"
    data_bug = (Path(__file__).resolve().parents[1] / "kb" / "recorded" / "dataloader-worker-error--torchrun.log").read_text()
    assert run(data_bug).facts["user_exception"].startswith("ValueError: sample 37: truncated record")


def _first_collective_timeout(op: str, frames: list[str]) -> str:
    tb = "".join(f'  File "{path}", line {line}, in {func}\n    pass\n' for path, line, func in
                 (f.split(":") for f in frames))
    return (f"[rank1]:[E1128 06:40:01.1 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum=1, OpType={op}, NumelIn=8, NumelOut=16, Timeout(ms)=600000) ran for 600047 milliseconds before timing out.\n"
            "Traceback (most recent call last):\n" + tb +
            "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1.\n")


WRAPPING = ["/w/train.py:40:main", "/venv/lib/python3.11/site-packages/accelerate/accelerator.py:1284:prepare",
            "/venv/lib/python3.11/site-packages/accelerate/accelerator.py:1512:prepare_model",
            "/venv/lib/python3.11/site-packages/torch/nn/parallel/distributed.py:827:__init__",
            "/venv/lib/python3.11/site-packages/torch/distributed/utils.py:288:_sync_module_states"]


def test_a_traceback_still_wrapping_the_model_is_start_up():
    """With no phase cue before the failure, a traceback through DDP's constructor or accelerate's
    prepare says the job never reached a training step."""
    d = run(_first_collective_timeout("BROADCAST", WRAPPING))
    assert d.facts["phase"] == "init"
    # near miss: the same traceback continuing into a training step is no longer start-up
    stepping = run(_first_collective_timeout("ALLREDUCE", ["/w/train.py:80:main", "/w/train.py:60:train_step"]))
    assert stepping.facts.get("phase") != "init"


def test_a_data_moving_first_collective_is_not_the_preprocessing_barrier():
    """main_process_first's wait is a barrier (a one-element all-reduce with NCCL): an all-gather
    or broadcast that never completes is not that wait."""
    def prep(op):
        d = run(_first_collective_timeout(op, WRAPPING[:1]))
        return next(c.raw_score for c in d.causes if c.id == "dataset-prep-on-main-rank")
    assert prep("ALLGATHER") < prep("ALLREDUCE") - 1.0


def test_a_rule_against_rare_collectives_is_no_evidence_for_an_all_reduce(kb):
    """op_family is skewed (most timeouts are all-reduces): it is not normalized over its values, so
    a rule against the other families leaves an all-reduce where it was."""
    from advisor.rules import normalized_fact

    assert not normalized_fact("op_family") and normalized_fact("phase")
    d = run(_first_collective_timeout("ALLREDUCE", WRAPPING[:1]))
    prep = next(c for c in d.causes if c.id == "dataset-prep-on-main-rank")
    assert all(e["fact"] != "op_family" for e in prep.evidence["facts"])


def test_the_first_collectives_come_before_any_save_evaluation_or_logging():
    """SeqNum 1 or 2 of a group precedes the first training step: the in-training stragglers lean away."""
    def scores(seq):
        log = (f"[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
               "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600047 milliseconds before timing out.\n")
        return {c.id: c.raw_score for c in run(log).causes}
    early, late = scores(1), scores(500)
    for cause in ("save-checkpoint-timeout", "eval-on-some-ranks", "rank0-logging-io"):
        assert early.get(cause, -99) < late[cause] - 0.5, cause


# --- NCCL says it will not use peer-to-peer ------------------------------------------------------

P2P_OFF = """\
host1:454:838 [0] NCCL INFO Using network Socket
host1:454:838 [0] NCCL INFO P2P is disabled between connected GPUs 1 and 0. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.
host1:454:838 [0] NCCL INFO P2P is disabled between connected GPUs 0 and 1. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.
host1:454:838 [0] NCCL INFO Could not enable P2P between dev 0(=1b000) and dev 1(=1c000)
"""


def test_p2p_that_nccl_turned_off_is_no_verdict_on_p2p():
    """The INFO lines say CUDA denies P2P and NCCL routes through host memory: a silent hang after
    them is not on P2P (whose fix, NCCL_P2P_DISABLE, would change nothing), and /dev/shm carries it."""
    d = run(P2P_OFF)
    assert d.facts["p2p_unavailable"] is True
    assert d.status != "diagnosed"
    ids = [c.id for c in d.causes]
    assert "dev-shm-too-small" in ids[:3]
    in_docker = run(P2P_OFF, container="docker")
    assert in_docker.causes[0].id == "dev-shm-too-small"


def test_p2p_down_between_nvlink_gpus_is_still_a_hardware_verdict():
    log = ("host1:454:838 [0] paths.cc:320 NCCL WARN P2P is disabled between NVLINK connected GPUs 1 and 0. This should "
           "not be the case given their connectivity, and is probably due to a hardware issue. If you still want to "
           "proceed, you can set NCCL_IGNORE_DISABLED_P2P=1.\n")
    d = run(log)
    assert d.causes[0].id == "pcie-p2p-broken"
