"""The HTTP API, through FastAPI's TestClient: every route, limits, auth, errors, multi-turn."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from advisor.api import Settings, create_app
from helpers import scenario

LINE = ("[rank1]:[E101 01:00:00.100 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=522, OpType=_ALLGATHER_BASE, NumelIn=1, NumelOut=8, Timeout(ms)=1800000) ran for 1800021 milliseconds before timing out.")


@pytest.fixture(scope="module")
def client(kb):
    return TestClient(create_app(kb, Settings()), raise_server_exceptions=False)


def test_healthz(client):
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["status"] == "ok" and r.json()["causes"] > 20


def test_diagnose_returns_the_cli_contract_plus_markdown(client):
    r = client.post("/v1/diagnose", json={"log": "Saving model checkpoint to out/c\n" + LINE})
    assert r.status_code == 200
    data = r.json()
    assert {"status", "headline", "causes", "facts", "questions", "fix", "markdown"} <= set(data)
    assert data["causes"][0]["code"] == "checkpoint-save-straggler"
    md = data["markdown"]
    assert md.startswith("**") and "checkpoint" in md.splitlines()[0].lower()  # the one-line diagnosis first
    assert "<details><summary>Evidence</summary>" in md and "```" in md and "### References" in md
    sharpen = md[md.index("### To sharpen this"):]
    first = data["questions"][0]["id"]
    assert f"`{first}=" in sharpen and "Reply with your answers" in sharpen  # says how to answer


def test_multi_turn_by_resending_the_log_with_answers(client):
    case = scenario("openr1-save-allgather")
    first = client.post("/v1/diagnose", json={"log": case["log"]}).json()
    asked = [q["id"] for q in first["questions"]]
    assert asked
    answers = {"framework": "open-r1", "model_size_b": "1.5", "storage": "network-fs", "saves_optimizer": "yes", "framework_version": "unknown"}
    second = client.post("/v1/diagnose", json={"log": case["log"], "answers": answers}).json()
    assert second["causes"][0]["code"] == "checkpoint-save-straggler"
    assert not set(answers) & {q["id"] for q in second["questions"]}
    snippet = next(s for s in second["fix"]["snippets"] if s["format"] == "openr1-yaml" and "ddp_timeout" in s["content"])
    assert "ddp_timeout: 3600" in snippet["content"]
    # stateless: the same request gives the same answer on any worker
    again = client.post("/v1/diagnose", json={"log": case["log"], "answers": answers}).json()
    assert again == second


def test_causes_frameworks_questions(client, kb):
    causes = client.get("/v1/causes").json()
    assert {c["id"] for c in causes} == set(kb.causes)
    one = client.get("/v1/causes/nccl-heartbeat-monitor").json()
    assert one["code"] == "heartbeat-monitor-kill" and one["fixes"] and one["references"] and "examples" not in one
    assert client.get("/v1/causes/nope").status_code == 404
    frameworks = client.get("/v1/frameworks").json()
    assert {f["id"] for f in frameworks} >= {"llama-factory", "open-r1", "torchtitan", "lightning", "trl"}
    questions = client.get("/v1/questions").json()
    assert {"framework", "phase", "model_size_b"} <= {q["id"] for q in questions}


@pytest.mark.parametrize(("body", "field"), [
    ({"log": LINE, "answers": {"phase": "lunch"}}, "answers.phase"),
    ({"log": LINE, "answers": {"bogus": "1"}}, "answers.bogus"),
    ({"log": LINE, "max_causes": 0}, "max_causes"),
    ({"log": 42}, "log"),
    ({"log": LINE, "unknown_field": 1}, "unknown_field"),
    ({"log": "   "}, "log"),
])
def test_422_names_the_bad_field(client, body, field):
    r = client.post("/v1/diagnose", json=body)
    assert r.status_code == 422
    data = r.json()
    assert data["error"] == "invalid request"
    assert any(d["field"] == field for d in data["detail"]), data


def test_malformed_json_is_422_without_a_trace(client):
    r = client.post("/v1/diagnose", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "Traceback" not in r.text


def test_413_over_the_size_cap(kb):
    small = TestClient(create_app(kb, Settings(max_request_bytes=1000)))
    r = small.post("/v1/diagnose", json={"log": "x" * 5000})
    assert r.status_code == 413 and "limit" in r.json()["detail"]

    def chunks():  # no Content-Length: the cap is enforced while streaming
        for _ in range(10):
            yield b'{"log": "' + b"y" * 500
    r = small.post("/v1/diagnose", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_api_key(kb):
    locked = TestClient(create_app(kb, Settings(api_key="s3cret-token")))
    assert locked.get("/healthz").status_code == 200  # health stays open for load balancers
    assert locked.get("/v1/causes").status_code == 401
    assert locked.post("/v1/diagnose", json={"log": LINE}).status_code == 401
    assert locked.get("/v1/causes", headers={"Authorization": "Bearer wrong"}).status_code == 401
    r = locked.post("/v1/diagnose", json={"log": LINE}, headers={"Authorization": "Bearer s3cret-token"})
    assert r.status_code == 200


def test_cors_closed_by_default_and_open_when_configured(kb):
    closed = TestClient(create_app(kb, Settings()))
    r = closed.get("/healthz", headers={"Origin": "https://example.com"})
    assert "access-control-allow-origin" not in r.headers
    opened = TestClient(create_app(kb, Settings(cors_origins=["https://bots.example.com"])))
    r = opened.get("/healthz", headers={"Origin": "https://bots.example.com"})
    assert r.headers.get("access-control-allow-origin") == "https://bots.example.com"


def test_secrets_are_redacted_in_json_and_markdown(client):
    token = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    log = ("[rank2]: Traceback (most recent call last):\n[rank2]:   File \"/w/train.py\", line 3, in <module>\n"
           f"[rank2]: OSError: 401 Unauthorized for https://bot:hunter2pass@hub.example.com/x with token {token}\n" + LINE)
    r = client.post("/v1/diagnose", json={"log": log})
    assert r.status_code == 200
    assert "user_exception" in r.json()["facts"]  # the line reaches the output ...
    assert token not in r.text and "hunter2pass" not in r.text  # ... but not its secrets
    assert r.json()["redactions"] >= 2


def test_internal_errors_carry_no_trace(kb, monkeypatch):
    import advisor.api as api

    def boom(*a, **k):
        raise RuntimeError("secret log text that must not leak")

    monkeypatch.setattr(api, "diagnose", boom)
    c = TestClient(create_app(kb, Settings()), raise_server_exceptions=False)
    r = c.post("/v1/diagnose", json={"log": LINE})
    assert r.status_code == 500 and r.json() == {"error": "internal error"}
    assert "secret log text" not in r.text


def test_openapi_has_examples(client):
    schema = client.get("/openapi.json").json()
    assert "/v1/diagnose" in schema["paths"]
    body = schema["components"]["schemas"]["DiagnoseBody"]
    assert body.get("examples")
    assert client.get("/docs").status_code == 200


def test_server_refuses_to_start_with_a_broken_kb(tmp_path, capsys, monkeypatch):
    from advisor.api import serve

    monkeypatch.setenv("ADVISOR_KB_PATH", "")  # serve() exports the KB dirs for its workers; undo after
    (tmp_path / "causes").mkdir()
    (tmp_path / "causes" / "bad.yaml").write_text("id: x\ncode: nope\n")
    assert serve("127.0.0.1", 0, 1, [str(tmp_path)]) == 4
    err = capsys.readouterr().err
    assert "refusing to start" in err and "bad.yaml" in err


def test_numbers_and_booleans_are_answers_too(client):
    r = client.post("/v1/diagnose", json={"log": LINE, "answers": {"model_size_b": 7, "packing": True, "phase": "save",
                                                                    "saves_optimizer": False, "nodes": 2.0}})
    assert r.status_code == 200, r.text
    facts = r.json()["facts"]
    assert facts["model_size_b"] == 7 and facts["packing"] is True and facts["saves_optimizer"] is False and facts["nodes"] == 2
    assert client.post("/v1/diagnose", json={"log": LINE, "answers": {"phase": ["save"]}}).status_code == 422


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"])
def test_a_body_that_is_not_json_gets_415_saying_what_to_send(client, content_type):
    r = client.post("/v1/diagnose", content=b'{"log": "x"}', headers={"content-type": content_type})
    assert r.status_code == 415 and "application/json" in r.json()["detail"]


def test_invalid_json_is_named_as_such_not_as_a_field(client):
    r = client.post("/v1/diagnose", content=b'{"log": "x"', headers={"content-type": "application/json"})
    assert r.status_code == 422
    [detail] = r.json()["detail"]
    assert detail["field"] == "body" and "not valid JSON" in detail["message"] and "character 11" in detail["message"]


def test_a_latin1_body_is_said_to_be_not_utf8(client):
    r = client.post("/v1/diagnose", content='{"log": "café NCCL"}'.encode("latin-1"), headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not UTF-8" in r.json()["detail"]


def test_answers_that_are_not_understood_are_said_in_notices(client):
    data = client.post("/v1/diagnose", json={"log": LINE, "answers": {"torch_version": "banana"}, "framework": "megatron"}).json()
    said = {n["text"]: n for n in data["notices"] if n["kind"] == "input"}
    assert set(said) == {"torch_version=banana", "framework=megatron"}
    assert "not a version" in said["torch_version=banana"]["title"] and "not one the advisor knows" in said["framework=megatron"]["title"]
    assert "Note:" in data["markdown"]
    fine = client.post("/v1/diagnose", json={"log": LINE, "answers": {"torch_version": "2.5.1"}, "framework": "trl"}).json()
    assert not [n for n in fine["notices"] if n["kind"] == "input"]


def test_openapi_promises_what_the_server_does(client):
    schema = client.get("/openapi.json").json()
    components = schema["components"]["schemas"]
    # responses may gain fields (README): only the request refuses unknown ones
    closed = [name for name, c in components.items() if "additionalProperties': False" in str(c)]
    assert closed == ["DiagnoseBody"]
    # a blank log without a description is refused by the schema as by the server
    import jsonschema_rs  # what schemathesis validates with

    body = components["DiagnoseBody"]
    for request, ok in (({"log": "   "}, False), ({}, False), ({"log": LINE}, True), ({"description": "it hangs"}, True),
                        ({"log": "", "description": " \n"}, False)):
        assert jsonschema_rs.validator_for(body).is_valid(request) is ok, request
        assert (client.post("/v1/diagnose", json=request).status_code == 200) is ok, request
    detail = schema["paths"]["/v1/causes/{cause_id}"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert detail == {"$ref": "#/components/schemas/CauseDetail"}
    assert {"id", "code", "fixes", "references"} <= set(components["CauseDetail"]["properties"])
    assert "415" in schema["paths"]["/v1/diagnose"]["post"]["responses"]


def test_oversized_body_is_read_before_the_413_so_a_sending_client_sees_it(kb):
    """urllib sends all of a 20 MB body before it reads the reply: it must get the 413 JSON, not a reset."""
    import json
    import socket
    import threading
    import time
    import urllib.error
    import urllib.request

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(kb, Settings(max_request_bytes=64 * 1024)), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive()
            time.sleep(0.05)
        body = json.dumps({"log": "x" * (20 << 20)}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/diagnose", data=body,
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=30)
        assert info.value.code == 413 and "limit" in json.loads(info.value.read())["detail"]
    finally:
        server.should_exit = True
        thread.join(timeout=15)
