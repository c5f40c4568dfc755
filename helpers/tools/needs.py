"""Packages beyond the course's own that a test or a notebook needs, and what happens where one is
missing: skipped with the reason, except under COURSE_CI=1 (.ci/run installs them all), where a skip
would hide a test that never ran, so it fails.

    needed(missing)            in a test or a hook: None runs on; a reason skips (fails under COURSE_CI=1)
    module_missing("torch")    None where the module imports, else what is missing and how to install it
    notebook_missing(path)     what a notebook lacks here, from its metadata "course": {"needs": [modules]}

It is also a pytest plugin (pyproject.toml's addopts: ``-p helpers.tools.needs``): under nbval the
cells of a notebook whose package is missing are skipped with the reason (failed under COURSE_CI=1).
A plugin and not a conftest.py beside the notebooks: the tests import names from tests/conftest.py
(``from conftest import CONTEXTS``), and a second conftest.py on the path would be found instead.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
from pathlib import Path

INSTALL = {"torch": "PyTorch is not installed here (python -m pip install torch; CI installs the CPU build)"}


def needed(missing: str | None) -> None:
    """Skip with ``missing`` (what the machine lacks), or fail under COURSE_CI=1; nothing when None."""
    import pytest
    if missing:
        if os.environ.get("COURSE_CI") == "1":
            pytest.fail(f"COURSE_CI=1 but {missing}")
        pytest.skip(missing)


def module_missing(name: str) -> str | None:
    if importlib.util.find_spec(name) is not None:
        return None
    return INSTALL.get(name, f"{name} is not installed here (python -m pip install {name})")


@functools.lru_cache(maxsize=None)
def notebook_needs(path: Path) -> tuple:
    """The modules a notebook's metadata says it needs beyond the course's packages."""
    meta = json.loads(Path(path).read_text(encoding="utf-8")).get("metadata", {})
    return tuple(meta.get("course", {}).get("needs", ()))


def notebook_missing(path) -> str | None:
    missing = [m for m in map(module_missing, notebook_needs(Path(path))) if m]
    return "; ".join(missing) or None


def pytest_runtest_setup(item):
    """The plugin's hook: a notebook's cells need what its metadata names."""
    if item.path.suffix == ".ipynb":
        needed(notebook_missing(item.path))
