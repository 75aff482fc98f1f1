"""Messages a Python source file can print, read from its syntax tree.

A message is the first argument of a `raise Error(...)`, a `logger.<level>(...)` / `logging.<level>(...)`,
a `warnings.warn(...)`, a `@deprecated(...)` decorator (PEP 702) or a `print(...)` call. Its text is the format as written: a plain string, an
f-string with `{expression}` placeholders, a `%`-format or a `.format()` string; a name bound to a
string in the same function is followed to its value. Placeholders the catalogue cannot render (calls,
operators) become `{}` so every text renders (see advisor.catalogue.render).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

LOG_LEVELS = {
    "error": "error", "exception": "error", "critical": "error", "fatal": "error",
    "warning": "warn", "warn": "warn", "info": "info",
}
LOGGER_NAMES = re.compile(r"^(?:_?log(?:ger)?|_?LOG(?:GER)?|logging|_?\w*_log(?:ger)?|self\._?log(?:ger)?)$")
SIMPLE_FIELD = re.compile(r"^[A-Za-z_][\w.]*(?:\[(?:'[^']*'|\"[^\"]*\"|\d+)\])*$")


@dataclass(frozen=True)
class Candidate:
    """One message a source file can print."""

    file: str  # path inside the wheel, e.g. torch/distributed/run.py
    line: int
    kind: str  # raise:<Type> | log:<method> | warn | print
    level: str  # error | warn | info
    text: str
    function: str


def _field(node: ast.AST) -> str:
    """A placeholder for an f-string value: the expression when it is a plain name/attribute."""
    try:
        src = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every expression the parser builds
        return "{}"
    return "{" + src + "}" if SIMPLE_FIELD.match(src) else "{}"


class _Texts:
    """Turns an expression into the message text(s) it can evaluate to."""

    def __init__(self, assigned: dict[str, list[tuple[ast.AST, ast.AST]]], parents: dict[ast.AST, ast.AST] | None = None):
        self.assigned = assigned
        self.parents = parents or {}
        self.at: ast.AST | None = None

    def _reaches(self, assign: ast.AST) -> bool:
        """An assignment reaches the message call when it comes first and the statement list holding it
        (a function body, one branch of an `if`, a loop body) encloses the call."""
        if self.at is None or not self.parents:
            return True
        if assign.lineno > self.at.lineno:
            return False
        block = self._block(assign)
        node = self.at
        while node in self.parents:
            if self._block(node) == block:
                return True
            node = self.parents[node]
        return False

    def _block(self, node: ast.AST) -> tuple[int, str]:
        parent = self.parents.get(node)
        for field, value in ast.iter_fields(parent) if parent is not None else ():
            if isinstance(value, list) and any(item is node for item in value):
                return (id(parent), field)
        return (id(parent), "")

    def of(self, node: ast.AST | None, depth: int = 0) -> list[str]:
        if node is None or depth > 4:
            return []
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.JoinedStr):
            out = ""
            for part in node.values:
                if isinstance(part, ast.Constant):
                    out += str(part.value)
                elif isinstance(part, ast.FormattedValue):
                    spec = ""
                    if part.format_spec is not None and isinstance(part.format_spec, ast.JoinedStr):
                        consts = [str(v.value) for v in part.format_spec.values if isinstance(v, ast.Constant)]
                        if len(consts) == len(part.format_spec.values):
                            spec = ":" + "".join(consts)
                    f = _field(part.value)
                    out += f[:-1] + spec + "}" if spec and f != "{}" else f
            return [out]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.of(node.left, depth + 1), self.of(node.right, depth + 1)
            left = left or ["{}"]
            right = right or ["{}"]
            if left == ["{}"] and right == ["{}"]:
                return []
            return [a + b for a in left[:3] for b in right[:3]]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return self.of(node.left, depth + 1)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "format":
                return self.of(func.value, depth + 1)
            if isinstance(func, ast.Attribute) and func.attr in ("dedent", "strip", "rstrip", "lstrip") and (node.args or func.attr != "dedent"):
                inner = node.args[0] if func.attr == "dedent" else func.value
                texts = self.of(inner, depth + 1)
                return [_dedent(t) for t in texts] if func.attr == "dedent" else [t.strip() for t in texts]
            if isinstance(func, ast.Attribute) and func.attr == "join" and node.args:
                return []
            return []
        if isinstance(node, ast.Name) and node.id in self.assigned:
            out: list[str] = []
            for assign, value in self.assigned[node.id]:
                if not self._reaches(assign):
                    continue
                for text in self.of(value, depth + 1):
                    if text not in out:
                        out.append(text)
            return out
        return []


_FIELDS = re.compile(r"\{[^{}]*\}|%[-#0 +]*\d*(?:\.\d+)?[sdrfix]")


def _wordy(text: str) -> bool:
    """A message worth a candidate: some words left once its placeholders are gone."""
    words = re.findall(r"[A-Za-z]{2,}", _FIELDS.sub(" ", text))
    return len(words) >= 2 or bool(re.fullmatch(r"[A-Z]\w+(?:Error|Exception)", text))


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text)


def _assignments(func: ast.AST) -> dict[str, list[tuple[ast.AST, ast.AST]]]:
    """name -> (assignment, string-valued expression) for each assignment in this function (`+=` extends the last)."""
    out: dict[str, list[tuple[ast.AST, ast.AST]]] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out.setdefault(node.targets[0].id, []).append((node, node.value))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.setdefault(node.target.id, []).append((node, node.value))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
            prev = out.get(node.target.id)
            if prev:
                first, value = prev[-1]
                prev[-1] = (first, ast.BinOp(left=value, op=ast.Add(), right=node.value))
    return out


def _call_name(func: ast.AST) -> tuple[str, str] | None:
    """(receiver, method) of a call such as logger.warning / warnings.warn / print."""
    if isinstance(func, ast.Name):
        return ("", func.id)
    if isinstance(func, ast.Attribute):
        try:
            return (ast.unparse(func.value), func.attr)
        except Exception:  # pragma: no cover
            return None
    return None


def messages(path: Path, rel: str) -> list[Candidate]:
    """Every message `path` can print, in source order."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return []
    out: list[Candidate] = []
    scopes: list[tuple[ast.AST, str]] = [(tree, "<module>")]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            scopes.append((node, node.name))
    seen: set[tuple[int, str]] = set()
    out.extend(_constants(tree, rel))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    for scope, name in scopes:
        texts = _Texts(_assignments(scope) if name != "<module>" else {}, parents)
        builds_message = any(w in name.lower() for w in ("msg", "message", "warning"))
        for node in _own_nodes(scope):
            found = _message_of(node, texts)
            if not found and builds_message and isinstance(node, ast.Return) and node.value is not None:
                found = ("return-msg", "warn", node.value)  # a helper that builds a warning's text
            if not found:
                continue
            kind, level, arg = found
            texts.at = node
            for text in texts.of(arg):
                text = text.strip("\n")
                key = (node.lineno, text)
                if not _wordy(text) or key in seen:
                    continue
                seen.add(key)
                out.append(Candidate(rel, node.lineno, kind, level, text, name))
    out.sort(key=lambda c: c.line)
    return out


CONST_NAME = re.compile(r"^_*[A-Z0-9_]*(?:TEMPLATE|MSG|MESSAGE|WARNING|ERROR|HINT)[A-Z0-9_]*$")
TEMPLATE_FIELD = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def _constants(tree: ast.Module, rel: str) -> list[Candidate]:
    """Message templates kept in module, class or method constants (`_MSG_FORMAT_TEMPLATE = \"\"\"...\"\"\"`),
    one candidate per line, `string.Template` fields turned into `{name}`."""
    out: list[Candidate] = []
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    # a method may hold its class's message in a local constant (vLLM < 0.33's EngineDeadError.__init__)
    bodies = [tree.body] + [c.body for c in classes] + [
        f.body for c in classes for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    texts = _Texts({})
    for body in bodies:
        for node in body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            name = node.targets[0].id
            if not CONST_NAME.match(name):
                continue
            for text in texts.of(node.value):
                for offset, line in enumerate(text.split("\n")):
                    line = TEMPLATE_FIELD.sub(lambda m: "{" + (m.group(1) or m.group(2)) + "}", line).rstrip()
                    if _wordy(line):
                        out.append(Candidate(rel, node.lineno + offset, f"const:{name}", "error", line.strip(), "<module>"))
    return out


def _own_nodes(scope: ast.AST):
    """The nodes of a scope, not descending into nested functions (they are scopes of their own)."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


MESSAGE_ATTRS = ("message", "msg", "_message", "error_msg", "err_msg")


def _message_of(node: ast.AST, texts: _Texts) -> tuple[str, str, ast.AST | None] | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute) \
            and node.targets[0].attr in MESSAGE_ATTRS:
        return (f"attr:{node.targets[0].attr}", "error", node.value)
    if isinstance(node, ast.Return) and isinstance(node.value, ast.Call) and node.value.args:
        name = _call_name(node.value.func)
        if name and name[1].endswith(("Error", "_error")):
            return (f"return:{name[1]}", "error", node.value.args[0])
    if isinstance(node, ast.Raise) and (isinstance(node.exc, (ast.Name, ast.Attribute))
                                        or isinstance(node.exc, ast.Call) and not node.exc.args and not node.exc.keywords):
        # a bare `raise RendezvousTimeoutError`: the traceback's last line is the class name alone
        target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        name = ast.unparse(target).rsplit(".", 1)[-1]
        if name.endswith(("Error", "Exception")) and name not in ("NotImplementedError", "AssertionError"):
            return ("raise-bare", "error", ast.Constant(value=name))
        return None
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
        exc = node.exc
        try:
            etype = ast.unparse(exc.func)
        except Exception:  # pragma: no cover
            etype = "?"
        arg = exc.args[0] if exc.args else next((k.value for k in exc.keywords if k.arg in ("msg", "message")), None)
        return (f"raise:{etype.rsplit('.', 1)[-1]}", "error", arg)
    if isinstance(node, ast.Call):
        name = _call_name(node.func)
        if name is None or not node.args:
            return None
        receiver, method = name
        if receiver == "warnings" and method == "warn" or receiver == "" and method == "warn":
            return ("warn", "warn", node.args[0])
        if method in ("deprecated", "_deprecated"):
            # typing_extensions.deprecated / warnings.deprecated (PEP 702) as a decorator: calling the
            # decorated function warns with its first argument (torch.distributed.launch's main, 2.4+)
            return ("warn", "warn", node.args[0])
        if receiver == "" and method == "print":
            return ("print", "info", node.args[0])
        if method in LOG_LEVELS and LOGGER_NAMES.match(receiver):
            return (f"log:{method}", LOG_LEVELS[method], node.args[0])
    return None


def tree_messages(root: Path, patterns: list[str]) -> list[Candidate]:
    """Messages of every file under `root` (a directory holding `torch/`) matching the globs."""
    out: list[Candidate] = []
    files: set[Path] = set()
    for pattern in patterns:
        files.update(p for p in root.glob(pattern) if p.suffix == ".py")
    for path in sorted(files):
        out.extend(messages(path, path.relative_to(root).as_posix()))
    return out
