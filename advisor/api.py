"""HTTP API for bots: a stateless diagnosis service over the same core as the CLI.

`POST /v1/diagnose` takes a log plus answers and returns the CLI's JSON contract plus `markdown`, a
reply ready to post as a GitHub or Slack comment. There is no session state: a multi-turn
conversation resends the log with more answers, so any number of workers or replicas answer alike.

Safety: requests over the size cap (ADVISOR_MAX_REQUEST_BYTES, default 10 MB) get 413 before the
body is read in full; at most ADVISOR_MAX_INFLIGHT diagnoses (default 8) run at once per worker, the
rest wait in line before their bodies are parsed, so a burst costs memory per open connection, not
per parsed log; a bad field gets 422 naming it; no response ever carries a stack trace; with
ADVISOR_API_KEY set, every route but /healthz needs `Authorization: Bearer <key>`; CORS is closed
unless ADVISOR_CORS_ORIGINS lists origins. Logs are never written to disk or to the server's own log,
and secrets in them are redacted in every response.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
from collections import deque
from dataclasses import dataclass, field
from typing import Annotated, Any
from weakref import WeakKeyDictionary

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from advisor import __version__
from advisor.answers import AnswerError
from advisor.diagnose import diagnose
from advisor.envfile import EnvSnapshot
from advisor.knowledge import KnowledgeBase, load_kb
from advisor.models import DiagnoseRequest, Diagnosis
from advisor.render import render_markdown

logger = logging.getLogger("advisor.api")

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_INFLIGHT = 8
DRAIN_LIMIT = 64 * 1024 * 1024
"""bytes of an oversized body read and dropped before its 413 (beyond this, the connection is closed)"""

EXAMPLE_LOG = (
    "[INFO|trainer.py:3910] 2025-05-06 08:11:52,112 >> Saving model checkpoint to out/checkpoint-500\n"
    "[rank2]:[E506 08:41:53.511 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=59709, OpType=_ALLGATHER_BASE, NumelIn=194510848, NumelOut=1556086784, Timeout(ms)=1800000) "
    "ran for 1800085 milliseconds before timing out.\n"
)


@dataclass
class Settings:
    max_request_bytes: int = DEFAULT_MAX_BYTES
    api_key: str | None = None
    cors_origins: list[str] = field(default_factory=list)
    kb_dirs: list[str] = field(default_factory=list)
    max_inflight: int = DEFAULT_MAX_INFLIGHT

    @classmethod
    def from_env(cls) -> "Settings":
        raw_max = os.environ.get("ADVISOR_MAX_REQUEST_BYTES", "")
        raw_inflight = os.environ.get("ADVISOR_MAX_INFLIGHT", "")
        origins = [o.strip() for o in os.environ.get("ADVISOR_CORS_ORIGINS", "").split(",") if o.strip()]
        return cls(
            max_request_bytes=int(raw_max) if raw_max.isdigit() else DEFAULT_MAX_BYTES,
            api_key=os.environ.get("ADVISOR_API_KEY") or None,
            cors_origins=origins,
            max_inflight=int(raw_inflight) if raw_inflight.isdigit() and int(raw_inflight) else DEFAULT_MAX_INFLIGHT,
        )  # ADVISOR_KB_PATH is read by load_kb itself


def _answer_text(value: str | bool | int | float) -> str:
    """An answer as the core reads it: JSON true/false as yes/no, a number as its digits."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


BLANK = " \t\n\r\x0b\x0c"
"""what counts as blank in a log or description, for the server and its schema alike"""


def _json_integer(value: Any) -> Any:
    """A JSON integer (26 or 26.0), not what lax int parsing would also take: true, "26"."""
    if isinstance(value, (bool, str)):
        raise ValueError("expected an integer")
    return value


MAX_DUMPS = 4096
MAX_DUMP_RANK = 1 << 17
# one rank's Flight Recorder dump, as `torch._C._distributed_c10d._dump_fr_trace_json()` writes it;
# inline in DiagnoseBody's schema (the request schema is self-contained) and checked by _read_dumps
_DUMP_ITEM = {
    "type": "object", "additionalProperties": False, "required": ["rank", "trace"],
    "properties": {
        "rank": {"type": "integer", "minimum": 0, "exclusiveMaximum": MAX_DUMP_RANK, "description": "the global rank that wrote it"},
        "trace": {"type": "object", "description": "the dump as JSON: version, pg_config, pg_status, entries (never a pickle)"},
    },
}
DumpList = Annotated[list[dict[str, Any]] | None, WithJsonSchema({
    "anyOf": [{"type": "array", "maxItems": MAX_DUMPS, "items": _DUMP_ITEM}, {"type": "null"}],
    "description": "Flight Recorder dumps in torch's JSON format, one per rank (the request-size cap applies)"})]


# inline in the schema too (a $ref to the snapshot's nested models would leave the request schema
# incomplete); the handler validates it as an EnvSnapshot and names the failing field in a 422
EnvBody = Annotated[dict[str, Any] | None, WithJsonSchema({
    "anyOf": [{"type": "object"}, {"type": "null"}],
    "description": "the machine's env snapshot (`advisor env --json`): it answers the versions, GPUs, container "
                   "and framework questions"})]


class DiagnoseBody(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"log": EXAMPLE_LOG, "answers": {"model_size_b": 1.5, "storage": "network-fs"}, "framework": "open-r1"}],
        # a log or a description, not both blank (the schema says what the server checks)
        "anyOf": [{"required": ["log"], "properties": {"log": {"pattern": "[^ \\t\\n\\r\\u000b\\u000c]"}}},
                  {"required": ["description"], "properties": {"description": {"type": "string", "pattern": "[^ \\t\\n\\r\\u000b\\u000c]"}}}],
    })

    log: str = Field(default="", description="the error text or log (any size up to the request cap); may be left out "
                                             "when `description` says what happened")
    description: str | None = Field(default=None, max_length=8000, description="what the user saw, in their own words")
    answers: dict[str, str | bool | int | float] = Field(
        default_factory=dict, description="answers to guided questions, by question id: text, a number, or true/false "
                                          "for yes/no questions; 'unknown' is allowed")
    framework: str | None = Field(default=None, max_length=100, description="the user's framework, if known")
    # the types the schema states, without coercion: "mask_hosts": "yes" or "max_causes": true is a 422
    mask_hosts: bool = Field(default=False, strict=True, description="also mask host names and IP addresses")
    max_causes: Annotated[int, BeforeValidator(_json_integer)] = Field(default=5, ge=1, le=50)
    dumps: DumpList = Field(default=None, max_length=MAX_DUMPS)
    env: EnvBody = None


class DiagnoseResponse(Diagnosis):
    markdown: str = Field(description="a reply ready to post as a GitHub or Slack comment")


def _cause_detail_model() -> type[BaseModel]:
    """A KB cause as GET /v1/causes/{id} serves it: every field but the example logs, typed."""
    from pydantic import create_model

    from advisor import schema

    fields = {name: (info.annotation, info) for name, info in schema.Cause.model_fields.items() if name != "examples"}
    return create_model("CauseDetail", __config__=ConfigDict(extra="ignore"), **fields)


CauseDetail = _cause_detail_model()


class CauseSummary(BaseModel):
    id: str
    code: str
    title: str
    benign: bool
    summary: str


REQUEST_SCHEMAS = {"DiagnoseBody"}
"""the only schemas that refuse unknown fields; every response may gain fields (README: the JSON
contract only ever adds), so the schema must not promise `additionalProperties: false` for them"""


def _open_for_new_fields(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("additionalProperties") is False:
            del node["additionalProperties"]
        for value in node.values():
            _open_for_new_fields(value)
    elif isinstance(node, list):
        for value in node:
            _open_for_new_fields(value)


class ErrorBody(BaseModel):
    error: str
    detail: Any = None


class _SizeLimit:
    """Refuse bodies over the cap with 413, counting bytes as they arrive (chunked bodies too)."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            if int(declared) <= DRAIN_LIMIT:
                await _drain(receive)
            await self._reject(send)
            return
        seen = 0
        exceeded = False
        more = True  # the client has more of the body to send
        rejected = False

        async def counting_receive() -> Message:
            # over the cap: end the body here; the app's reply is then replaced by a 413
            nonlocal seen, exceeded, more
            if exceeded:
                return {"type": "http.request", "body": b"", "more_body": False}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                more = message.get("more_body", False)
                if seen > self.max_bytes:
                    exceeded = True
                    return {"type": "http.request", "body": b"", "more_body": False}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal rejected
            if not exceeded:
                await send(message)
            elif message["type"] == "http.response.start" and not rejected:
                rejected = True
                if more:
                    await _drain(receive, seen)
                await self._reject(send)

        await self.app(scope, counting_receive, guarded_send)

    async def _reject(self, send: Send) -> None:
        response = JSONResponse(
            {"error": "request too large", "detail": f"the limit is {self.max_bytes} bytes; send the last part of the log, "
             "from a minute before the first error"}, status_code=413)
        await response({"type": "http"}, _no_receive, send)


async def _drain(receive: Receive, already: int = 0) -> None:
    """Read and drop the rest of an oversized body, up to DRAIN_LIMIT, before answering 413, as
    nginx does: a client that sends its whole body before it reads the reply (Python's urllib,
    requests) then gets the 413 and its JSON instead of "connection reset by peer"."""
    dropped = already
    while dropped <= DRAIN_LIMIT:
        message = await receive()
        if message["type"] != "http.request":
            return
        dropped += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


_KEY_MESSAGE = "missing or wrong API key: send 'Authorization: Bearer <key>'"


def _key_matches(authorization: str, key: str) -> bool:
    scheme, _, token = authorization.partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(token.strip().encode(), key.encode())


class _RequireKey:
    """With an API key set, /v1/* answers 401 to a request without it before reading its body.

    A route dependency alone runs only after FastAPI has read and parsed the body: a caller without
    the key could make the server parse up to the size cap, learn whether its JSON was valid (422),
    and take a diagnosis slot. The routes keep the dependency as a second line.
    """

    def __init__(self, app: ASGIApp, key: str):
        self.app = app
        self.key = key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            headers = scope.get("headers") or []
            authorization = next((value for name, value in headers if name == b"authorization"), b"")
            if not _key_matches(authorization.decode("latin-1"), self.key):
                await JSONResponse({"error": _KEY_MESSAGE}, status_code=401,
                                   headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _InFlightLimit:
    """At most `limit` POSTs (diagnoses) in the app at once; the others wait here, bodies unparsed.

    A diagnosis is CPU-bound Python, so a worker gains nothing from running more than a few at once.
    Without this bound, a burst of N requests had all N bodies parsed and validated up front, then
    queued on the 40-thread pool: memory grew with N parsed logs, and the allocator kept most of it
    after the burst. A waiting request holds its connection and its raw body, read in full before it
    waits so that a slow upload never holds a slot; GETs (/healthz for load balancers) never wait.
    """

    def __init__(self, app: ASGIApp, limit: int):
        self.app = app
        self.limit = max(1, limit)
        self._semaphores: WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = WeakKeyDictionary()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        # the body first (the size cap outside bounds it): a slow upload must not hold a slot
        received: deque[Message] = deque()
        while True:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break

        async def replay() -> Message:
            return received.popleft() if received else await receive()

        loop = asyncio.get_running_loop()  # one semaphore per event loop (a TestClient may run several)
        semaphore = self._semaphores.get(loop)
        if semaphore is None:
            semaphore = self._semaphores[loop] = asyncio.Semaphore(self.limit)
        async with semaphore:
            await self.app(scope, replay, send)


async def _no_receive() -> Message:  # pragma: no cover - a JSONResponse never reads the request
    return {"type": "http.disconnect"}


def create_app(kb: KnowledgeBase | None = None, settings: Settings | None = None) -> FastAPI:
    """Build the app. Loading the KB here means a broken KB stops the server from starting."""
    settings = settings or Settings.from_env()
    kb = kb or load_kb(settings.kb_dirs)

    app = FastAPI(
        title="nccl-advisor",
        version=__version__,
        description="Diagnose NCCL, gloo and rendezvous failures in distributed-training logs. Stateless: "
                    "resend the log with more `answers` to continue a conversation.",
    )
    app.state.kb = kb
    app.state.settings = settings
    kb.probe_table.fast  # a server builds the scanner's alternation once, not on some request's clock

    # the last added runs first: size cap, CORS (preflights answered there), API key, then the in-flight
    # limit, so that 413s, preflights and 401s never wait for a diagnosis slot
    app.add_middleware(_InFlightLimit, limit=settings.max_inflight)
    if settings.api_key is not None:
        app.add_middleware(_RequireKey, key=settings.api_key)
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "Content-Type"])
    app.add_middleware(_SizeLimit, max_bytes=settings.max_request_bytes)

    def require_key(request: Request) -> None:
        if settings.api_key is None:
            return
        if not _key_matches(request.headers.get("authorization", ""), settings.api_key):
            raise HTTPException(status_code=401, detail=_KEY_MESSAGE, headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        content_type = request.headers.get("content-type")
        if request.method == "POST" and content_type and not _is_json(content_type):
            return JSONResponse({"error": "unsupported media type",
                                 "detail": "send the body as JSON, with the header Content-Type: application/json"}, status_code=415)
        fields = []
        for err in exc.errors():
            if err.get("type") == "json_invalid":  # its location is a character offset, not a field
                offset = next((p for p in err.get("loc", ()) if isinstance(p, int)), None)
                where = f" at character {offset}" if offset is not None else ""
                fields.append({"field": "body", "message": f"not valid JSON: {(err.get('ctx') or {}).get('error', 'decode error')}{where}"})
                continue
            fields.append({"field": ".".join(str(p) for p in err.get("loc", ()) if p != "body"), "message": err.get("msg", "")})
        return JSONResponse({"error": "invalid request", "detail": fields}, status_code=422)

    # Starlette's class, so that its own errors (a body that is not UTF-8, an unknown path, a wrong
    # method) get this shape too, not FastAPI's default {"detail": ...}; FastAPI's is a subclass
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and isinstance(exc.__cause__, UnicodeDecodeError):
            return JSONResponse({"error": "invalid request body", "detail": "the body is not UTF-8 (Latin-1?): send the JSON "
                                 "encoded as UTF-8, as JSON requires"}, status_code=400)
        if exc.status_code == 422:
            body = {"error": "invalid request", "detail": exc.detail}
        else:
            body = {"error": exc.detail}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # the type only: a message or traceback could carry the user's log
        logger.error("unexpected %s on %s", type(exc).__name__, request.url.path)
        return JSONResponse({"error": "internal error"}, status_code=500)

    unauthorized = {401: {"model": ErrorBody, "description": "with ADVISOR_API_KEY set: a missing or wrong key"}}
    errors = {400: {"model": ErrorBody, "description": "a body that cannot be read (not UTF-8)"},
              **unauthorized, 413: {"model": ErrorBody},
              415: {"model": ErrorBody, "description": "a body that is not JSON (send Content-Type: application/json)"},
              422: {"model": ErrorBody}}

    @app.post("/v1/diagnose", response_model=DiagnoseResponse, responses=errors, dependencies=[Depends(require_key)],
              summary="Diagnose a log", tags=["diagnosis"])
    def diagnose_log(body: DiagnoseBody) -> DiagnoseResponse:
        """The log's ranked root causes, facts, next questions and fix, plus a markdown reply."""
        if not body.log.strip(BLANK) and not (body.description or "").strip(BLANK) and not body.dumps:
            raise HTTPException(status_code=422, detail=[{"field": "log", "message": "empty: send the error text or log"}])
        answers = {key: _answer_text(value) for key, value in body.answers.items()}
        dumps = _read_dumps(body.dumps) if body.dumps else None
        env = _read_env(body.env) if body.env is not None else None
        try:
            result = diagnose(DiagnoseRequest(log=body.log, description=body.description, answers=answers,
                                              framework=body.framework, mask_hosts=body.mask_hosts,
                                              max_causes=body.max_causes, env=[env] if env else []),
                               kb, dumps=dumps)
        except AnswerError as exc:
            raise HTTPException(status_code=422, detail=[{"field": f"answers.{exc.question}", "message": exc.reason}]) from None
        # already validated by the core: serialize once instead of re-validating the response model
        payload = result.model_dump_json()[:-1] + ', "markdown": ' + json.dumps(render_markdown(result)) + "}"
        return Response(content=payload, media_type="application/json")

    @app.get("/v1/causes", dependencies=[Depends(require_key)], responses=unauthorized, tags=["knowledge base"],
             summary="List the causes", response_model=list[CauseSummary])
    def list_causes() -> list[dict[str, Any]]:
        """Every cause the knowledge base knows: id, code, title, whether it is harmless."""
        return [{"id": c.id, "code": c.code, "title": c.title, "benign": c.benign, "summary": c.summary}
                for c in sorted(kb.causes.values(), key=lambda c: (c.code, c.id))]

    @app.get("/v1/causes/{cause_id}", dependencies=[Depends(require_key)],
             responses={**unauthorized, 404: {"model": ErrorBody}}, response_model=CauseDetail,
             tags=["knowledge base"], summary="One cause")
    def get_cause(cause_id: str) -> Response:
        """The KB entry: explanation, signatures, rules, fixes with caveats and references."""
        cause = kb.causes.get(cause_id)
        if cause is None:
            raise HTTPException(status_code=404, detail=f"no cause {cause_id!r}; see GET /v1/causes")
        # the KB already validated it (a resolved shared signature has both `use` and `regex`): serve it as is
        return Response(content=cause.model_dump_json(exclude={"examples"}), media_type="application/json")

    @app.get("/v1/frameworks", dependencies=[Depends(require_key)], responses=unauthorized, tags=["knowledge base"],
             summary="List the frameworks")
    def list_frameworks() -> list[dict[str, Any]]:
        """Frameworks the advisor writes snippets for, with their timeout knobs and formats."""
        return [fw.model_dump(mode="json", exclude={"detect", "versions"}) for fw in kb.frameworks.values()]

    @app.get("/v1/questions", dependencies=[Depends(require_key)], responses=unauthorized, tags=["knowledge base"],
             summary="List the questions")
    def list_questions() -> list[dict[str, Any]]:
        """The guided questions and their ids (the keys of `answers`)."""
        from advisor.models import Facts
        from advisor.questions import question_text

        return [{**q.model_dump(mode="json"), "text": question_text(kb, q, Facts())} for q in kb.questions.values()]

    @app.get("/healthz", tags=["service"], summary="Health check")
    def healthz() -> dict[str, Any]:
        """Liveness and the KB in use (open without the API key, for load balancers)."""
        return {"status": "ok", "version": __version__, "kb": kb.digest, "causes": len(kb.causes)}

    build_schema = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            generated = build_schema()
            for name, component in generated.get("components", {}).get("schemas", {}).items():
                if name not in REQUEST_SCHEMAS:
                    _open_for_new_fields(component)
            app.openapi_schema = generated
        return app.openapi_schema

    app.openapi = openapi
    return app


def _read_env(body: dict[str, Any]) -> EnvSnapshot:
    """The request's env snapshot through the same model as `--env FILE`; a bad one is a 422 naming
    the field."""
    from pydantic import ValidationError

    from advisor.envfile import SNAPSHOT_KIND

    if body.get("kind") not in (None, SNAPSHOT_KIND):
        raise HTTPException(status_code=422, detail=[{"field": "env.kind", "message": f"expected {SNAPSHOT_KIND!r}: "
                                                      "send what `advisor env --json` prints"}])
    try:
        return EnvSnapshot.model_validate(body)
    except ValidationError as exc:
        raise HTTPException(status_code=422, detail=[
            {"field": ".".join(["env", *map(str, e["loc"])]), "message": e["msg"]} for e in exc.errors()[:20]]) from None


def _read_dumps(bodies: list[dict[str, Any]]) -> list:
    """The request's dumps through the same checks as files; a bad one is a 422 naming it."""
    from advisor.fr_dumps import DumpError, parse_dump_object

    def refuse(field: str, message: str) -> HTTPException:
        return HTTPException(status_code=422, detail=[{"field": field, "message": message}])

    dumps, seen = [], set()
    for i, item in enumerate(bodies):
        extra = sorted(set(item) - {"rank", "trace"})
        if extra:
            raise HTTPException(status_code=422, detail=[{"field": f"dumps.{i}.{k}", "message": "Extra inputs are not permitted"}
                                                         for k in extra[:20]])
        rank, trace = item.get("rank"), item.get("trace")
        if isinstance(rank, float) and rank.is_integer():
            rank = int(rank)
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < MAX_DUMP_RANK:
            raise refuse(f"dumps.{i}.rank", f"a rank number from 0 to {MAX_DUMP_RANK - 1}")
        if not isinstance(trace, dict):
            raise refuse(f"dumps.{i}.trace", "the dump as a JSON object (pickles are not accepted over HTTP)")
        if rank in seen:
            raise refuse(f"dumps.{i}.rank", f"rank {rank} is given twice")
        seen.add(rank)
        try:
            dumps.append(parse_dump_object(trace, rank, f"dumps[{i}]"))
        except DumpError as exc:
            raise refuse(f"dumps.{i}.trace", str(exc)) from None
    return dumps


def app_from_env() -> FastAPI:
    """uvicorn factory for `advisor serve --workers N` (each worker builds its own app)."""
    return create_app()


def serve(host: str, port: int, workers: int, kb_dirs: list[str]) -> int:
    """Validate the KB, then run uvicorn; a broken KB stops here with the file and field."""
    import sys

    import uvicorn

    from advisor.knowledge import ENV_KB_PATH, KBInvalid

    if kb_dirs:
        os.environ[ENV_KB_PATH] = os.pathsep.join([*kb_dirs, *filter(None, [os.environ.get(ENV_KB_PATH)])])
    try:
        load_kb()
    except KBInvalid as exc:
        sys.stderr.write(f"advisor serve: refusing to start: {exc}\n")
        return 4
    uvicorn.run("advisor.api:app_from_env", factory=True, host=host, port=port, workers=max(1, workers),
                log_level="info", access_log=True)
    return 0
