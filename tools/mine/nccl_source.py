"""Read NCCL's C/C++ sources at a release tag and list every message it logs.

NCCL logs through the `WARN(fmt, ...)` and `INFO(flags, fmt, ...)` macros (src/include/debug.h); a
format may be built from adjacent string literals, `PRIx64`-style macros and, inside a helper macro
(`SYSCHECK(call, "shm_open")` prints `"Call to " name " failed : %s"`), a macro parameter. This
module lexes each file just enough to find those calls, joins the format's pieces the way the
compiler does, and expands the helper macros at their call sites, so the formats it returns are the
strings the released library holds (tools/mine/nccl.py checks them against the binaries).

`ncclGetErrorString`'s texts (src/init.cc) are read too: they are what torch prints after
`NCCL error in: ...`.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

LOG_MACROS = {"WARN": 0, "INFO": 1, "TRACE": 1}
"""logging macro -> index of its format argument."""

SOURCE_SUFFIXES = (".cc", ".cpp", ".cu", ".h", ".hpp", ".cuh")

# <inttypes.h> conversions as glibc on x86_64 spells them
_PRI = {f"PRI{c}{n}": ("l" if n == "64" else "") + c for c in "diouxX" for n in ("8", "16", "32", "64")}
_PRI.update({f"PRI{c}PTR": "l" + c for c in "diouxX"})


@dataclass
class Found:
    """One logging call site: its level, format text and where it is."""

    level: str  # warn | info | error
    text: str
    path: str
    line: int
    via: str = ""  # the helper macro that prints it, if any
    unresolved: list[str] = field(default_factory=list)  # identifiers in the format we could not resolve


# --- a small C lexer ------------------------------------------------------------------------------

_TOKEN = re.compile(
    r'(?P<str>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")'
    r"|(?P<chr>'(?:\\.|[^'\\\n])*')"
    r"|(?P<id>[A-Za-z_]\w*)"
    r"|(?P<num>\.?\d[\w.]*)"
    r"|(?P<nl>\n)"
    r"|(?P<ws>[ \t\r\f\v]+)"
    r"|(?P<punct>##|#|->|::|\+\+|--|<<=|>>=|<<|>>|[<>=!]=|&&|\|\||[-+*/%&|^]=|\.\.\.|.)",
    re.S,
)
_COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def _strip_comments(src: str) -> str:
    """Blank out comments, keeping newlines (line numbers) and string literals."""

    def repl(m: re.Match) -> str:
        s = m.group(0)
        if s[0] in "\"'":
            return s
        return re.sub(r"[^\n]", " ", s)

    return _COMMENT.sub(repl, src)


@dataclass
class Tok:
    kind: str
    val: str
    line: int


def _lex(src: str, first_line: int = 1) -> list[Tok]:
    toks: list[Tok] = []
    line = first_line
    for m in _TOKEN.finditer(src):
        kind = m.lastgroup
        if kind == "nl":
            line += 1
            continue
        if kind == "ws":
            continue
        toks.append(Tok(kind, m.group(0), line))
    return toks


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a", "0": "\0", "?": "?"}


def _unquote(literal: str) -> str:
    """The characters a C string literal stands for."""
    body = literal[literal.index('"') + 1 : -1]

    def one(m: re.Match) -> str:
        esc = m.group(1)
        if esc[0] == "x":
            return chr(int(esc[1:], 16))
        if esc[0].isdigit():
            return chr(int(esc, 8))
        return _ESCAPES.get(esc, esc)

    return re.sub(r"\\(x[0-9a-fA-F]+|[0-7]{1,3}|.)", one, body)


def _split_args(toks: list[Tok], open_at: int) -> tuple[list[list[Tok]], int]:
    """Arguments of the call whose `(` is toks[open_at]; returns (args, index after `)`)."""
    depth = 0
    args: list[list[Tok]] = [[]]
    i = open_at
    while i < len(toks):
        t = toks[i]
        if t.kind == "punct" and t.val in "([{":
            depth += 1
            if depth > 1:
                args[-1].append(t)
        elif t.kind == "punct" and t.val in ")]}":
            depth -= 1
            if depth == 0:
                return args, i + 1
            args[-1].append(t)
        elif t.kind == "punct" and t.val == "," and depth == 1:
            args.append([])
        else:
            args[-1].append(t)
        i += 1
    return args, i


def _format_of(arg: list[Tok], params: dict[str, str] | None = None) -> tuple[str | None, list[str]]:
    """The format an argument spells, or None when it is not built from literals.

    `params` maps a helper macro's parameter names to the text they stand for (a literal at the
    call site, or a `{param}` marker while the macro itself is being read)."""
    if not arg:
        return None, []
    pieces: list[str] = []
    unresolved: list[str] = []
    saw_literal = False
    for t in arg:
        if t.kind == "str":
            pieces.append(_unquote(t.val))
            saw_literal = True
        elif t.kind == "id" and t.val in _PRI:
            pieces.append(_PRI[t.val])
        elif t.kind == "id" and params is not None and t.val in params:
            pieces.append(params[t.val])
        elif t.kind == "id":
            pieces.append("%s")
            unresolved.append(t.val)
        else:
            return None, []
    if not saw_literal and not (params and any(t.kind == "id" and t.val in params for t in arg)):
        return None, []
    return "".join(pieces), unresolved


# --- helper macros --------------------------------------------------------------------------------

@dataclass
class Macro:
    name: str
    params: list[str]
    body: list[Tok]
    path: str
    line: int


def _logical_lines(src: str):
    """(first physical line, text) of each logical line (backslash continuations joined, with a
    newline kept per joined line so the lexer's count stays right)."""
    out = []
    lines = src.split("\n")
    i = 0
    while i < len(lines):
        start = i
        text = lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + "\n" + lines[i]
        out.append((start + 1, text))
        i += 1
    return out


def read_file(path: str, src: str) -> tuple[list[Tok], list[Macro]]:
    """Code tokens (directives removed) and the function-like macros a file defines."""
    src = _strip_comments(src)
    code_parts: list[str] = []
    macros: list[Macro] = []
    for first, text in _logical_lines(src):
        stripped = text.lstrip()
        if stripped.startswith("#"):
            m = re.match(r"#[ \t]*define[ \t]+([A-Za-z_]\w*)\(([^)]*)\)(.*)$", stripped, re.S)
            if m:
                params = [p.strip() for p in m.group(2).split(",") if p.strip()]
                macros.append(Macro(m.group(1), params, _lex(m.group(3), first), path, first))
            code_parts.append("\n" * (text.count("\n") + 1))
        else:
            code_parts.append(text + "\n")
    return _lex("".join(code_parts)), macros


# --- finding the calls ----------------------------------------------------------------------------

@dataclass
class Template:
    """A helper macro that logs: which of its parameters end up in which logged format."""

    macro: str
    level: str
    text: str  # format with {param} markers
    params: list[str]
    path: str
    line: int


def _calls(toks: list[Tok], names) -> list[tuple[str, int, list[list[Tok]]]]:
    out = []
    i = 0
    while i < len(toks) - 1:
        t = toks[i]
        if t.kind == "id" and t.val in names and toks[i + 1].val == "(" and not (i and toks[i - 1].val in (".", "->", "::")):
            args, end = _split_args(toks, i + 1)
            out.append((t.val, t.line, args))
            i += 2  # nested calls inside the arguments are found too
            continue
        i += 1
    return out


def _level(macro: str) -> str:
    """WARN -> warn; a plugin's own macros name their level last (NCCL_OFI_WARN -> warn)."""
    return macro.rsplit("_", 1)[-1].lower()


def templates_of(macros: list[Macro], log_macros: dict[str, int] | None = None) -> dict[str, list[Template]]:
    """Helper macros whose logged format takes a parameter, resolved through nesting
    (SYSCHECK -> SYSCHECKSYNC -> INFO)."""
    log_macros = log_macros or LOG_MACROS
    found: dict[str, list[Template]] = {}
    changed = True
    while changed:
        changed = False
        for mac in macros:
            markers = {p: "{" + p + "}" for p in mac.params}
            names = set(log_macros) | set(found)
            for name, line, args in _calls(mac.body, names):
                made: list[Template] = []
                if name in log_macros:
                    idx = log_macros[name]
                    if len(args) <= idx:
                        continue
                    text, _ = _format_of(args[idx], markers)
                    if text is not None and any(m in text for m in markers.values()):
                        made.append(Template(mac.name, _level(name), text, mac.params, mac.path, line))
                else:
                    for inner in found[name]:
                        text = inner.text
                        passed = False
                        for j, p in enumerate(inner.params):
                            if "{" + p + "}" not in inner.text or j >= len(args):
                                continue
                            arg = args[j]
                            if len(arg) == 1 and arg[0].kind == "id" and arg[0].val in mac.params:
                                text = text.replace("{" + p + "}", "\0{" + arg[0].val + "}")
                                passed = True
                            else:
                                lit, _ = _format_of(arg)
                                text = text.replace("{" + p + "}", lit if lit is not None and all(t.kind == "str" for t in arg) else "%s")
                        if passed:
                            made.append(Template(mac.name, inner.level, text.replace("\0", ""), mac.params, inner.path, inner.line))
                have = found.setdefault(mac.name, []) if made else []
                for tpl in made:
                    if all(h.text != tpl.text for h in have):
                        have.append(tpl)
                        changed = True
    return found


def extract(files: dict[str, str], log_macros: dict[str, int] | None = None) -> tuple[list[Found], dict[str, list[Template]]]:
    """Every logged format in a source tree given as {path: text}. `log_macros` (macro -> index of
    its format argument) defaults to NCCL's WARN/INFO/TRACE; a plugin passes its own."""
    log_macros = log_macros or LOG_MACROS
    parsed = {path: read_file(path, src) for path, src in files.items()}
    all_macros = [m for _, ms in parsed.values() for m in ms]
    templates = templates_of(all_macros, log_macros)
    results: list[Found] = []
    # formats inside macro bodies that are literal (CUDACHECK's "Cuda failure '%s'")
    for mac in all_macros:
        for name, line, args in _calls(mac.body, set(log_macros)):
            idx = log_macros[name]
            if len(args) <= idx:
                continue
            text, unresolved = _format_of(args[idx], {p: "{" + p + "}" for p in mac.params})
            if text is None or any("{" + p + "}" in text for p in mac.params):
                continue  # None: not a literal; a parameter in it: expanded at the call sites
            results.append(Found(_level(name), text, mac.path, line, via=mac.name, unresolved=unresolved))
    for path, (toks, _) in parsed.items():
        for name, line, args in _calls(toks, set(log_macros) | set(templates)):
            if name in log_macros:
                idx = log_macros[name]
                if len(args) <= idx:
                    continue
                text, unresolved = _format_of(args[idx])
                if text is None:
                    continue
                results.append(Found(_level(name), text, path, line, unresolved=unresolved))
                continue
            for tpl in templates[name]:
                values = {}
                for j, p in enumerate(tpl.params):
                    if j < len(args):
                        lit, _ = _format_of(args[j])
                        if lit is not None and all(t.kind == "str" for t in args[j]):
                            values[p] = lit
                text = tpl.text
                for p in tpl.params:
                    text = text.replace("{" + p + "}", values.get(p, "%s"))
                results.append(Found(tpl.level, text, path, line, via=name))
    return results, templates


_ERRSTR = re.compile(r"case\s+(nccl\w+)\s*:\s*return\s+((?:\"(?:\\.|[^\"\\])*\"\s*)+);")


def error_strings(init_cc: str) -> list[tuple[str, str, int]]:
    """(result code name, text, line) of ncclGetErrorString's switch."""
    start = init_cc.find("ncclGetErrorString(ncclResult_t")
    if start < 0:
        return []
    end = init_cc.find("\n}", start)
    body = init_cc[start:end]
    base = init_cc[:start].count("\n") + 1
    out = []
    for m in _ERRSTR.finditer(body):
        text = "".join(_unquote(s) for s in re.findall(r'"(?:\\.|[^"\\])*"', m.group(2)))
        out.append((m.group(1), text, base + body[: m.start()].count("\n")))
    return out


# --- reading a tag --------------------------------------------------------------------------------

def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, errors="replace").stdout


def tag_files(repo: Path, tag: str) -> dict[str, str]:
    """{path: text} of the library's sources at a tag (src/, without the device kernels' generator)."""
    names = [n for n in git(repo, "ls-tree", "-r", "--name-only", tag, "--", "src").splitlines() if n.endswith(SOURCE_SUFFIXES)]
    names = [n for n in names if "/nvtx3/" not in n]
    out: dict[str, str] = {}
    # one `git cat-file --batch` instead of a process per file
    proc = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], input="".join(f"{tag}:{n}\n" for n in names).encode(),
                          capture_output=True, check=True)
    data = proc.stdout
    pos = 0
    for n in names:
        header_end = data.index(b"\n", pos)
        header = data[pos:header_end].split()
        size = int(header[2])
        body = data[header_end + 1 : header_end + 1 + size]
        pos = header_end + 1 + size + 1
        out[n] = body.decode("utf-8", "replace")
    return out
