"""CONTRIBUTING.md's three recipes (a stage, a kernel family, a new operation) name every file their
change touches: the files on each recipe's **Files:** line.

Each change is made in a copy of the course (helpers/, kernels/ and the tests it runs), one edit
per file the recipe names and no other, and the checks a contributor meets run on the copy: the
registry's validator (when it loads), tests/test_registry.py, the package map's test of
tests/test_layout.py, and tests/test_stages.py, whose grid test must collect the new stage and pass
it (tests/test_checker_at_size.py's test for a case per operation, for an operation). Then the
change is made again with each named file left out in turn, and a check must fail, naming what is
missing. A recipe that leaves out a file its change needs fails the first test; a file a recipe
names that nothing needs fails the second; a file named that this module has no edit for fails both.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow       # a copy of the course and a pytest run in it per case: minutes
TESTS = ("conftest.py", "shapes.py", "test_registry.py", "test_layout.py", "test_stages.py",
         "test_checker_at_size.py")


def recipe_files(title: str, text: str | None = None) -> list[str]:
    """The paths on the **Files:** line of CONTRIBUTING.md's section ``## title``."""
    text = (ROOT / "CONTRIBUTING.md").read_text() if text is None else text
    section = re.search(rf"^## {re.escape(title)}\b.*?\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert section, f"CONTRIBUTING.md has no section '## {title}'"
    files = re.search(r"^\*\*Files:\*\*(.*?)(?:\n\n|\Z)", section.group(1), re.S | re.M)
    assert files, f"CONTRIBUTING.md's '{title}' has no **Files:** line naming what the change touches"
    return [f for f in re.findall(r"`([^`\s]+)`", files.group(1)) if "/" in f]


# -- the edits, on a copy's root -----------------------------------------------------------------

def write(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


def replace_once(root: Path, path: str, old: str, new: str) -> None:
    text = (root / path).read_text()
    assert text.count(old) == 1, f"{path} no longer holds {old!r} once: update tests/test_recipes.py"
    (root / path).write_text(text.replace(old, new))


def name_in_docstring(root: Path, path: str, line: str) -> None:
    """A line for a new module in a package's map (its __init__.py docstring, last line)."""
    text = (root / path).read_text()
    end = text.index('"""', 3)
    (root / path).write_text(text[:end].rstrip("\n") + f"\n{line}\n" + text[end:])


def add_stage(root: Path, module: str, entry: str, imports: str = "") -> None:
    """One Stage at the end of a registry module's STAGES (its last list), and what it imports."""
    text = (root / module).read_text()
    end = text.rindex("\n]")
    text = text[:end] + "\n    " + entry + text[end:]
    if imports:
        first = text.index("\nfrom ") + 1
        text = text[:first] + imports + "\n" + text[first:]
    (root / module).write_text(text)


def gemm_kernel(root: Path, path: str, name: str = "gemm") -> None:
    """kernels/gemm/01_naive.cl again, under another path (and kernel name)."""
    text = (ROOT / "kernels" / "gemm" / "01_naive.cl").read_text()
    write(root, f"kernels/{path}", "// A copy of gemm stage 01 (tests/test_recipes.py).\n"
          + text.replace("__kernel void gemm(", f"__kernel void {name}("))


FAMILY = '''"""recipe_family: one work-item per element of C (a family made by tests/test_recipes.py)."""
from . import cdiv, dispatch


def per_element(p, d):
    return (cdiv(p.dims["N"], d["WG"]) * d["WG"], p.dims["M"]), (d["WG"], 1)


LAUNCHES, steps, workspace = dispatch({"per_element": per_element}, {})
'''

OP_STAGES = '''"""recipe_gemm: an operation of one stage (made by tests/test_recipes.py)."""
from ..launch import gemm
from .params import WG, WG_TUNE
from .stage import Stage

STAGES = [
    Stage("recipe_gemm", 1, "naive", "recipe_gemm/01_naive.cl", "gemm's stage 01 again",
          family=gemm, launch="gemm_naive", defines=WG, tune=WG_TUNE),
]
'''


def op_module(root: Path) -> None:
    text = (ROOT / "helpers" / "ops" / "gemm.py").read_text()
    for old, new in (('OP = "gemm"', 'OP = "recipe_gemm"'), ('NAME = "GEMM"', 'NAME = "GEMM again"')):
        assert old in text, f"helpers/ops/gemm.py no longer holds {old!r}: update tests/test_recipes.py"
        text = text.replace(old, new)
    write(root, "helpers/ops/recipe_gemm.py", text)


def op_listed(root: Path) -> None:
    path = "helpers/ops/__init__.py"
    name_in_docstring(root, path, "    recipe_gemm     an operation made by tests/test_recipes.py")
    with (root / path).open("a") as f:
        f.write("\nfrom . import recipe_gemm  # noqa: E402\nOPERATIONS[recipe_gemm.OP] = recipe_gemm\n")


def op_registered(root: Path) -> None:
    path = "helpers/stages/__init__.py"
    name_in_docstring(root, path, "recipe_gemm.py: an operation made by tests/test_recipes.py.")
    replace_once(root, path, "\nvalidate(REGISTRY)\n", "\nfrom . import recipe_gemm  # noqa: E402\n"
                 "REGISTRY[\"recipe_gemm\"] = recipe_gemm.STAGES\nvalidate(REGISTRY)\n")


def append(path: str, line: str):
    def edit(root: Path) -> None:
        with (root / path).open("a") as f:
            f.write(f"\n{line}\n")
    return edit


# Each recipe: its section's title; for each file it may name, the edit and what a check that fails
# without it names; the recipe's own checks beside the registry's and the grid's; and the new stage,
# as the grid test's id ends (op-name), whose grid test must pass, and a word -k selects its tests by.
RECIPES = {
    "stage": dict(
        title="A stage of an existing operation",
        edits={
            "kernels/<op>/NN_name.cl": (lambda root: gemm_kernel(root, "gemm/04_recipe_stage.cl"),
                                        "gemm/04_recipe_stage.cl"),
            "helpers/stages/<op>.py": (lambda root: add_stage(
                root, "helpers/stages/gemm.py",
                'Stage("gemm", 4, "recipe_stage", "gemm/04_recipe_stage.cl", "stage 01 again",\n'
                '          family=gemm, launch="gemm_naive", defines=WG, tune=WG_TUNE),'),
                "gemm/04_recipe_stage.cl"),
        },
        checks=[],
        new="gemm-recipe_stage", k="recipe_stage"),
    "family": dict(
        title="A kernel family",
        edits={
            "helpers/launch/<family>.py": (lambda root: write(root, "helpers/launch/recipe_family.py", FAMILY),
                                           "recipe_family"),
            "helpers/launch/__init__.py": (lambda root: name_in_docstring(
                root, "helpers/launch/__init__.py", "    recipe_family  a family made by tests/test_recipes.py"),
                "recipe_family"),
            "helpers/stages/<op>.py": (lambda root: add_stage(
                root, "helpers/stages/gemm.py",
                'Stage("gemm", 4, "recipe_family", "gemm/04_recipe_family.cl", "stage 01, another family",\n'
                '          family=recipe_family, launch="per_element", defines=WG, tune=WG_TUNE),',
                imports="from ..launch import recipe_family"),
                "recipe_family"),
            "kernels/<op>/NN_name.cl": (lambda root: gemm_kernel(root, "gemm/04_recipe_family.cl"),
                                        "gemm/04_recipe_family.cl"),
        },
        checks=[],
        new="gemm-recipe_family", k="recipe_family"),
    "operation": dict(
        title="A new operation",
        edits={
            "helpers/ops/<op>.py": (op_module, "recipe_gemm"),
            "helpers/ops/__init__.py": (op_listed, "recipe_gemm"),
            "helpers/stages/<op>.py": (lambda root: write(root, "helpers/stages/recipe_gemm.py", OP_STAGES),
                                       "recipe_gemm"),
            "helpers/stages/__init__.py": (op_registered, "recipe_gemm"),
            "kernels/<op>/NN_name.cl": (lambda root: gemm_kernel(root, "recipe_gemm/01_naive.cl", "recipe_gemm"),
                                        "recipe_gemm/01_naive.cl"),
            "tests/shapes.py": (append("tests/shapes.py", 'GRIDS["recipe_gemm"] = GRIDS["gemm"]'), "GRIDS"),
            "tests/test_checker_at_size.py": (append("tests/test_checker_at_size.py",
                                                     'CASES["recipe_gemm"] = CASES["gemm"]'), "CASES for recipe_gemm"),
        },
        checks=["tests/test_checker_at_size.py::test_every_operation_is_checked_at_size"],
        new="recipe_gemm-naive", k="recipe_gemm"),
}


def copy_course(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("helpers", "kernels"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=ignore)
    (dest / "tests").mkdir()
    for name in TESTS:
        shutil.copy(ROOT / "tests" / name, dest / "tests" / name)
    shutil.copy(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def make_change(recipe: dict, files: list, root: Path, leave_out: str | None = None) -> None:
    unknown = [f for f in files if f not in recipe["edits"]]
    assert not unknown, (f"CONTRIBUTING.md's '{recipe['title']}' names {', '.join(unknown)}, which "
                         f"tests/test_recipes.py makes no edit for")
    for f in files:
        if f != leave_out:
            recipe["edits"][f][0](root)


# tests/test_stages.py's tests of the whole registry that are not a run over every stage
EVERY = ("test_every_stage_lands_in_a_grid_test", "test_every_operation_has_a_grid")


def run_checks(recipe: dict, root: Path, until_named: str | None = None) -> tuple[int, str]:
    """The checks on a copy: the registry's and the package map's tests (and the recipe's own), then
    tests/test_stages.py's tests of the whole registry (EVERY) and those of the new stage. The
    first exit status that is not 0 (else 0) and what they printed; with ``until_named``, the
    grid's run is left out once the first has failed naming it."""
    pytest = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    rc, out = 0, ""
    for args in (["tests/test_registry.py", "tests/test_layout.py::test_each_package_docstring_names_its_modules",
                  *recipe["checks"]], ["tests/test_stages.py", "-k", f"{recipe['k']} or {' or '.join(EVERY)}"]):
        run = subprocess.run(pytest + args, cwd=root, capture_output=True, text=True, env=env)
        rc, out = rc or run.returncode, out + run.stdout + run.stderr
        if until_named and rc and until_named in out:
            break
    return rc, out


@pytest.mark.parametrize("name", RECIPES)
def test_the_files_a_recipe_names_are_enough(name, tmp_path):
    """The change made in the files the recipe names, and no other, passes the checks, and the grid
    test runs the new stage."""
    recipe = RECIPES[name]
    root = copy_course(tmp_path)
    make_change(recipe, recipe_files(recipe["title"]), root)
    rc, out = run_checks(recipe, root)
    assert rc == 0, f"the change of '{recipe['title']}' made in its **Files:** only fails:\n{out[-6000:]}"
    grid = [ln for ln in out.splitlines() if ln.startswith("PASSED") and "stage_over_its_grid" in ln
            and f"{recipe['new']}]" in ln]
    assert grid, f"no grid test ran the new stage {recipe['new']}:\n{out[-3000:]}"


LEFT_OUT = [(name, f) for name, r in RECIPES.items() for f in recipe_files(r["title"])]


@pytest.mark.parametrize("name, left_out", LEFT_OUT, ids=[f"{n}-{f}" for n, f in LEFT_OUT])
def test_each_file_a_recipe_names_is_needed(name, left_out, tmp_path):
    """The change with one of the recipe's files left out fails a check that names what is missing."""
    recipe = RECIPES[name]
    root = copy_course(tmp_path)
    make_change(recipe, recipe_files(recipe["title"]), root, leave_out=left_out)
    named = recipe["edits"][left_out][1]
    rc, out = run_checks(recipe, root, until_named=named)
    assert rc != 0, f"'{recipe['title']}' without {left_out}: every check passes, so it is not needed"
    assert named in out, f"'{recipe['title']}' without {left_out} fails, but no check names {named!r}:\n{out[-3000:]}"


def test_a_recipe_without_its_files_line_or_with_a_file_it_has_no_edit_for_is_refused():
    text = "## A stage of an existing operation\n\nNo list.\n\n## A chapter\n"
    with pytest.raises(AssertionError, match="no \\*\\*Files:\\*\\* line"):
        recipe_files("A stage of an existing operation", text)
    files = recipe_files("A stage", "## A stage\n\n**Files:** `kernels/<op>/NN_name.cl`, `tests/elsewhere.py`.\n")
    assert files == ["kernels/<op>/NN_name.cl", "tests/elsewhere.py"]
    with pytest.raises(AssertionError, match="tests/elsewhere.py, which tests/test_recipes.py makes no edit for"):
        make_change(RECIPES["stage"], files, Path("/nonexistent"))
