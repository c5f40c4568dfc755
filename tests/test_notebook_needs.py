"""A notebook that needs a package beyond the course's (its metadata: "course": {"needs": [...]})
is skipped under nbval with the reason where the package is missing, and fails under COURSE_CI=1
(helpers/tools/needs.py, a pytest plugin through pyproject.toml's addopts), as a test that needs it is."""
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from helpers.tools.needs import module_missing, needed, notebook_missing, notebook_needs

ROOT = Path(__file__).resolve().parent.parent


def notebook(path: Path, needs: list) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("print('ran')"))
    nb.metadata["course"] = {"needs": needs}
    nbformat.write(nb, path)
    return path


def test_a_missing_module_skips_or_fails_under_ci(tmp_path, monkeypatch):
    path = notebook(tmp_path / "a.ipynb", ["json", "no_such_module_of_the_course"])
    assert notebook_needs(path) == ("json", "no_such_module_of_the_course")
    reason = notebook_missing(path)
    assert reason == module_missing("no_such_module_of_the_course") and "pip install" in reason
    assert notebook_missing(notebook(tmp_path / "b.ipynb", ["json"])) is None
    monkeypatch.delenv("COURSE_CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no_such_module_of_the_course"):
        needed(reason)
    monkeypatch.setenv("COURSE_CI", "1")
    with pytest.raises(pytest.fail.Exception, match="COURSE_CI=1 but no_such_module"):
        needed(reason)
    needed(None)


def test_the_notebooks_that_need_torch_say_so():
    uses = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb") if "helpers.train import torch_resnet" in p.read_text()}
    assert uses and all("torch" in notebook_needs(ROOT / "notebooks" / f"{s}.ipynb") for s in uses), uses


def test_nbval_skips_the_cells_of_a_notebook_whose_package_is_missing(tmp_path):
    """The hook as ./course test meets it: nbval with the plugin pyproject.toml loads."""
    notebook(tmp_path / "needs_nothing_here.ipynb", ["no_such_module_of_the_course"])
    env = {k: v for k, v in os.environ.items() if k != "COURSE_CI"}
    env["PYTHONPATH"] = str(ROOT)
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist", "-p",
           "helpers.tools.needs", "--nbval-lax", "--nbval-current-env", "--rootdir", str(tmp_path), str(tmp_path)]
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0 and "1 skipped" in run.stdout and "no_such_module_of_the_course" in run.stdout, \
        run.stdout[-2000:] + run.stderr[-2000:]
    env["COURSE_CI"] = "1"
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 1 and "COURSE_CI=1 but" in run.stdout, run.stdout[-2000:]


def test_the_plugin_is_loaded_by_the_suites_own_configuration_and_no_second_conftest_shadows_the_tests():
    """pyproject.toml's addopts loads the plugin; tests/conftest.py is the only conftest.py under the
    test paths: another one (a notebooks/conftest.py once) is imported as `conftest` first, and
    every `from conftest import CONTEXTS` in tests/ fails to collect (the grid tests among them)."""
    try:
        import tomllib
    except ModuleNotFoundError:          # Python 3.10
        import tomli as tomllib
    opts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "-p helpers.tools.needs" in opts["addopts"]
    found = sorted(str(p.relative_to(ROOT)) for d in opts["testpaths"] for p in (ROOT / d).rglob("conftest.py"))
    assert found == ["tests/conftest.py"], found
