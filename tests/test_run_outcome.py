"""A quiet log is a hang, a crash reported elsewhere, or a healthy run with warnings: the advisor
asks its owner how the run ended (run_outcome) when the recognised lines include harmless ones, and
a run that finished leaves the harmless reading in front. Logs recorded by repro/ (torch 2.13,
gloo, torchrun on 127.0.0.1)."""

from __future__ import annotations

from pathlib import Path

from advisor.diagnose import diagnose
from advisor.knowledge import FINISHED_RUN
from advisor.models import DiagnoseRequest

RECORDED = Path(__file__).resolve().parents[1] / "kb" / "recorded"
# Lightning under torchrun, DDP told to find unused parameters that do not exist: it warns, then finishes
QUIET_LIGHTNING = (RECORDED / "find-unused-not-needed--lightning-torchrun.log").read_text(encoding="utf-8")
# rank 0 evaluates past the timeout: a failure, not a quiet log
EVAL_TIMEOUT = (RECORDED / "eval-straggler--torchrun.log").read_text(encoding="utf-8")


def _run(log: str, **answers: str):
    return diagnose(DiagnoseRequest(log=log, answers=answers, max_causes=10))


def test_quiet_log_with_a_harmless_warning_asks_how_the_run_ended():
    d = _run(QUIET_LIGHTNING)
    assert d.facts["no_error_lines"] is True and d.facts["harmless_reading"] is True
    assert "run_outcome" in [q.id for q in d.questions]
    assert not d.causes[0].benign  # unanswered, the quiet log still reads as a possible hang first


def test_a_finished_run_puts_the_harmless_reading_first_with_its_own_fix():
    d = _run(QUIET_LIGHTNING, run_outcome="finished")
    assert d.causes[0].benign and d.causes[0].id == "ddp-find-unused-perf-warning"
    assert d.fix.summary.startswith("Nothing failed: the run finished")
    assert [a.title for a in d.fix.actions] == ["Turn unused-parameter detection off (optional, for speed)"]
    assert any("find_unused_parameters=False" in s.content for s in d.fix.snippets)  # in Lightning's own format
    assert d.fix.next_run == []  # nothing to see more of next time
    assert "run_outcome" not in [q.id for q in d.questions]


def test_a_hung_run_keeps_the_hang_reading():
    d = _run(QUIET_LIGHTNING, run_outcome="hung")
    assert not d.causes[0].benign
    assert "The real failure is elsewhere" not in d.fix.summary


def test_not_asked_when_the_log_shows_a_failure():
    d = _run(EVAL_TIMEOUT)
    assert "harmless_reading" not in d.facts
    assert "run_outcome" not in [q.id for q in d.questions]


def test_not_asked_of_a_quiet_log_without_harmless_lines():
    d = _run("Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2\n")
    assert d.facts["no_error_lines"] is True
    assert "harmless_reading" not in d.facts and "run_outcome" not in [q.id for q in d.questions]


def test_training_that_ended_after_the_last_cue_is_past_start_up():
    # the last phase cue is Lightning's start-up banner, but `Trainer.fit` stopped comes after it
    d = _run(QUIET_LIGHTNING)
    assert d.facts["training_finished"] is True
    assert d.facts["phase"] == "end-of-epoch"


def test_every_failure_cause_and_no_harmless_one_has_the_finished_run_rule(kb):
    for cause in kb.causes.values():
        has = FINISHED_RUN in cause.rules
        assert has != cause.benign, cause.id
