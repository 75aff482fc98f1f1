"""Version-bounded bugs: the NCCL version fact and question, and the version gates of the causes."""

from __future__ import annotations

import pytest

from advisor.diagnose import diagnose, read_log
from advisor.models import DiagnoseRequest

# bootstrap.cc:77 holds this WARN in 2.19.1-2.22.3: the version straddles the fix (2.21.5)
TRUNCATED = "compute-2:4827:6900 [4] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4\n"
# with the next step of its error trail: transport.cc:204 is a check (NCCLCHECKGOTO around
# bootstrapRecv) only in 2.17.1-2.18.x and 2.19.1-2.19.3, so the two lines date NCCL to 2.19.x
TRUNCATED_TRAIL = TRUNCATED + "compute-2:4827:6900 [4] NCCL INFO transport.cc:204 -> 3\n"
TIMEOUT = ("[rank3]:[E217 14:55:02.441 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=38, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800033 milliseconds before timing out.")


def run(kb, log: str, **answers):
    return diagnose(DiagnoseRequest(log=log, answers={k: str(v) for k, v in answers.items()}), kb)


def test_nccl_version_read_from_the_startup_line(kb):
    values = read_log(kb, "node1:4827:4827 [4] NCCL INFO NCCL version 2.19.3+cuda12.3\n").facts.values
    assert values["nccl_version"].value == "2.19.3" and values["cuda_version"].value == "12.3"


def test_nccl_version_is_a_guided_question(kb):
    question = kb.questions["nccl_version"]
    assert question.fact == "nccl_version" and question.kind == "version"


def test_nccl_bug_without_a_version_is_asked_not_diagnosed(kb):
    d = run(kb, TRUNCATED)
    ours = next(c for c in d.causes if c.id == "nccl-bootstrap-tag-reuse")
    assert ours in d.causes[:2] and ours.unconfirmed == ["nccl_version"]
    assert d.status != "diagnosed"
    assert d.questions[0].id == "nccl_version"


def test_nccl_bug_dated_by_its_error_trail_is_diagnosed(kb):
    d = run(kb, TRUNCATED_TRAIL)
    assert d.facts["nccl_version"] == ["2.19.1", "2.19.3"]
    assert d.causes[0].id == "nccl-bootstrap-tag-reuse" and not d.causes[0].unconfirmed
    assert "nccl_version" not in [q.id for q in d.questions]


def test_nccl_bug_diagnosed_only_on_the_releases_that_have_it(kb):
    assert run(kb, TRUNCATED, nccl_version="2.20.5").status == "diagnosed"
    assert run(kb, TRUNCATED, nccl_version="2.20.5").causes[0].id == "nccl-bootstrap-tag-reuse"
    for fixed in ("2.18.6", "2.21.5"):
        assert "nccl-bootstrap-tag-reuse" not in [c.id for c in run(kb, TRUNCATED, nccl_version=fixed).causes[:1]]


def test_a_plain_timeout_on_a_buggy_nccl_is_not_this_bug(kb):
    d = run(kb, "node1:1:1 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n" + TIMEOUT)
    assert d.causes[0].id != "nccl-bootstrap-tag-reuse" if d.causes else True


def test_version_bug_causes_require_their_version(kb):
    """Every version-bug cause added for transformers/NCCL is gated by `requires` on a version fact."""
    for cause_id, fact in [("transformers-checkpoint-rename-race", "transformers_version"),
                           ("transformers-staging-cleanup-race", "transformers_version"),
                           ("transformers-num-items-gather-cpu", "transformers_version"),
                           ("transformers-fsdp-adapter-save", "transformers_version"),
                           ("transformers-best-model-barrier", "transformers_version"),
                           ("nccl-bootstrap-tag-reuse", "nccl_version")]:
        cause = kb.causes[cause_id]
        assert cause.code == "framework-version-bug" and fact in cause.requires


def test_a_plain_timeout_after_training_needs_the_version(kb):
    log = ("Training completed. Do not forget to share your model on huggingface.co/models =)\n" + TIMEOUT)
    unknown = run(kb, log)
    assert unknown.causes[0].id != "transformers-best-model-barrier"
    assert run(kb, log, transformers_version="4.55.0").causes[0].id == "transformers-best-model-barrier"
    assert "transformers-best-model-barrier" not in [c.id for c in run(kb, log, transformers_version="4.57.0").causes]


# --- torchrun's agents closing the rendezvous (pytorch#67616, #123678, #147064) -----------------

RESTART_CLOSED = ("[default] Worker group FAILED. 3/3 attempts left; will restart worker group\n"
                  "[default] Rendezvous'ing worker group\n"
                  "torch.distributed.elastic.rendezvous.api.RendezvousClosedError\n")


def test_a_version_condition_may_list_several_ranges():
    from advisor.rules import condition_holds

    ranges = ["<1.11", ">=2.3,<2.8"]
    assert condition_holds("torch_version", "1.10.2", ranges) is True
    assert condition_holds("torch_version", "2.7.1", ranges) is True
    assert condition_holds("torch_version", "2.2.2", ranges) is False
    assert condition_holds("torch_version", "2.8.0", ranges) is False
    assert condition_holds("torch_version", None, ranges) is None
    # releases a traceback fits that straddle a bound stay undecided; all inside one range decide
    assert condition_holds("torch_version", ["2.2.0", "2.3.0"], ranges) is None
    assert condition_holds("torch_version", ["2.4.0", "2.5.1"], ranges) is True


def test_the_agents_restart_sets_its_fact(kb):
    assert read_log(kb, RESTART_CLOSED).facts.values["worker_group_restarted"].value is True
    new_nodes = "[default] Detected 1 new nodes from group_rank=0; will restart worker group\n"
    assert read_log(kb, new_nodes).facts.values["worker_group_restarted"].value is True


@pytest.mark.parametrize("line", ["Received 15 death signal, shutting down workers",
                                  "Received Signals.SIGTERM death signal, shutting down workers"])
def test_the_agents_death_signal_reads_on_every_python(kb, line):
    """`%s` of the signal enum prints the number from Python 3.11 and `Signals.SIGTERM` before."""
    assert "elastic-agent.death-signal" in read_log(kb, line + "\n").signatures.messages


def test_restart_into_a_closed_rendezvous_is_the_bug_on_its_releases(kb):
    for version in ("2.3.1", "2.7.1", "1.10.2"):
        d = run(kb, RESTART_CLOSED, torch_version=version)
        assert d.causes[0].id == "elastic-agent-closes-rendezvous" and d.status == "diagnosed", version
    for version in ("2.2.2", "2.8.0", "1.13.1"):
        d = run(kb, RESTART_CLOSED, torch_version=version)
        assert "elastic-agent-closes-rendezvous" not in [c.id for c in d.causes], version


def test_restart_into_a_closed_rendezvous_asks_the_torch_version(kb):
    d = run(kb, RESTART_CLOSED)
    top = d.causes[0]
    assert top.id == "elastic-agent-closes-rendezvous" and top.unconfirmed == ["torch_version"]
    assert d.status != "diagnosed" and d.questions[0].id == "torch_version"
    # the confidence a lead gets before its deciding answer says so where it is shown
    from advisor.render import render_markdown, render_text

    assert "unconfirmed until you answer torch_version" in render_text(d).splitlines()[1]
    assert "unconfirmed until you answer torch_version" in render_markdown(d)
    confirmed = run(kb, RESTART_CLOSED, torch_version="2.3.1")
    assert "unconfirmed" not in render_text(confirmed).splitlines()[1]


# --- NCCL's RAS thread (NVIDIA/nccl#1669, #1762, #1996) ------------------------------------------

RAS_CRASH = ("node1:405884:407462 [0] NCCL INFO NCCL version 2.26.2+cuda12.8\n"
             "node1:405884:407462 [0] NCCL INFO RAS client listening socket at ::1<28028>\n"
             "[node1:405884] *** Process received signal ***\n"
             "[node1:405884] Signal: Segmentation fault (11)\n")


def test_the_ras_line_says_ras_runs(kb):
    assert read_log(kb, RAS_CRASH).facts.values["nccl_ras_addr"].value == "::1<28028>"


def test_a_crash_with_ras_running_asks_whether_ras_was_queried(kb):
    d = run(kb, RAS_CRASH)
    assert d.causes[0].id == "nccl-ras-crash" and d.status != "diagnosed"
    assert "ras_queried" in [q.id for q in d.questions]


def test_a_crash_while_ras_was_queried_is_the_bug_on_its_releases(kb):
    assert run(kb, RAS_CRASH, ras_queried="yes").causes[0].id == "nccl-ras-crash"
    assert run(kb, RAS_CRASH, ras_queried="yes").status == "diagnosed"
    assert run(kb, RAS_CRASH, ras_queried="no").causes[0].id != "nccl-ras-crash"
    older = RAS_CRASH.replace("2.26.2", "2.23.4")  # no RAS before 2.24 (a contradiction the version settles)
    assert "nccl-ras-crash" not in [c.id for c in run(kb, older, ras_queried="yes").causes]


def test_the_ras_question_needs_ras_in_the_log(kb):
    d = run(kb, "[node1:405884] *** Process received signal ***\n[node1:405884] Signal: Segmentation fault (11)\n")
    assert "ras_queried" not in [q.id for q in d.questions]


def test_a_version_inside_a_bugs_range_is_no_evidence_for_it(kb):
    """NCCL 2.24-2.26 has the NIC-fusion fallback bug, but a log of those releases without its
    message must not rank it (the version only rules a bug out)."""
    d = run(kb, "node1:1:1 [0] NCCL INFO NCCL version 2.26.2+cuda12.8\n" + TIMEOUT)
    assert "nccl-net-fusion-fallback" not in [c.id for c in d.causes]


UDS_IN_USE = ("node7:41:10589 [2] misc/ipcsocket.cc:57 NCCL WARN UDS: Binding to socket /tmp/nccl-socket-2-5f3e9a0c77d1b204 "
              "failed : Address already in use (98)\n"
              "node7:41:10589 [2] NCCL INFO proxy.cc:1697 -> 2\n")


def test_an_in_use_uds_socket_is_no_tcp_port(kb):
    """EADDRINUSE on NCCL's UNIX-domain socket (an abstract name per rank and hash) says two
    communicators picked the same name, not that the store's port is taken: the port signature's
    `unless` keeps it off that line."""
    d = run(kb, UDS_IN_USE)
    assert d.causes[0].id == "nccl-uds-socket-collision"
    assert "master-port-in-use" not in [c.id for c in d.causes]
    older = run(kb, UDS_IN_USE.replace("Address already in use (98)", "98"))  # 2.17.1-2.18.6 print the errno alone
    assert older.causes[0].id == "nccl-uds-socket-collision"
    port = run(kb, "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
                   "port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use\n")
    assert port.causes[0].id == "master-port-in-use" and "nccl-uds-socket-collision" not in [c.id for c in port.causes]


def test_the_uds_collision_weighs_its_nccl_release(kb):
    """2.20.3 named the proxy's socket after the process (split communicators collide); 2.20.5 made it random."""
    buggy = run(kb, UDS_IN_USE, nccl_version="2.20.3")
    fixed = run(kb, UDS_IN_USE, nccl_version="2.21.5")
    def raw(d):
        return next(c.raw_score for c in d.causes if c.id == "nccl-uds-socket-collision")

    assert raw(buggy) > raw(run(kb, UDS_IN_USE)) > raw(fixed)
    assert buggy.fix.cause_id == "nccl-uds-socket-collision" and "upgrade-nccl-2205" in [a.id for a in buggy.fix.actions]
    assert "upgrade-nccl-2205" not in [a.id for a in fixed.fix.actions]  # applies only below 2.20.5


def test_an_exclusion_pattern_that_re2_cannot_compile_is_a_kb_error(kb):
    import copy

    from advisor.knowledge import cross_check

    broken = copy.copy(kb)
    broken.causes = dict(kb.causes)
    cause = kb.causes["master-port-in-use"]
    sigs = [s.model_copy(update={"unless": "(?<=UDS)x"}) if s.id == "eaddrinuse" else s for s in cause.signatures]
    broken.causes[cause.id] = cause.model_copy(update={"signatures": sigs})
    assert any("unless" in e.field and "RE2 cannot compile" in e.message for e in cross_check(broken))
    assert not [e for e in cross_check(kb) if "unless" in e.field]


WRONG_MAGIC = "node3:166:1226 [0] misc/socket.cc:484 NCCL WARN socketFinalizeAccept: wrong magic 474554202f204854 != 7970663b906d70b9\n"
NO_VALID_MAGIC = "node3:166:1226 [0] NCCL INFO socketFinalizeAccept: didn't receive a valid magic from 10.1.4.250<40112>\n"
LATE_TIMEOUT = ("[rank80]:[E812 10:07:14.118000 ProcessGroupNCCL.cpp:632] [Rank 80] Watchdog caught collective operation timeout: "
                "WorkNCCL(SeqNum=4107, OpType=ALLREDUCE, NumelIn=2097152, NumelOut=2097152, Timeout(ms)=600000) ran for 600081 "
                "milliseconds before timing out.\n")


@pytest.mark.parametrize("stray, version", [(WRONG_MAGIC, "2.21.5"), (NO_VALID_MAGIC, "2.28.9")])
def test_a_stray_connection_then_a_hang_is_the_proxy_bug_before_2_30_7(kb, stray, version):
    """NCCL 2.16.2-2.30.4 accept again in the proxy thread after a wrong magic, blocking it: a hang follows."""
    d = run(kb, stray + LATE_TIMEOUT, nccl_version=version)
    assert d.causes[0].id == "nccl-proxy-stray-connection-hang"
    fixed = run(kb, stray + LATE_TIMEOUT, nccl_version="2.30.7")
    assert "nccl-proxy-stray-connection-hang" not in [c.id for c in fixed.causes]


def test_a_stray_wrong_magic_alone_is_no_interface_problem(kb):
    """The wrong-magic warning names something foreign on NCCL's port, not the socket interface NCCL
    picked: it no longer falls back to the socket component's defaults."""
    d = run(kb, WRONG_MAGIC)
    ids = [c.id for c in d.causes]
    assert ids[0] == "nccl-proxy-stray-connection-hang" and "wrong-socket-interface" not in ids


def test_a_stray_that_failed_the_bootstrap_is_not_the_proxy_hang(kb):
    log = (WRONG_MAGIC + "node0:5120:5188 [0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer 10.1.4.250<51412>\n"
           "node0:5120:5188 [0] NCCL INFO bootstrap.cc:701 -> 6\n")
    d = run(kb, log, nccl_version="2.26.2")
    assert d.causes[0].id == "nccl-bootstrap-stray-connection"
