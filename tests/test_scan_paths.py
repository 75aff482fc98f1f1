"""A pasted error and a big log take different scanner paths (advisor.scan: line by line, or the
automaton of every searched probe, which a long-lived process uses for everything once warm). The
same text must get the same diagnosis on both, whatever the process scanned before."""

from __future__ import annotations

import pytest
import yaml

from advisor.diagnose import diagnose
from advisor.models import DiagnoseRequest
from helpers import REPO


def _logs() -> list[tuple[str, str]]:
    out = []
    for path in sorted((REPO / "benchmarks" / "cases" / "dev").glob("*.yaml")):
        out.append((path.stem, yaml.safe_load(path.read_text(encoding="utf-8"))["log"]))
    for path in sorted((REPO / "kb" / "recorded").glob("*.log")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if len(text) <= 1 << 16:  # bigger ones take the block path already
            out.append((path.stem, text))
    return out


def _verdict(text: str):
    d = diagnose(DiagnoseRequest(log=text, max_causes=5))
    facts = {k: v for k, v in d.facts.items() if k not in ("rank_progress",)}
    return d.status, [c.id for c in d.causes], [round(c.score, 3) for c in d.causes], facts


@pytest.mark.timeout(300)
def test_the_line_path_and_the_block_path_agree(monkeypatch):
    import advisor.scan as scan_module

    logs = _logs()
    assert len(logs) > 100
    small = {name: _verdict(text) for name, text in logs}
    monkeypatch.setattr(scan_module, "SMALL_LINES", -1)  # the path a big log, or a warm server, takes
    differ = [name for name, text in logs if _verdict(text) != small[name]]
    assert not differ, f"{len(differ)} logs diagnosed differently on the block path, e.g. {differ[:5]}"
