"""Flight Recorder dumps joined with the diagnosis: facts and causes, the ranks picture, every
front end (CLI `--dumps`, HTTP `dumps`, the TUI), the JSON contract's `flight_recorder` object."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from advisor.api import Settings, create_app
from advisor.diagnose import conclude, diagnose, read_log
from advisor.fr_dumps import read_dumps
from advisor.fr_join import attach_dumps
from advisor.models import DiagnoseRequest
from advisor.render import render_markdown, render_text
from helpers import FIXTURES

GLOO = FIXTURES / "flight_recorder" / "gloo-2.13"
BUILT = FIXTURES / "flight_recorder"


def joined(kb, scenario: str, fmt: str = "pickle", log: bool = True, answers=None):
    folder = GLOO / scenario
    text = (folder / "torchrun.log").read_bytes() if log else b""
    reading = read_log(kb, text)
    attach_dumps(reading, *read_dumps([str(folder / fmt)]))
    return conclude(kb, reading, DiagnoseRequest(answers=answers or {}))


def test_log_alone_is_not_enough_for_a_straggler_the_dumps_name_it(kb):
    alone = diagnose(DiagnoseRequest(log=(GLOO / "straggler" / "torchrun.log").read_bytes()), kb)
    assert alone.causes[0].id != "save-checkpoint-timeout"  # gloo timeouts only: "the collective was slow"
    d = joined(kb, "straggler")
    assert d.status == "diagnosed" and d.causes[0].id == "save-checkpoint-timeout"
    facts = {f["fact"]: f for f in d.causes[0].evidence["facts"]}
    assert facts["straggler_activity"]["value"] == ["save"] and facts["straggler_activity"]["weight"] > 0
    assert d.fact_sources["fr_stragglers"].origin == "dump" and d.facts["fr_stragglers"] == [0]
    assert d.flight_recorder.culprits == [0]
    slow = next(c for c in d.causes if c.id == "collective-slower-than-timeout") if any(
        c.id == "collective-slower-than-timeout" for c in d.causes) else None
    assert slow is None or slow.score < 0.05


def test_dumps_alone_name_the_save_straggler(kb):
    d = joined(kb, "straggler", log=False)
    assert d.causes[0].id == "save-checkpoint-timeout" and d.status == "diagnosed"
    assert "no_error_lines" not in d.facts  # there was no log to be silent


def test_mismatch(kb):
    d = joined(kb, "mismatch")
    assert d.causes[0].code == "collective-mismatch" and d.facts["fr_mismatch"] is True
    dumps_only = joined(kb, "mismatch", log=False)
    assert dumps_only.causes[0].id == "mismatched-collectives" and dumps_only.status == "diagnosed"
    assert any(f["fact"] == "fr_mismatch" for f in dumps_only.causes[0].evidence["facts"])


def test_dead_rank_the_log_shows_exiting(kb):
    d = joined(kb, "dead_rank")
    assert d.causes[0].code == "rank-exception"
    assert d.facts["fr_dead_rank"] is True and d.facts["fr_missing_culprits"] == [2]
    fired = {f["fact"] for f in d.causes[0].evidence["facts"]}
    assert "fr_dead_rank" in fired
    # without the log the dumps cannot tell how rank 2 ended: no cause is named, rank 2 is
    dumps_only = joined(kb, "dead_rank", log=False)
    assert "fr_dead_rank" not in dumps_only.facts and dumps_only.flight_recorder.culprits == [2]
    assert dumps_only.status != "diagnosed"


def test_several_process_groups_name_the_data_straggler(kb):
    d = joined(kb, "multi_pg")
    assert d.causes[0].code == "data-preprocessing-straggler" and d.facts["fr_stragglers"] == [3]


def test_built_nccl_eval_straggler(kb):
    reading = read_log(kb, b"")
    attach_dumps(reading, *read_dumps([str(BUILT / "built-nccl-2.10" / "eval_straggler" / "pickle")]))
    d = conclude(kb, reading, DiagnoseRequest())
    assert d.causes[0].code == "eval-straggler" and d.facts["timeout_ms"] == 600000 and d.facts["backend"] == "nccl"


def test_answers_still_override_what_the_dumps_say(kb):
    d = joined(kb, "straggler", answers={"phase": "eval"})
    assert d.fact_sources["phase"].origin == "answer"


def test_the_ranks_picture_shows_each_ranks_last_collective(kb):
    d = joined(kb, "straggler")
    rows = {r.rank: r for r in d.ranks}
    assert rows[0].flight_recorder == "behind" and rows[0].last_collective.startswith("all_gather #3 of group 0")
    assert rows[1].flight_recorder == "waiting" and rows[1].state == "failed"  # the log's view is kept
    text = render_text(d)
    assert "dumps 0-3: BWWW" in text and "W waiting: 1-3, last: all_reduce #4 of group 0 (default_pg)" in text
    only = joined(kb, "dead_rank", log=False)
    picture = render_text(only)
    assert "dumps 0-2: WWx" in picture and "reported nothing" not in picture


def test_human_and_markdown_sections(kb):
    d = joined(kb, "straggler")
    text = render_text(d)
    section = text[text.index("Flight Recorder"):]
    assert "culprit rank 0: never entered the collective" in section and "stack: gather_state_dict" in section
    md = render_markdown(d)
    assert "### Flight Recorder" in md and "culprit rank 0" in md
    mismatch = render_text(joined(kb, "mismatch"))
    assert "first mismatch: collective #3 of group 0 (default_pg) differs in sizes" in mismatch


def test_json_contract(kb):
    data = joined(kb, "dead_rank").model_dump(mode="json")
    fr = data["flight_recorder"]
    assert fr["ranks_dumped"] == [0, 1] and fr["ranks_missing"] == [2] and fr["culprits"] == [2]
    assert fr["first_mismatch"] is None and fr["waiting_in"]["op"] == "all_reduce"
    assert isinstance(fr["process_groups"], list) and fr["process_groups"][0]["pg"] == "0"
    assert diagnose(DiagnoseRequest(log="x"), kb).model_dump(mode="json")["flight_recorder"] is None


# --- the CLI -----------------------------------------------------------------------------------


def test_cli_dumps_alone_and_with_a_log(cli):
    r = cli("suggest", "--dumps", str(GLOO / "straggler" / "pickle"))
    assert r.code == 0 and "Flight Recorder" in r.out and r.err == ""
    r = cli("suggest", "--log", str(GLOO / "dead_rank" / "torchrun.log"), "--dumps", str(GLOO / "dead_rank" / "json"), "--json")
    assert r.code == 0 and r.json["flight_recorder"]["culprits"] == [2]


def test_cli_takes_files_and_globs(cli):
    folder = GLOO / "mismatch" / "pickle"
    r = cli("suggest", "--dumps", str(folder / "nccl_trace_rank_0"), str(folder / "nccl_trace_rank_1"), "--json")
    assert r.json["flight_recorder"]["first_mismatch"]["seq"] == 3
    r = cli("suggest", "--dumps", str(GLOO / "mismatch" / "json" / "*.json"), "--json")
    assert r.json["flight_recorder"]["ranks_dumped"] == [0, 1]


def test_cli_bad_dumps_exit_3_naming_the_file(cli, tmp_path):
    bad = tmp_path / "nccl_trace_rank_0"
    bad.write_bytes(b"\x80\x02cos\nsystem\n(S'echo owned'\ntR.")
    r = cli("suggest", "--dumps", str(bad))
    assert r.code == 3 and "nccl_trace_rank_0" in r.err and "refuses" in r.err and "Traceback" not in r.err
    r = cli("suggest", "--dumps", str(tmp_path / "missing"))
    assert r.code == 3 and "no such file or folder" in r.err
    (tmp_path / "rank_1.log").write_text("a log, not a dump")
    r = cli("suggest", "--dumps", str(tmp_path / "rank_1.log"))
    assert r.code == 3 and "rank number" in r.err


def test_cli_dumps_do_not_read_a_terminal(cli):
    # with --dumps and nothing else, standard input is left alone (here: an empty pipe)
    r = cli("suggest", "--dumps", str(GLOO / "empty" / "pickle"), stdin=b"")
    assert r.code in (0, 1) and "no collectives" in r.out


# --- the HTTP API --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(kb):
    return TestClient(create_app(kb, Settings()), raise_server_exceptions=False)


def json_dumps(scenario: str) -> list[dict]:
    folder = GLOO / scenario / "json"
    return [{"rank": int(p.stem.rsplit("_", 1)[1]), "trace": json.loads(p.read_text())} for p in sorted(folder.glob("*.json"))]


def test_api_dumps(client):
    r = client.post("/v1/diagnose", json={"dumps": json_dumps("mismatch")})
    assert r.status_code == 200
    data = r.json()
    assert data["causes"][0]["code"] == "collective-mismatch" and data["flight_recorder"]["culprits"] == [0]
    assert "### Flight Recorder" in data["markdown"]
    log = (GLOO / "dead_rank" / "torchrun.log").read_text()
    r = client.post("/v1/diagnose", json={"log": log, "dumps": json_dumps("dead_rank")})
    assert r.json()["causes"][0]["code"] == "rank-exception" and r.json()["facts"]["fr_dead_rank"] is True


@pytest.mark.parametrize("dumps, field, says", [
    ([{"rank": 0, "trace": "gAJ9cQAu"}], "dumps.0.trace", "pickles are not accepted"),  # a pickle, base64: never
    ([{"rank": 0, "trace": {"hello": 1}}], "dumps.0.trace", "not a Flight Recorder dump"),
    ([{"rank": 0, "trace": {"entries": {}}}], "dumps.0.trace", "not a list"),
    ([{"rank": -1, "trace": {}}], "dumps.0.rank", ""),
    ([{"rank": "0", "trace": {}}], "dumps.0.rank", ""),
    ([{"rank": 0, "trace": {"version": "2.10"}}, {"rank": 0, "trace": {"version": "2.10"}}], "dumps.1.rank", "twice"),
    ([{"rank": 0, "trace": {}, "pickle": "..."}], "dumps.0.pickle", ""),
])
def test_api_refuses_bad_dumps_with_422(client, dumps, field, says):
    r = client.post("/v1/diagnose", json={"log": "x", "dumps": dumps})
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert any(d["field"] == field and says in d["message"] for d in detail), detail


def test_api_dumps_count_against_the_request_cap(kb):
    small = TestClient(create_app(kb, Settings(max_request_bytes=4096)), raise_server_exceptions=False)
    r = small.post("/v1/diagnose", json={"dumps": json_dumps("straggler")})
    assert r.status_code == 413


# --- the TUI -----------------------------------------------------------------------------------


async def test_tui_reads_dumps_alone(kb, tmp_path):
    from advisor.tui.app import AdvisorApp
    from advisor.tui.widgets import ChatMessage

    app = AdvisorApp(kb, dumps=read_dumps([str(GLOO / "straggler" / "pickle")]), save_dir=tmp_path)
    async with app.run_test(size=(100, 40)) as pilot:
        for _ in range(100):
            await pilot.pause(0.05)
            if app.diagnosis is not None:
                break
        assert app.diagnosis is not None and app.diagnosis.flight_recorder.culprits == [0]
        said = "\n".join(str(m.render()) for m in app.query(ChatMessage))
        assert "Flight Recorder" in said and "culprit rank 0" in said


def test_tui_command_line_refuses_bad_dumps(cli, tmp_path):
    r = cli("tui", "--dumps", str(tmp_path / "nothing"))
    assert r.code == 3 and "no such file or folder" in r.err
