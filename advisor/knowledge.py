"""Loading and validating the knowledge base: every error names the file and the field.

The built-in KB ships inside the package (`advisor/kb` in a wheel; the repository's top-level
`kb/` in a source checkout). Teams add their own cause and framework files with `--kb DIR` or the
`ADVISOR_KB_PATH` environment variable (several directories separated by the OS path separator);
a team file whose id equals a built-in one replaces it.

YAML is only ever loaded with the safe loader, files over 1 MiB are refused, and anchors/aliases
are refused too (a "billion laughs" file would otherwise make every later walk exponential).
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from pydantic import BaseModel, ValidationError

from advisor import schema
from advisor.regex import PatternError, compile_pattern

ENV_KB_PATH = "ADVISOR_KB_PATH"
ENV_CACHE_DIR = "ADVISOR_CACHE_DIR"
MAX_KB_FILE = 1 << 20
CACHE_FORMAT = 3
CACHE_KEEP = 8  # KB caches kept on disk (one per KB content + extra-dir set)

class KBError(Exception):
    """One problem in one KB file, at one field."""

    def __init__(self, file: str | Path, field: str, message: str):
        self.file = str(file)
        self.field = field
        self.message = message
        super().__init__(f"{self.file}: {field}: {message}")


class KBInvalid(Exception):
    """The KB failed validation; `errors` lists every problem found, not just the first."""

    def __init__(self, errors: list[KBError]):
        self.errors = errors
        lines = "\n".join(f"  - {e}" for e in errors[:50])
        more = f"\n  ... and {len(errors) - 50} more" if len(errors) > 50 else ""
        super().__init__(f"the knowledge base has {len(errors)} error(s):\n{lines}{more}")


def builtin_kb_dir() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (here / "kb", here.parent / "kb"):
        if (candidate / "codes.yaml").is_file():
            return candidate
    raise KBInvalid([KBError(here / "kb", "(directory)", "the built-in knowledge base is missing from this installation")])


def extra_kb_dirs(cli_dirs: Iterable[str | Path] = ()) -> list[Path]:
    dirs = [Path(d) for d in cli_dirs]
    env = os.environ.get(ENV_KB_PATH, "")
    dirs += [Path(d) for d in env.split(os.pathsep) if d.strip()]
    return dirs


# --- safe YAML --------------------------------------------------------------------------------


def load_yaml(path: Path) -> Any:
    import yaml  # only when the KB is parsed, not when it comes from the cache

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: faster, same safety
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise KBError(path, "(file)", f"cannot read: {exc.strerror or exc}") from None
    if size > MAX_KB_FILE:
        raise KBError(path, "(file)", f"{size} bytes is over the {MAX_KB_FILE}-byte limit for a KB file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise KBError(path, "(file)", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise KBError(path, "(file)", f"cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None) or ""
        if context.startswith("while scanning") and getattr(exc, "context_mark", None) is not None:
            # a token left open (a quote, a block scalar): where it starts, not where the file ran out
            mark = exc.context_mark
            problem = f"{problem} {context} that starts here (is a quote or bracket left open?)"
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(parse)"
        raise KBError(path, where, f"invalid YAML: {problem}") from None
    _refuse_aliases(path, data)
    return data


def _refuse_aliases(path: Path, data: Any) -> None:
    """Aliases make PyYAML share one object between places: find any container seen twice."""
    seen: set[int] = set()
    stack = [(data, "(top level)")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, (dict, list)):
            if id(node) in seen:
                raise KBError(path, where, "YAML anchors and aliases are not allowed in KB files")
            seen.add(id(node))
            items = node.items() if isinstance(node, dict) else enumerate(node)
            for key, child in items:
                stack.append((child, f"{where}.{key}" if where != "(top level)" else str(key)))


def _validate(model: type[BaseModel], data: Any, path: Path) -> Any:
    if not isinstance(data, dict):
        raise KBInvalid([KBError(path, "(top level)", f"expected a mapping, got {type(data).__name__}")])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = []
        for err in exc.errors():
            loc = schema.describe_field(err["loc"])
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown key (misspelled? see the KB guide in kb/README.md)"
            errors.append(KBError(path, loc, msg))
        raise KBInvalid(errors) from None


# --- the KB -----------------------------------------------------------------------------------


@dataclass
class KnowledgeBase:
    codes: dict[str, str]
    causes: dict[str, schema.Cause]
    frameworks: dict[str, schema.Framework]
    phase_cues: list[schema.PhaseCue]
    questions: dict[str, schema.Question]
    sources: dict[str, Path] = field(default_factory=dict)
    """KB object id -> the file it came from (for error messages)."""
    digest: str = ""
    atoms: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    """probe pattern -> required literal atoms, computed once and cached with the KB."""
    messages: dict[str, schema.Message] = field(default_factory=dict)
    """the message catalogue (kb/messages/): message id -> message."""
    message_files: dict[str, dict[str, Any]] = field(default_factory=dict)
    """component -> its file's software, title and the artifacts it was mined from."""
    message_owners: dict[str, tuple[tuple[str, schema.Signature], ...]] = field(default_factory=dict)
    """message id -> the (cause id, signature) pairs it is evidence for (from `points_to`, or a
    cause's own signature that `use`s it, whose weight then wins)."""
    timers: dict[str, schema.Timer] = field(default_factory=dict)
    """kb/timers.yaml: every clock that can end or stall a job, and the settings that feed them."""
    release_notes: dict[str, schema.SoftwareReleases] = field(default_factory=dict)
    """kb/releases/<software>.yaml: the fixes each release of that software shipped (NCCL)."""

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("probe_table", None)  # compiled RE2 programs: rebuilt on demand
        state.pop("similar_references", None)
        return state

    def framework_id(self, name: str | None) -> str | None:
        """A framework id from an id, a display name or an alias (case-insensitive)."""
        if not name:
            return None
        key = name.strip().lower().replace("_", "-")
        for fw in self.frameworks.values():
            names = {fw.id, fw.name.lower(), *(a.lower().replace("_", "-") for a in fw.aliases)}
            if key in names:
                return fw.id
        return None

    @functools.cached_property
    def releases(self) -> dict[str, tuple[str, list[str]]]:
        """component -> (its software, every release of that software the catalogue was mined
        from, oldest first): what a message's `versions` are read against (advisor.dating)."""
        from advisor.dating import releases_of

        by_software: dict[str, list[str]] = {}
        for info in self.message_files.values():
            by_software.setdefault(info["software"], []).extend(m["artifact"] for m in info.get("mined_from", []))
        mined = {software: releases_of(artifacts) for software, artifacts in by_software.items()}
        return {component: (info["software"], mined[info["software"]]) for component, info in self.message_files.items()}

    @functools.cached_property
    def similar_references(self):
        """The texts the similar-text fallback compares a log with (advisor.similar), built once."""
        from advisor.similar import references

        return references(self)

    @functools.cached_property
    def probe_table(self):
        from advisor.dating import VERSION_FACTS
        from advisor.facts import fact_probes
        from advisor.scan import Probe, ProbeTable

        probes: list[Probe] = []
        # one probe per distinct pattern: a shared signature used by ten causes is matched once
        owners: dict[tuple[str, str, bool], list[tuple[str, schema.Signature]]] = {}
        for cause in self.causes.values():
            for sig in cause.signatures:
                if sig.from_message:
                    continue  # scanned once, as its catalogue message
                kind = "benign" if cause.benign else "signature"
                owners.setdefault((kind, sig.regex, sig.case_sensitive), []).append((cause.id, sig))
        for (kind, regex, case_sensitive), owned in owners.items():
            first_cause, first_sig = owned[0]
            probes.append(Probe(f"sig:{first_cause}:{first_sig.id}", regex, kind, first_cause, not case_sensitive, tuple(owned)))
        gated: set[str] = set()
        for msg in self.messages.values():
            owned = self.message_owners.get(msg.id, ())
            kind = "benign" if msg.role == "benign" else "message"
            component = msg.id.split(".", 1)[0]
            software = self.message_files.get(component, {}).get("software")
            if software in LINE_GATES:
                gated.add(software)
            # a message that points to a cause is searched for itself, also where its software's
            # gate would find its line: users paste NCCL's text without the `NCCL WARN` prefix, and a
            # small paste and a big log must find the same lines. One that only carries a fact or an
            # event rides on its gate's windows (NCCL's WARN/INFO lines), keeping the automaton small.
            # Messages whose wording dates a release of a versioned software (advisor.dating) are
            # searched too, so that the version does not depend on the path a log takes.
            behind_gate = software in LINE_GATES and component not in UNGATED_COMPONENTS
            dates = software in VERSION_FACTS and bool(msg.versions or msg.wording)
            searched = bool(owned) or (not behind_gate and bool(msg.captures or msg.sets or msg.event or dates))
            probes.append(Probe(f"msg:{msg.id}", msg.pattern, kind, owned[0][0] if owned else msg.id,
                                not msg.case_sensitive, (msg, owned), searched=searched))
        for software in sorted(gated):
            probes.append(Probe(f"gate:{software}", LINE_GATES[software], "gate", software, ignore_case=False))
        for i, cue in enumerate(self.phase_cues):
            probes.append(Probe(f"phase:{i}", cue.regex, "phase", cue.phase, not cue.case_sensitive, recurring="latest"))
        for fw in self.frameworks.values():
            for i, det in enumerate(fw.detect):
                probes.append(Probe(f"fw:{fw.id}:{i}", det.regex, "framework", fw.id, not det.case_sensitive, (fw.id, det.weight),
                                    recurring="first"))
            for i, ver in enumerate(fw.versions):
                probes.append(Probe(f"ver:{fw.id}:{i}", ver.regex, "version", fw.id, not ver.case_sensitive, recurring="first"))
        probes += fact_probes()
        return ProbeTable(probes, atoms=self.atoms)


def _kb_files(root: Path, sub: str) -> list[Path]:
    folder = root / sub
    return sorted(folder.glob("*.yaml")) if folder.is_dir() else []


def _collect(errors: list[KBError], fn, *args):
    try:
        return fn(*args)
    except KBError as exc:
        errors.append(exc)
    except KBInvalid as exc:
        errors.extend(exc.errors)
    return None


FINISHED_RUN = schema.Rule(
    when={"run_outcome": "finished"}, weight=-4.0,
    why="the run finished normally, so nothing failed: the log's messages are at most warnings")
"""Given to every failure cause (not to harmless ones) as it is loaded: a quiet log is a hang, a
crash reported elsewhere, or a healthy run, and only its owner knows which (the run_outcome
question). One rule here rather than a copy in each cause file, and a cause may state its own."""


def with_finished_run_rule(cause: schema.Cause) -> schema.Cause:
    if cause.benign or any("run_outcome" in r.when for r in cause.rules):
        return cause
    return cause.model_copy(update={"rules": [*cause.rules, FINISHED_RUN]})


def load_kb(extra_dirs: Iterable[str | Path] = ()) -> KnowledgeBase:
    """Load, validate and cross-check the built-in KB plus any team directories.

    The validated KB is cached in memory and on disk (a pickle under the user's cache directory,
    keyed by a hash of every KB file's *content*), so the CLI starts fast and an edited KB file is
    never served stale.
    """
    extra = tuple(str(Path(d)) for d in extra_kb_dirs(extra_dirs))
    return _load_cached(extra, _fingerprint(extra))


def _fingerprint(extra: tuple[str, ...]) -> str:
    """A hash of every KB file's path and content, plus the code version that reads them."""
    from advisor import __version__

    h = hashlib.sha256(f"{__version__}:{CACHE_FORMAT}".encode())
    # the code that shapes the cached object: a changed reader must never get a stale pickle
    here = Path(__file__).resolve().parent
    for name in ("knowledge.py", "schema.py", "regex.py", "facts.py", "catalogue.py"):
        try:
            h.update((here / name).read_bytes())
        except OSError:
            h.update(name.encode())
    for root in (builtin_kb_dir(), *map(Path, extra)):
        if not root.is_dir():
            h.update(f"missing:{root}".encode())
            continue
        for path in sorted(root.rglob("*.yaml")) + sorted(root.glob("recorded/*.log")):
            try:
                data = path.read_bytes()
            except OSError:
                continue
            h.update(f"{path}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()


def _cache_file(fingerprint: str) -> Path | None:
    if os.environ.get("ADVISOR_NO_CACHE"):
        return None
    base = os.environ.get(ENV_CACHE_DIR) or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "nccl-advisor")
    return Path(base) / f"kb-{fingerprint[:32]}.pickle"


def _read_cache(path: Path | None) -> KnowledgeBase | None:
    """A cached KB, only from a file this user owns and nobody else can write."""
    import pickle

    if path is None:
        return None
    try:
        st = path.stat()
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return None
        kb = pickle.loads(path.read_bytes())  # noqa: S301 - our own file, checked above
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return None
    try:
        os.utime(path)  # mark it used, so pruning keeps the caches that are still read
    except OSError:
        pass
    return kb if isinstance(kb, KnowledgeBase) else None


def _write_cache(path: Path | None, kb: KnowledgeBase) -> None:
    import pickle
    import tempfile

    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".kb-", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(kb, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
        _prune_cache(path.parent)
    except OSError:
        pass  # a read-only home only costs start-up time


def _prune_cache(directory: Path, keep: int = CACHE_KEEP) -> None:
    """Drop all but the newest `keep` KB caches: every KB or advisor upgrade writes a new one."""
    entries = []
    for entry in directory.glob("kb-*.pickle"):
        try:
            entries.append((entry.stat().st_mtime, entry))
        except OSError:
            continue
    for _, stale in sorted(entries, reverse=True)[keep:]:
        try:
            stale.unlink()
        except OSError:
            pass


@functools.lru_cache(maxsize=8)
def _load_cached(extra: tuple[str, ...], fingerprint: str) -> KnowledgeBase:
    cache = _cache_file(fingerprint)
    kb = _read_cache(cache)
    if kb is None:
        kb = _load_and_validate(extra)
        _write_cache(cache, kb)
    return kb


def _load_and_validate(extra: tuple[str, ...]) -> KnowledgeBase:
    errors: list[KBError] = []
    root = builtin_kb_dir()
    digest = hashlib.sha256()

    def read(path: Path, model: type[BaseModel]):
        data = _collect(errors, load_yaml, path)
        if data is None:
            return None
        digest.update(path.name.encode())
        digest.update(repr(data).encode())
        return _collect(errors, _validate, model, data, path)

    codes_file = root / "codes.yaml"
    codes_model = read(codes_file, schema.Codes)
    codes = dict(codes_model.causes) if codes_model else {}
    phases_model = read(root / "phases.yaml", schema.PhaseCues)
    questions_model = read(root / "questions.yaml", schema.Questions)
    shared_model = read(root / "signatures.yaml", schema.SharedSignatures)
    timers_file = root / "timers.yaml"
    timers_model = read(timers_file, schema.Timers) if timers_file.is_file() else None
    shared = {sig.id: sig for sig in shared_model.signatures} if shared_model else {}
    sources: dict[str, Path] = {}
    messages, message_files = _load_messages([root] + [Path(d) for d in extra if Path(d).is_dir()], read, errors)
    release_notes = {}
    for path in sorted((root / "releases").glob("*.yaml")):
        notes = read(path, schema.SoftwareReleases)
        if notes is not None:
            release_notes[notes.software] = notes
            sources["releases:" + notes.software] = path

    causes: dict[str, schema.Cause] = {}
    frameworks: dict[str, schema.Framework] = {}
    roots = [root] + [Path(d) for d in extra]
    for i, kb_root in enumerate(roots):
        if i and not kb_root.is_dir():
            problem = ("is a file, not a KB directory: give the directory that holds your cause files (causes/*.yaml)"
                       if kb_root.exists() else "no such KB directory")
            errors.append(KBError(kb_root, "(directory)", f"{problem} (from --kb or ${ENV_KB_PATH})"))
            continue
        cause_files = _kb_files(kb_root, "causes") + ([] if i == 0 else [p for p in sorted(kb_root.glob("*.yaml"))])
        for path in cause_files:
            cause = read(path, schema.Cause)
            if cause is None:
                continue
            cause = _resolve_shared(cause, shared, messages, path, errors)
            cause = _read_recorded(cause, kb_root, path, errors)
            cause = with_finished_run_rule(cause)
            if cause.id in causes and i == 0:
                errors.append(KBError(path, "id", f"duplicate cause id {cause.id!r} (also in {sources[cause.id]})"))
            causes[cause.id] = cause
            sources[cause.id] = path
        for path in _kb_files(kb_root, "frameworks"):
            fw = read(path, schema.Framework)
            if fw is None:
                continue
            if fw.id in frameworks and i == 0:
                errors.append(KBError(path, "id", f"duplicate framework id {fw.id!r}"))
            frameworks[fw.id] = fw
            sources["framework:" + fw.id] = path

    kb = KnowledgeBase(
        codes=codes,
        causes=causes,
        frameworks=frameworks,
        phase_cues=list(phases_model.cues) if phases_model else [],
        questions={q.id: q for q in questions_model.questions} if questions_model else {},
        sources=sources,
        digest=digest.hexdigest()[:16],
        messages=messages,
        message_files=message_files,
        timers={t.id: t for t in timers_model.timers} if timers_model else {},
        release_notes=release_notes,
    )
    kb.message_owners = _message_owners(kb)
    sources["codes"] = codes_file
    sources["phases"] = root / "phases.yaml"
    sources["questions"] = root / "questions.yaml"
    sources["signatures"] = root / "signatures.yaml"
    sources["timers"] = timers_file
    errors.extend(cross_check(kb))
    errors.extend(check_timers(kb))
    if errors:
        raise KBInvalid(errors)
    from advisor.regex import required_atoms

    kb.atoms = {p.pattern: required_atoms(p.pattern) for p in kb.probe_table.probes}
    kb.__dict__.pop("probe_table", None)  # rebuilt with the atoms on first use
    return kb


def _load_messages(roots: list[Path], read, errors: list[KBError]) -> tuple[dict[str, schema.Message], dict[str, dict[str, Any]]]:
    """Every kb/messages/<component>.yaml of the built-in KB and the team directories."""
    messages: dict[str, schema.Message] = {}
    files: dict[str, dict[str, Any]] = {}
    for kb_root in roots:
        for path in _kb_files(kb_root, "messages"):
            model = read(path, schema.MessageFile)
            if model is None:
                continue
            if model.component != path.stem:
                errors.append(KBError(path, "component", f"{model.component!r} must equal the file name ({path.stem!r})"))
            files[model.component] = {
                "software": model.software, "title": model.title, "path": str(path),
                "mined_from": [m.model_dump() for m in model.mined_from],
                "defaults": [d.model_dump() for d in model.defaults],
            }
            for i, msg in enumerate(model.messages):
                if msg.id.split(".", 1)[0] != model.component:
                    errors.append(KBError(path, f"messages[{i}].id", f"{msg.id!r} must start with {model.component + '.'!r}"))
                if msg.id in messages and files.get(msg.id.split(".", 1)[0], {}).get("path") != str(path):
                    pass  # a team file replacing a built-in message
                elif msg.id in messages:
                    errors.append(KBError(path, f"messages[{i}].id", f"duplicate message id {msg.id!r}"))
                messages[msg.id] = msg
    return messages, files


LINE_GATES = {"nccl": r"\bNCCL (?:WARN|INFO)\b|Last error:[ \t]*\n[^\n]{3}", "aws-ofi-nccl": r"\bNCCL (?:WARN|INFO) NET/OFI ",
              "libfabric": r"\blibfabric:\d+:\d+:|\bNCCL (?:WARN|INFO) NET/OFI "}
"""lines that hold a software's messages: NCCL prints each with `NCCL WARN`/`NCCL INFO`, and torch
repeats the last one on the line after `Last error:`; aws-ofi-nccl logs through NCCL's logger with its
own `NET/OFI ` prefix; libfabric's EFA error texts come in libfabric's own lines (`libfabric:PID:TS::efa:...<warn>`)
or inside aws-ofi-nccl's. A message that neither points to a cause nor
carries a fact or an event is not searched for itself (that keeps the scanner's automaton small): it
is a passenger, explained on the lines other probes, or its software's gate, find."""

UNGATED_COMPONENTS = frozenset({"nccl-errors"})
"""components of gated software whose texts are printed without the marker (ncclGetErrorString's
texts inside torch's exceptions): searched for themselves."""

GENERIC_BENIGN = "harmless-message"
"""the benign cause a `benign` message without `points_to` counts for."""


def _message_owners(kb: "KnowledgeBase") -> dict[str, tuple[tuple[str, schema.Signature], ...]]:
    """Who each message is evidence for: a cause's own signature that `use`s the message wins over
    the message's `points_to` weight for that cause."""
    own: dict[str, dict[str, schema.Signature]] = {}
    for cause in kb.causes.values():
        for sig in cause.signatures:
            if sig.from_message:
                own.setdefault(sig.from_message, {})[cause.id] = sig
    owners: dict[str, tuple[tuple[str, schema.Signature], ...]] = {}
    for msg in kb.messages.values():
        mine = dict(own.get(msg.id, {}))
        targets = list(msg.points_to) or component_defaults(kb, msg)
        if msg.role == "benign" and not targets and GENERIC_BENIGN in kb.causes:
            targets = [schema.PointsTo(cause=GENERIC_BENIGN, weight=3)]
        for target in targets:
            if target.cause in mine or target.cause not in kb.causes:
                continue  # a cause's own use wins; an unknown cause is reported by cross_check
            mine[target.cause] = schema.Signature(
                id=msg.id, regex=msg.pattern, weight=target.weight, case_sensitive=msg.case_sensitive,
                captures=msg.captures, event=msg.event, note=msg.source, from_message=msg.id,
            )
        owners[msg.id] = tuple(sorted(mine.items()))
    return owners


def component_defaults(kb: "KnowledgeBase", msg: schema.Message) -> list[schema.PointsTo]:
    """The component's default causes for a warning or error its entry leaves as context."""
    if msg.role != "context" or msg.level == "info" or msg.event == "cascade":
        return []
    info = kb.message_files.get(msg.id.split(".", 1)[0], {})
    return [schema.PointsTo(**d) for d in info.get("defaults", [])]


def _read_recorded(cause: schema.Cause, kb_root: Path, path: Path, errors: list[KBError]) -> schema.Cause:
    """Examples that name a recorded run get its log (kb/recorded/<run>.log), as the software printed it."""
    if not any(ex.recorded for kind in ("positive", "negative") for ex in getattr(cause.examples, kind)):
        return cause
    lists = {}
    for kind in ("positive", "negative"):
        out = []
        for i, ex in enumerate(getattr(cause.examples, kind)):
            if ex.recorded:
                file = kb_root / "recorded" / f"{ex.recorded}.log"
                try:
                    ex = ex.model_copy(update={"log": file.read_text(encoding="utf-8")})
                except OSError:
                    errors.append(KBError(path, f"examples.{kind}[{i}].recorded", f"no recorded run {ex.recorded!r} ({file})"))
            out.append(ex)
        lists[kind] = out
    return cause.model_copy(update={"examples": cause.examples.model_copy(update=lists)})


def _resolve_shared(cause: schema.Cause, shared: dict[str, schema.SharedSignature], messages: dict[str, schema.Message],
                    path: Path, errors: list[KBError]) -> schema.Cause:
    """Fill in signatures that `use` a shared signature or a catalogue message (its regex, case and
    event; the cause's own weight)."""
    if not any(sig.use for sig in cause.signatures):
        return cause
    resolved = []
    for i, sig in enumerate(cause.signatures):
        if sig.use is None:
            resolved.append(sig)
            continue
        msg = messages.get(sig.use)
        if msg is not None:
            resolved.append(sig.model_copy(update={
                "regex": msg.pattern, "case_sensitive": msg.case_sensitive, "event": sig.event or msg.event,
                "captures": {**msg.captures, **sig.captures}, "note": sig.note or msg.source, "from_message": msg.id,
            }))
            continue
        base = shared.get(sig.use)
        if base is None:
            errors.append(KBError(path, f"signatures[{i}].use", f"no shared signature or catalogue message {sig.use!r}"))
            continue
        resolved.append(sig.model_copy(update={
            "regex": base.regex, "case_sensitive": base.case_sensitive,
            "event": sig.event or base.event, "note": sig.note or base.note,
        }))
    return cause.model_copy(update={"signatures": resolved})


def cross_check(kb: KnowledgeBase) -> list[KBError]:
    """What a schema alone cannot see: codes, fact names, regexes, knobs, calculators, ids."""
    from advisor.facts import FACTS
    from advisor.snippets import KNOBS
    from advisor.tuning import CALCULATORS

    errors: list[KBError] = []
    fact_names = set(FACTS)

    def regex_ok(file: Path, where: str, pattern: str, ignore_case: bool, groups: set[str] = frozenset()) -> None:
        try:
            compiled = compile_pattern(pattern, ignore_case)
        except PatternError as exc:
            errors.append(KBError(file, where, f"RE2 cannot compile this pattern: {exc}"))
            return
        missing = groups - set(compiled.groupindex)
        if missing:
            errors.append(KBError(file, where, f"the pattern needs the named group(s) {sorted(missing)}"))

    for cause in kb.causes.values():
        f = kb.sources[cause.id]
        if kb.codes and cause.code not in kb.codes:
            errors.append(KBError(f, "code", f"{cause.code!r} is not a code in codes.yaml"))
        sig_ids = set()
        for i, sig in enumerate(cause.signatures):
            if sig.id in sig_ids:
                errors.append(KBError(f, f"signatures[{i}].id", f"duplicate signature id {sig.id!r}"))
            sig_ids.add(sig.id)
            regex_ok(f, f"signatures[{i}].regex", sig.regex, not sig.case_sensitive, set(sig.captures))
            if sig.unless is not None:
                regex_ok(f, f"signatures[{i}].unless", sig.unless, not sig.case_sensitive)
            for group, fact in sig.captures.items():
                if fact not in fact_names:
                    errors.append(KBError(f, f"signatures[{i}].captures.{group}", f"unknown fact {fact!r}"))
        for name in cause.requires:
            if name not in fact_names:
                errors.append(KBError(f, f"requires.{name}", f"unknown fact {name!r}; known facts: see advisor.facts.FACTS"))
        for i, rule in enumerate(cause.rules):
            for name, cond in rule.when.items():
                if name not in fact_names:
                    errors.append(KBError(f, f"rules[{i}].when.{name}", f"unknown fact {name!r}; known facts: see advisor.facts.FACTS"))
                    continue
                spec = FACTS[name]
                if spec.kind == "version" and isinstance(cond, str):
                    try:
                        from advisor.versions import parse_specifier

                        parse_specifier(cond)
                    except ValueError as exc:
                        errors.append(KBError(f, f"rules[{i}].when.{name}", str(exc)))
                if spec.domain and isinstance(cond, (str, list)):
                    values = cond if isinstance(cond, list) else [cond]
                    bad = [v for v in values if str(v) not in spec.domain]
                    if bad:
                        errors.append(KBError(f, f"rules[{i}].when.{name}", f"{bad} not in {list(spec.domain)}"))
        for i, fix in enumerate(cause.fixes):
            for j, setting in enumerate(fix.settings):
                where = f"fixes[{i}].settings[{j}]"
                if setting.knob and setting.knob not in KNOBS:
                    errors.append(KBError(f, where + ".knob", f"unknown knob {setting.knob!r}; known: {sorted(KNOBS)}"))
                if setting.from_fact and setting.from_fact not in fact_names:
                    errors.append(KBError(f, where + ".from_fact", f"unknown fact {setting.from_fact!r}"))
                if isinstance(setting.value, schema.Calc) and setting.value.calc not in CALCULATORS:
                    errors.append(KBError(f, where + ".value.calc", f"unknown calculator {setting.value.calc!r}; known: {sorted(CALCULATORS)}"))
            for name in fix.applies.frameworks:
                if name not in kb.frameworks:
                    errors.append(KBError(f, f"fixes[{i}].applies.frameworks", f"unknown framework {name!r}"))
            for key in ("torch", "nccl", "framework_version"):
                spec = getattr(fix.applies, key)
                if spec:
                    try:
                        from advisor.versions import parse_specifier

                        parse_specifier(spec)
                    except ValueError as exc:
                        errors.append(KBError(f, f"fixes[{i}].applies.{key}", str(exc)))
        for kind in ("positive", "negative"):
            for i, ex in enumerate(getattr(cause.examples, kind)):
                for key in ex.answers:
                    if key not in kb.questions:
                        errors.append(KBError(f, f"examples.{kind}[{i}].answers.{key}", f"unknown question id {key!r}"))
                if ex.expect_top and ex.expect_top not in kb.causes:
                    errors.append(KBError(f, f"examples.{kind}[{i}].expect_top", f"unknown cause id {ex.expect_top!r}"))
    for fw in kb.frameworks.values():
        f = kb.sources["framework:" + fw.id]
        for i, det in enumerate(fw.detect):
            regex_ok(f, f"detect[{i}].regex", det.regex, not det.case_sensitive)
        for i, ver in enumerate(fw.versions):
            regex_ok(f, f"versions[{i}].regex", ver.regex, not ver.case_sensitive, {"version"})
        for name in fw.knobs:
            if name not in KNOBS:
                errors.append(KBError(f, f"knobs.{name}", f"unknown knob {name!r}; known: {sorted(KNOBS)}"))
        for name in fw.builds_on:
            if name not in kb.frameworks:
                errors.append(KBError(f, "builds_on", f"unknown framework {name!r}"))
    for i, cue in enumerate(kb.phase_cues):
        regex_ok(kb.sources["phases"], f"cues[{i}].regex", cue.regex, not cue.case_sensitive)
    for qid, q in kb.questions.items():
        if q.fact not in fact_names:
            errors.append(KBError(kb.sources["questions"], f"questions.{qid}.fact", f"unknown fact {q.fact!r}"))
        for name in q.ask_when:
            if name not in fact_names:
                errors.append(KBError(kb.sources["questions"], f"questions.{qid}.ask_when.{name}", f"unknown fact {name!r}"))
    errors.extend(_check_messages(kb, regex_ok, fact_names))
    if kb.codes:
        covered = {c.code for c in kb.causes.values()}
        for code in kb.codes:
            if code not in covered:
                errors.append(KBError(kb.sources["codes"], f"causes.{code}", "no KB cause declares this code"))
    return errors


def _check_messages(kb: KnowledgeBase, regex_ok, fact_names: set[str]) -> list[KBError]:
    """Each catalogue message against its own wording, examples and near misses; its causes, facts
    and version ranges; and no pattern that claims another message's wording."""
    from advisor.catalogue import check_message, collisions, instances
    from advisor.versions import parse_specifier

    errors: list[KBError] = []
    where_of: dict[str, tuple[Path, int]] = {}
    for name, info in kb.message_files.items():
        ids = [m for m in kb.messages.values() if m.id.split(".", 1)[0] == name]
        for i, msg in enumerate(ids):
            where_of[msg.id] = (Path(info["path"]), i)
    for msg in kb.messages.values():
        path, i = where_of.get(msg.id, (Path("messages"), 0))
        at = f"messages[{i}]"
        for field_name, problem in check_message(msg):
            errors.append(KBError(path, f"{at}.{field_name}", f"{msg.id}: {problem}"))
        for group, fact in msg.captures.items():
            if fact not in fact_names:
                errors.append(KBError(path, f"{at}.captures.{group}", f"unknown fact {fact!r}"))
        for j, target in enumerate(msg.points_to):
            if target.cause not in kb.causes:
                errors.append(KBError(path, f"{at}.points_to[{j}].cause", f"unknown cause id {target.cause!r}"))
        if msg.role == "benign" and not msg.points_to and GENERIC_BENIGN not in kb.causes:
            errors.append(KBError(path, f"{at}.points_to", f"a benign message needs `points_to` or the {GENERIC_BENIGN!r} cause"))
        for j, general in enumerate(msg.refines):
            target = kb.messages.get(general)
            if target is None:
                errors.append(KBError(path, f"{at}.refines[{j}]", f"unknown message id {general!r}"))
            elif not (any(compile_pattern(target.pattern, not target.case_sensitive).search(t) for t in instances(msg))
                      or any(compile_pattern(msg.pattern, not msg.case_sensitive).search(t) for t in instances(target))):
                errors.append(KBError(path, f"{at}.refines[{j}]", f"{general} and this message share no line (neither "
                                      "pattern matches the other's instances): it is not an instance of that format"))
        for spec, field_name in [(msg.versions, "versions")] + [(w.versions, f"wording[{k}].versions") for k, w in enumerate(msg.wording)]:
            if spec:
                try:
                    parse_specifier(spec)
                except ValueError as exc:
                    errors.append(KBError(path, f"{at}.{field_name}", str(exc)))
    for name, info in kb.message_files.items():
        for j, target in enumerate(info.get("defaults", [])):
            if target["cause"] not in kb.causes:
                errors.append(KBError(Path(info["path"]), f"defaults[{j}].cause", f"unknown cause id {target['cause']!r}"))
    for msg_id, problem in collisions(kb.messages.values()):
        path, i = where_of.get(msg_id, (Path("messages"), 0))
        errors.append(KBError(path, f"messages[{i}].pattern", f"{msg_id}: {problem}"))
    return errors


def message_ids(kb: KnowledgeBase) -> dict[str, str]:
    """Every message id a timer may name in `messages`, with its pattern: a shared signature of
    signatures.yaml by its id (`collective-timeout`), a cause's own signature as
    `<cause>.<signature>` (`nccl-heartbeat-monitor.watchdog-stuck`). The one place that links the
    timer table to message formats: point it at the message catalogue once there is one."""
    ids: dict[str, str] = {}
    for cause in kb.causes.values():
        for sig in cause.signatures:
            if sig.use:
                ids.setdefault(sig.use, sig.regex or "")
            ids[f"{cause.id}.{sig.id}"] = sig.regex or ""
    return ids


def check_timers(kb: KnowledgeBase) -> list[KBError]:
    """The timer table's links: message ids, patterns, clocks named, frameworks, knobs, versions."""
    from advisor.facts import FACTS
    from advisor.snippets import KNOBS
    from advisor.versions import parse_specifier

    errors: list[KBError] = []
    f = kb.sources.get("timers", "timers.yaml")
    known_messages = message_ids(kb)
    trap_ids: set[str] = set()

    def spec_ok(where: str, spec: str | None) -> None:
        if spec:
            try:
                parse_specifier(spec)
            except ValueError as exc:
                errors.append(KBError(f, where, str(exc)))

    for timer in kb.timers.values():
        at = f"timers.{timer.id}"
        for i, mid in enumerate(timer.messages):
            if mid not in known_messages:
                errors.append(KBError(f, f"{at}.messages[{i}]", f"unknown message id {mid!r} (a shared signature id, or <cause>.<signature>)"))
        for i, fired in enumerate(timer.fired):
            try:
                compiled = compile_pattern(fired.regex, not fired.case_sensitive)
            except PatternError as exc:
                errors.append(KBError(f, f"{at}.fired[{i}].regex", f"RE2 cannot compile this pattern: {exc}"))
                continue
            extra = set(compiled.groupindex) - {"value", "unit"}
            if extra:
                errors.append(KBError(f, f"{at}.fired[{i}].regex", f"only the named groups `value` and `unit` are read, not {sorted(extra)}"))
        for key in ("feeds", "follows", "next"):
            target = getattr(timer, key)
            if target and target not in kb.timers:
                errors.append(KBError(f, f"{at}.{key}", f"unknown timer {target!r}"))
            elif target and kb.timers[target].kind != "clock":
                errors.append(KBError(f, f"{at}.{key}", f"{target!r} is a setting, not a clock"))
        if timer.framework and timer.framework not in kb.frameworks:
            errors.append(KBError(f, f"{at}.framework", f"unknown framework {timer.framework!r}"))
        if timer.knob and timer.knob not in KNOBS:
            errors.append(KBError(f, f"{at}.knob", f"unknown knob {timer.knob!r}; known: {sorted(KNOBS)}"))
        if timer.value_fact and timer.value_fact not in FACTS:
            errors.append(KBError(f, f"{at}.value_fact", f"unknown fact {timer.value_fact!r}"))
        for i, value in enumerate(timer.defaults):
            for key in ("torch", "nccl", "framework_version"):
                spec_ok(f"{at}.defaults[{i}].{key}", getattr(value, key))
            if value.framework_version and not timer.framework:
                errors.append(KBError(f, f"{at}.defaults[{i}].framework_version", "a framework version needs the timer's `framework`"))
        for i, trap in enumerate(timer.traps):
            if trap.id in trap_ids:
                errors.append(KBError(f, f"{at}.traps[{i}].id", f"duplicate trap id {trap.id!r}"))
            trap_ids.add(trap.id)
            for key in ("torch", "nccl", "framework_version"):
                spec_ok(f"{at}.traps[{i}].applies.{key}", getattr(trap.applies, key))
            for name in trap.applies.frameworks:
                if name not in kb.frameworks:
                    errors.append(KBError(f, f"{at}.traps[{i}].applies.frameworks", f"unknown framework {name!r}"))
        for i, example in enumerate(timer.examples):
            for key in example.answers:
                if key not in kb.questions:
                    errors.append(KBError(f, f"{at}.examples[{i}].answers.{key}", f"unknown question id {key!r}"))
            if example.value_from and example.value_from not in kb.timers:
                errors.append(KBError(f, f"{at}.examples[{i}].value_from", f"unknown timer {example.value_from!r}"))
    return errors
