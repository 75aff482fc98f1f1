"""Every knowledge-base file ships in the wheel: CI and users run the installed package, not the tree."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_kb_file_is_package_data():
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    dirs = {pkg: ROOT / path for pkg, path in setup["package-dir"].items()}
    missing = []
    for path in sorted((ROOT / "kb").rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        pkg = "advisor.kb" + "".join(f".{p}" for p in path.parent.relative_to(ROOT / "kb").parts)
        declared = pkg in setup["packages"] and dirs.get(pkg) == path.parent
        patterns = setup["package-data"].get(pkg, [])
        if not declared or not any(fnmatch.fnmatch(path.name, p) for p in patterns):
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"kb files the wheel would leave out: {missing[:10]}"
