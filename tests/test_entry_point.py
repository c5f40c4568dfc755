"""The course's entry point in Python (`python -m helpers.course`, what Windows runs) and the bash
`./course` that only hands over to it: the same commands, the same answers, the same set-up."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import course

ROOT = Path(__file__).resolve().parent.parent


def python_m(*args, env=None):
    """`python -m helpers.course ARGS` as a Windows user types it, from the repository's root."""
    return subprocess.run([sys.executable, "-m", "helpers.course", *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **(env or {})})


def test_bash_and_python_entry_points_say_the_same():
    for args in (["help"], ["nope"], ["test", "tests/typo.py"]):
        bash = subprocess.run([str(ROOT / "course"), *args], capture_output=True, text=True)
        py = python_m(*args)
        assert (bash.returncode, bash.stdout, bash.stderr) == (py.returncode, py.stdout, py.stderr), args


def test_help_names_every_command_and_the_way_without_bash():
    r = python_m("help")
    listed = {line.split()[1] for line in r.stdout.splitlines() if line.startswith("./course ")}
    assert r.returncode == 0 and {c for c, _, _ in course.COMMANDS} <= listed
    assert "python -m helpers.course CMD" in r.stdout and "py -m helpers.course" in r.stdout


def test_a_test_path_that_does_not_exist_is_one_line_before_any_setup(tmp_path):
    r = python_m("test", "tests/test_nosuch.py::test_x", "-k", "gemm")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: ./course test tests/test_nosuch.py::test_x: no such file or folder tests/test_nosuch.py "
        "(the tests are in tests/, the chapters in notebooks/)"]
    assert course.missing_test_path(["tests/test_registry.py::test_x", "-k", "a/b", "notebooks/"]) is None


def test_a_command_runs_its_module_in_the_python_that_set_it_up():
    """COURSE_NO_SETUP=1: the running Python as it is (conda); the module's own --help answers."""
    r = python_m("bench", "--help", env={"COURSE_NO_SETUP": "1"})
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m helpers.bench")
    assert course.command_line("student", ["out"])[1:] == ["-m", "helpers.tools.editions", "out"]


def test_the_test_command_is_the_one_readme_and_ci_run():
    line = course.command_line("test", ["--quick"])
    assert line[1:5] == ["-m", "pytest", "-n", os.environ.get("COURSE_TEST_WORKERS", "2")]
    assert "--nbval-lax" in line and line[-1] == "--quick"
    readme = (ROOT / "README.md").read_text()
    assert "./course test " in readme and "py -m helpers.course test" in readme
    assert "./course test" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.skipif(shutil.which("cksum") is None, reason="no POSIX cksum here to compare with")
def test_the_install_stamp_is_posix_cksum():
    """The stamp in .venv is pyproject.toml's cksum: the same as the bash set-up wrote, so a .venv
    made by either is not installed into again."""
    out = subprocess.run(["cksum"], input=(ROOT / "pyproject.toml").read_bytes(), capture_output=True).stdout
    assert course.cksum((ROOT / "pyproject.toml").read_bytes()) == out.decode().split(" -")[0].strip()
    assert course.cksum(b"") == "4294967295 0"


def test_the_entry_point_needs_only_the_standard_library():
    """It runs before .venv exists, in a bare Python: it imports nothing outside the standard library."""
    import ast
    tree = ast.parse((ROOT / "helpers" / "course.py").read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names - set(sys.stdlib_module_names)
    init = ast.parse((ROOT / "helpers" / "__init__.py").read_text())      # the package it lives in
    assert {a.name for n in ast.walk(init) if isinstance(n, ast.Import) for a in n.names} <= {"importlib"}
