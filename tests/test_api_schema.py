"""Property-based run of the HTTP API against its own OpenAPI schema (issue 4), with schemathesis.

Every operation in /openapi.json is fuzzed in-process (the ASGI app, no server) with schema-valid
and schema-violating inputs, and every response goes through all of schemathesis' default checks:
no 5xx (not_a_server_error), documented status codes, content types and response bodies that
conform to the schema (response_schema_conformance), schema-violating input rejected, schema-valid
input accepted, and so on. Once without an API key, and once with one configured and sent as
`Authorization: Bearer`, so the authenticated path is fuzzed too; and once with the key configured
but not sent, where every route but /healthz must answer a documented 401.

One exemption, and only from positive_data_acceptance: POST /v1/diagnose checks four things that
its JSON Schema does not state, so a schema-valid body may get 422 for them. `answers` are checked against
the knowledge base's questions (their ids and per-question value grammars, which team KB directories
can extend at run time); a body needs a `log` or a `description` that is not blank (one of two
fields, blank after Python's str.strip(), which the schema's regex dialect cannot match exactly);
each of `dumps` must be a Flight Recorder dump (read by the same checks as a dump file) from a
rank no other dump names; and `env`, published as a plain object, is read as an `advisor env --json`
snapshot whose fields have types (a schema-valid `{"python": [1]}` is refused, naming `env.python`). Such a 422 must still name exactly those fields and conform to the schema;
any other rejection of schema-valid data fails.

Schemathesis draws `answers` keys at random, so it almost never reaches the tuning calculators
behind a valid answer; a second property test draws answers from the KB's own questions (valid,
unknown, out-of-grammar and extreme values) and requires a 200 that conforms to the schema or a 422
naming an answer, never a 5xx.

Bounded for CI: ADVISOR_SCHEMA_EXAMPLES examples per operation and mode (default 25). A longer run:

    ADVISOR_SCHEMA_EXAMPLES=500 python -m pytest tests/test_api_schema.py -q
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from schemathesis.specs.openapi.checks import positive_data_acceptance, unsupported_method

from advisor.answers import UNKNOWN
from advisor.api import EXAMPLE_LOG, Settings, create_app

EXAMPLES = int(os.environ.get("ADVISOR_SCHEMA_EXAMPLES", "25"))
pytestmark = pytest.mark.timeout(max(60, 2 * EXAMPLES))  # the per-test time guard grows with the budget
API_KEY = "schema-fuzz-key"


@pytest.fixture(scope="module")
def open_app(kb):
    return create_app(kb, Settings())


@pytest.fixture(scope="module")
def open_schema(open_app):
    return schemathesis.openapi.from_asgi("/openapi.json", open_app)


@pytest.fixture(scope="module")
def locked_schema(kb):
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(kb, Settings(api_key=API_KEY)))


open_api = schemathesis.pytest.from_fixture("open_schema")
locked_api = schemathesis.pytest.from_fixture("locked_schema")
locked_api_without_key = schemathesis.pytest.from_fixture("locked_schema")


def test_every_route_is_in_the_schema(open_app, open_schema):
    """What the schema lists is what gets fuzzed: no route may be missing from it."""
    routes = {(method, route.path) for route in open_app.routes if isinstance(route, APIRoute) and route.include_in_schema
              for method in route.methods}
    operations = {(op.method.upper(), op.path) for op in (result.ok() for result in open_schema.get_all_operations())}
    assert routes == operations
    assert ("POST", "/v1/diagnose") in operations and ("GET", "/v1/causes/{cause_id}") in operations


def test_every_cause_in_the_kb_is_served_as_the_schema_says(kb, open_app, open_schema):
    """Random ids only ever reach the 404 of GET /v1/causes/{cause_id}: ask for every real one too."""
    operation = open_schema["/v1/causes/{cause_id}"]["GET"]
    client = TestClient(open_app, raise_server_exceptions=False)
    for cause_id in kb.causes:
        response = client.get(f"/v1/causes/{cause_id}")
        assert response.status_code == 200, (cause_id, response.text[:300])
        operation.validate_response(response)


def _rejected_for_what_the_schema_cannot_say(case, response) -> bool:
    """A 422 from POST /v1/diagnose for the answers, a blank log/description, a dump or a field of the
    env snapshot, and nothing else."""
    if (case.method.upper(), case.path) != ("POST", "/v1/diagnose") or response.status_code != 422:
        return False
    detail = response.json().get("detail")
    return bool(detail) and all(
        d["field"].startswith("answers.") or (d["field"] == "log" and d["message"].startswith("empty"))
        or (d["field"].startswith("dumps.") and d["field"].endswith((".trace", ".rank")) and d["message"].startswith(("dumps[", "rank ")))
        or (d["field"].startswith("env.") and d["field"] != "env.")
        for d in detail)


def test_a_schema_valid_env_with_a_mistyped_field_is_a_named_422_and_exempt(open_app):
    """Found by the fuzz run in CI: `env` is published as a plain object, so `{"python": [1, true,
    null]}` is schema-valid; the handler reads it as a snapshot and refuses it naming the field."""
    from types import SimpleNamespace

    client = TestClient(open_app, raise_server_exceptions=False)
    reply = client.post("/v1/diagnose", json={"log": "NCCL WARN x", "env": {"python": [1, True, None]}})
    assert reply.status_code == 422
    assert [d["field"] for d in reply.json()["detail"]] == ["env.python"]
    case = SimpleNamespace(method="post", path="/v1/diagnose")
    assert _rejected_for_what_the_schema_cannot_say(case, reply)
    other = client.post("/v1/diagnose", json={"log": "NCCL WARN x", "max_causes": 0})
    assert other.status_code == 422 and not _rejected_for_what_the_schema_cannot_say(case, other)


def _call_and_validate(case, headers: dict[str, str] | None = None) -> None:
    __tracebackhide__ = True
    response = case.call(headers=headers)
    excluded = [positive_data_acceptance] if _rejected_for_what_the_schema_cannot_say(case, response) else []
    case.validate_response(response, headers=headers, excluded_checks=excluded,
                           transport_kwargs={"headers": headers} if headers else None)


@open_api.parametrize()
@settings(max_examples=EXAMPLES, deadline=None)
def test_api_conforms_to_its_schema(case):
    _call_and_validate(case)


@locked_api.parametrize()
@settings(max_examples=EXAMPLES, deadline=None)
def test_api_conforms_to_its_schema_with_an_api_key(case):
    _call_and_validate(case, {"Authorization": f"Bearer {API_KEY}"})


@locked_api_without_key.parametrize()
@settings(max_examples=max(1, EXAMPLES // 5), deadline=None)
def test_api_without_the_key_gets_documented_401s(case):
    response = case.call()
    if case.path != "/healthz":
        assert response.status_code == 401, (case.method, case.path, response.status_code, response.text[:300])
    # the key is checked before routing: without it, a method a route lacks is a 401 too, not a 405
    # (the keyed and open runs check the 405s)
    case.validate_response(response, excluded_checks=[unsupported_method])


# --- answers drawn from the KB's questions ---------------------------------------------------------

HEARTBEAT_LOG = (
    "[rank12]:[E1003 08:41:02.511204019 ProcessGroupNCCL.cpp:1316] [PG 0 Rank 12] Heartbeat monitor timed out! "
    "Process will be terminated after dumping debug info. workMetaList_.size()=2\n"
    "[rank12]:[F1003 08:41:02.511611342 ProcessGroupNCCL.cpp:1153] [PG 0 Rank 12] ProcessGroupNCCL's watchdog got "
    "stuck for 600 seconds without making progress in monitoring enqueued collectives.\n")


def _answer_values(question) -> st.SearchStrategy[str]:
    options = [st.sampled_from(sorted(UNKNOWN)), st.text(max_size=20)]
    if question.kind == "choice":
        options.append(st.sampled_from([c.value for c in question.choices] + [c.label.upper() for c in question.choices]))
    elif question.kind == "number":
        options += [st.floats(allow_nan=False).map(repr), st.floats(1e100, 1.7e308).map(lambda x: f"{x:g}"),
                    st.sampled_from(["nan", "inf", "-inf", "-0", "1_000", "0x10", "1e-320"]),
                    st.floats(0, 1e4).map(lambda x: f"{x:g}B"), st.integers(0, 10**6).map(lambda n: f"{n:,}")]
    elif question.kind == "yes_no":
        options.append(st.sampled_from(["yes", "no", "Y", "n", "true", "off", "1", "0", "是"]))
    else:  # version
        options.append(st.from_regex(r"v?[0-9]{1,2}(\.[0-9]{1,3}){0,2}(\.post[0-9]|rc[0-9])?", fullmatch=True))
    return st.one_of(options)


def _kb_answers(kb) -> st.SearchStrategy[dict[str, str]]:
    return st.lists(st.sampled_from(sorted(kb.questions)), unique=True, max_size=8).flatmap(
        lambda ids: st.fixed_dictionaries({qid: _answer_values(kb.questions[qid]) for qid in ids}))


@pytest.fixture(scope="module")
def open_client(open_app):
    return TestClient(open_app, raise_server_exceptions=False)


@settings(max_examples=EXAMPLES * 2, deadline=None)
@given(data=st.data(), log=st.sampled_from([EXAMPLE_LOG, HEARTBEAT_LOG, ""]))
def test_kb_answers_give_a_conforming_200_or_a_422_never_a_5xx(kb, open_client, open_schema, data, log):
    answers = data.draw(_kb_answers(kb), label="answers")
    framework = data.draw(st.none() | st.sampled_from(sorted(kb.frameworks)) | st.text(max_size=12), label="framework")
    body = {"log": log, "answers": answers, "framework": framework, "description": None if log else "it hangs"}
    response = open_client.post("/v1/diagnose", json=body)
    assert response.status_code in (200, 422), (response.status_code, response.text[:300], body["answers"])
    if response.status_code == 422:
        assert all(d["field"].startswith("answers.") for d in response.json()["detail"]), response.text[:300]
    open_schema["/v1/diagnose"]["POST"].validate_response(response)


@pytest.mark.parametrize("answer", [{"model_size_b": "1e308"}, {"startup_skew_s": "1e308"}, {"nodes": "1e6"}])
def test_absurd_numeric_answer_is_a_422_not_a_500(open_client, answer):
    """A huge answer once overflowed a timeout calculator (int(inf)): now the question's `max` refuses it."""
    response = open_client.post("/v1/diagnose", json={"log": EXAMPLE_LOG, "answers": answer})
    assert response.status_code == 422, (response.status_code, response.text[:300])
    assert "at most" in response.text
