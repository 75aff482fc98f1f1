"""Terminal text for `advisor env` and `advisor preflight` (pure formatting, like advisor.render)."""

from __future__ import annotations

import textwrap
from typing import Any

from advisor.envfile import EnvSnapshot
from advisor.preflight import Finding, PreflightReport
from advisor.render import Style, paragraphs


def safe(text: str) -> str:
    """A value read from a file, fit for a terminal: control characters (a terminal escape, a bell,
    a carriage return) shown escaped; tabs and newlines kept (the formatters split lines)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in "\t\n" else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _deep_safe(value):
    if isinstance(value, str):
        return safe(value)
    if isinstance(value, list):
        return [_deep_safe(v) for v in value]
    if isinstance(value, dict):
        return {safe(k) if isinstance(k, str) else k: _deep_safe(v) for k, v in value.items()}
    return value


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.4g} {unit}"
    return f"{n} B"


def _limit(value: Any, count: bool = False) -> str:
    if value in ("unlimited", -1):
        return "unlimited"
    if not isinstance(value, int):
        return "?"
    return f"{value:,}" if count else _size(value)


def format_env(s: EnvSnapshot, style: Style | None = None) -> str:
    style = style or Style()
    s = EnvSnapshot.model_validate(_deep_safe(s.model_dump()))
    out: list[str] = [style.bold(f"{s.host or 'this machine'}") + style.dim(f"  collected {s.collected_at or '?'}")]
    py = s.python
    if py:
        out.append(f"Python   {py.version} ({py.implementation})")
    if s.torch:
        cuda = f", CUDA {s.torch.cuda}" if s.torch.cuda else ", CPU build" if s.torch.source == "metadata" else ""
        out.append(f"torch    {s.torch.version}{cuda}" + (" (from torch itself)" if s.torch.source == "import" else ""))
    else:
        out.append("torch    not installed")
    out.append(f"NCCL     {s.nccl.version} ({s.nccl.source})" if s.nccl else "NCCL     unknown (no nvidia-nccl package; --deep asks torch)")
    frameworks = ", ".join(f"{k} {v}" for k, v in s.frameworks.items())
    out.append(f"frameworks  {frameworks or 'none of the known ones'}")
    g = s.gpus
    if g is not None and (g.count or g.names):
        head = f"GPUs     {g.count if g.count is not None else '?'}"
        if g.visible is not None and g.visible != g.count:
            head += f" ({g.visible} visible)"
        if g.driver:
            head += f", driver {g.driver}"
        out.append(head)
        out.extend(f"  {name}" for name in g.names[:16])
        if g.topology:
            out.append("  topology (nvidia-smi topo -m):")
            out.extend("    " + line for line in g.topology.splitlines()[:40])
    elif g is not None:
        out.append("GPUs     none found (no NVIDIA driver or nvidia-smi)")
    for dev in s.infiniband:
        for p in dev.ports:
            out.append(f"RDMA     {dev.name} port {p.port}: {p.state or '?'}, {p.link_layer or '?'}, {p.rate or '?'}"
                       + (f" ({', '.join(dev.netdevs)})" if dev.netdevs else ""))
    c = s.container
    if c is not None:
        where = c.kind if c.kind != "none" else "none detected"
        extra = [f"scheduler {c.scheduler}"] if c.scheduler else []
        extra += [c.hypervisor if "hypervisor" in c.hypervisor else f"hypervisor {c.hypervisor}"] if c.hypervisor else []
        out.append(f"container  {where}" + (f" ({'; '.join(c.evidence[:2])})" if c.evidence else "")
                   + (f"; {', '.join(extra)}" if extra else ""))
    if s.shm is not None:
        out.append(f"/dev/shm  {_size(s.shm.size_bytes)} (free {_size(s.shm.free_bytes)})")
    if s.ulimits:
        parts = [f"{k} {_limit(v.soft, k == 'nofile')} (hard {_limit(v.hard, k == 'nofile')})" for k, v in s.ulimits.items()]
        out.append("ulimits  " + ", ".join(parts))
    if s.interfaces:
        out.append("interfaces")
        width = max(len(i.name) for i in s.interfaces)
        for i in s.interfaces:
            state = "running" if i.running else (i.state or "down")
            route = "  (default route)" if i.name == s.default_route else ""
            out.append(f"  {i.name:<{width}}  {state:<7}  {i.kind or '?':<10} mtu {i.mtu if i.mtu is not None else '?':<6} "
                       f"{' '.join(i.addresses) or '-'}{route}")
    out.append("distributed variables" + ("" if s.env else "  none set"))
    out.extend(f"  {k}={v}" for k, v in s.env.items())
    if s.nccl_conf.values:
        out.append(f"nccl.conf  {', '.join(s.nccl_conf.files)}")
        out.extend(f"  {k}={v}" for k, v in s.nccl_conf.values.items())
    for note in s.notes:
        out.append(style.dim(f"note: {note}"))
    return "\n".join(out) + "\n"


_MARK = {"error": "ERROR", "warning": "WARN ", "info": "INFO "}


def _colored(style: Style, severity: str, text: str) -> str:
    return style.red(text) if severity == "error" else style.yellow(text) if severity == "warning" else style.cyan(text)


def _wrap(label: str, text: str, indent: str = "      ", width: int = 110) -> list[str]:
    return textwrap.wrap(" ".join(text.split()), width=width, initial_indent=f"{indent}{label}",
                         subsequent_indent=indent + "  ", break_on_hyphens=False, break_long_words=False) or [indent + label]


def format_finding(f: Finding, style: Style, verbose: bool) -> list[str]:
    out = [_colored(style, f.severity, _MARK[f.severity]) + " " + style.bold(f.title) + style.dim(f"  [{f.code}]")]
    out.extend(_wrap("evidence: ", f.evidence))
    if f.why:
        out.extend(style.dim(line) for line in _wrap("why: ", f.why))
    if f.fix is not None:
        out.append(f"      fix: {f.fix.title}")
        for para in paragraphs(f.fix.steps)[: None if verbose else 3]:
            out.extend(textwrap.wrap(para, width=110, initial_indent="        ", subsequent_indent="        ") or [""])
        for d in f.fix.derivations:
            out.extend(style.dim(line) for line in _wrap("", d, indent="        "))
        for snippet in f.fix.snippets:
            out.extend("        | " + line for line in snippet.content.rstrip("\n").splitlines())
        if f.fix.caveat:
            out.extend(style.dim(line) for line in _wrap("caveat: ", f.fix.caveat, indent="        "))
    return out


def format_preflight(report: PreflightReport, checked: str, notes: list[str], style: Style | None = None,
                     verbose: bool = False) -> str:
    style = style or Style()
    report = PreflightReport.model_validate(_deep_safe(report.model_dump()))
    checked, notes = safe(checked), [safe(n) for n in notes]
    counts = {s: sum(1 for f in report.findings if f.severity == s) for s in ("error", "warning", "info")}
    out = [style.dim(f"checked {checked}")]
    if not report.findings:
        out.append(style.green("No known trap found."))
    else:
        summary = ", ".join(f"{n} {s}{'s' if n != 1 and s != 'info' else ''}" for s, n in counts.items() if n)
        out.append(style.bold(f"{len(report.findings)} finding{'s' if len(report.findings) != 1 else ''}: {summary}"))
    for f in report.findings:
        out.append("")
        out.extend(format_finding(f, style, verbose))
    if notes:
        out.append("")
        out.extend(style.dim(f"note: {n}") for n in notes)
    return "\n".join(out) + "\n"
