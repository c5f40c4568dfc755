"""The two editions: the teacher notebooks mark every exercise's solution one way (nbgrader's
### BEGIN SOLUTION / ### END SOLUTION), and the student edition (`./course student`) holds no
solution, no answer hint and no solution output, and runs top to bottom under nbval with the
exercises unanswered, each saying so politely.

The run of the student edition executes every notebook a second time; it runs where
COURSE_STUDENT_RUN=1 (.ci/run sets it) and is skipped otherwise, with that reason.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from helpers.chapters.editions import BEGIN, solutions, student_notebook, write_student

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXERCISE = re.compile(r"^ok = (check_\w+|gap\.check)\(", re.M)   # how every exercise cell ends


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_exercise_cell_marks_its_solution(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and EXERCISE.search(cell.source):
            assert BEGIN in cell.source, (
                f"{path.name}: an exercise cell without a ### BEGIN SOLUTION region:\n{cell.source[:300]}")
        if cell.cell_type == "markdown":
            assert "One solution" not in cell.source or BEGIN in cell.source, (
                f"{path.name}: a visible solution in markdown; mark it with ### BEGIN SOLUTION")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_student_edition_has_no_solutions(path):
    teacher = nbformat.read(path, as_version=4)
    student = student_notebook(teacher)
    text = "\n".join(c.source for c in student.cells)
    assert BEGIN not in text and "END SOLUTION" not in text
    for region in solutions(teacher):
        body = [ln.strip() for ln in region.splitlines() if ln.strip()]
        assert "\n".join(region.strip("\n").splitlines()) not in text, f"{path.name}: a solution is left"
        # no line of a solution longer than a trivial one survives anywhere in the edition
        for ln in body:
            if len(ln) > 20 and ln not in "\n".join(c.source for c in teacher.cells if BEGIN not in c.source):
                assert ln not in text, f"{path.name}: solution line left: {ln}"
    for t, s in zip(teacher.cells, student.cells):
        if BEGIN in t.source and s.cell_type == "code":
            out = "".join(o.get("text", "") for o in s.get("outputs", []))
            assert "Correct" not in out and all(ln.startswith("Not answered yet") for ln in out.splitlines()), out


def test_teacher_edition_has_exercises_in_most_chapters():
    chapters = [p for p in NOTEBOOKS if solutions(nbformat.read(p, as_version=4))]
    assert len(chapters) >= 10
    kernel = [p for p in NOTEBOOKS if "gap.check(" in p.read_text()]
    assert len(kernel) >= 6, [p.name for p in kernel]


@pytest.mark.skipif(os.environ.get("COURSE_STUDENT_RUN") != "1",
                    reason="the student edition's run executes every notebook again; set COURSE_STUDENT_RUN=1 "
                           "(CI does)")
def test_student_edition_runs_under_nbval(tmp_path):
    out = write_student(tmp_path / "student")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--nbval-lax",
           "--nbval-current-env", "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"),
           "--rootdir", str(out), str(out)]
    run = subprocess.run(cmd, cwd=out, capture_output=True, text=True, timeout=3000)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
