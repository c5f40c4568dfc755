"""The two editions: the teacher notebooks mark every exercise's solution one way (nbgrader's
### BEGIN SOLUTION / ### END SOLUTION), and the student edition (`./course student`) holds no
solution, no answer hint and no solution output, and runs top to bottom under nbval with the
exercises unanswered, each saying so politely.

The run of the student edition executes every notebook a second time; it runs where
COURSE_STUDENT_RUN=1 (.ci/run sets it) and is skipped otherwise, with that reason.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from helpers.chapters.answers import found, hide, notebook_secrets
from helpers.chapters.kernel_exercises import secret_lines
from helpers.tools.folders import MANIFEST
from helpers.tools.editions import BEGIN, TEACHER_ONLY, _html_text, solutions, student_notebook, write_student

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXERCISE = re.compile(r"^ok = (check_\w+|gap\.check)\(", re.M)   # how every exercise cell ends

# the student edition is written with nbgrader's ClearSolutions: skipped with the reason where it is missing
pytestmark = pytest.mark.nbgrader


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
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "helpers.tools.needs",
           "--nbval-lax", "--nbval-current-env", "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"),
           "--rootdir", str(out), str(out)]
    run = subprocess.run(cmd, cwd=out, capture_output=True, text=True, timeout=3000)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def _course_secrets() -> dict:
    """Every line of every teacher answer: the kernel exercises' hidden lines and every notebook's
    solution regions (helpers/chapters/answers.py states what counts as a line)."""
    out = dict(secret_lines())
    for p in NOTEBOOKS:
        out.update(notebook_secrets(nbformat.read(p, as_version=4)))
    return out


def _texts(path: Path):
    """(where, text) for everything a file of the edition holds: for a notebook every cell's source,
    every output's text, plain text, markdown and HTML (as the text it shows), and the metadata."""
    if path.suffix != ".ipynb":
        yield path.name, path.read_text()
        return
    nb = nbformat.read(path, as_version=4)
    yield f"{path.name} metadata", json.dumps(nb.metadata)
    for i, cell in enumerate(nb.cells):
        yield f"{path.name} cell {i} source", cell.source
        yield f"{path.name} cell {i} metadata", json.dumps(cell.metadata)
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            for text in (out.get("text", ""), data.get("text/plain", ""), data.get("text/markdown", "")):
                yield f"{path.name} cell {i} output", text
            if "text/html" in data:
                yield f"{path.name} cell {i} HTML output", _html_text(data["text/html"])


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    return write_student(tmp_path_factory.mktemp("edition") / "student")


# Every file the student edition writes; a chapter whose page still states an exercise's answer is
# an expected failure, with the answer it states, until its exercise or its text changes.
EDITION_FILES = [p.name for p in NOTEBOOKS] + sorted(
    p.name for p in (ROOT / "notebooks").iterdir() if p.is_file() and p.suffix != ".ipynb" and p.name not in TEACHER_ONLY) + [
    MANIFEST]   # the list of what the edition wrote (helpers/tools/folders.py)
STATES_AN_ANSWER: dict = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=STATES_AN_ANSWER[n], strict=True))
                                  if n in STATES_AN_ANSWER else n for n in EDITION_FILES])
def test_no_line_of_any_answer_anywhere_in_the_student_edition(name, student_dir):
    """Cell sources, outputs (text, HTML, markdown), metadata and every other file: none holds a
    line of a solution region or a line that a kernel exercise's gap hides."""
    secrets = _course_secrets()
    leaks = [f"{where}: {secrets[k]}: {k}" for where, text in _texts(student_dir / name) for k in found(text, secrets)]
    assert not leaks, "answers in the student edition:\n" + "\n".join(dict.fromkeys(leaks))


def test_the_student_edition_writes_exactly_the_files_checked(student_dir):
    assert sorted(p.name for p in student_dir.iterdir()) == sorted(EDITION_FILES)


def test_the_leak_test_finds_the_answers_the_teacher_edition_shows():
    """The check above can fail: run on the teacher notebooks it finds answers in their listings
    and diffs (the outputs of show_source/show_diff above the kernel exercises) and solutions."""
    secrets = secret_lines()
    shown = {where for p in NOTEBOOKS for where, text in _texts(p) if "output" in where and found(text, secrets)}
    for chapter in ("02_naive_dgrad", "03_memoized_bounds", "05_input_vectorization", "09_local_memory"):
        assert any(w.startswith(chapter) for w in shown), chapter
    nb = nbformat.read(ROOT / "notebooks" / "01_backprop_math.ipynb", as_version=4)
    assert found("\n".join(c.source for c in nb.cells), notebook_secrets(nb))


def test_student_edition_has_no_instructors_guide_and_no_link_to_a_missing_file(student_dir):
    names = {p.name for p in student_dir.iterdir()}
    assert not names & set(TEACHER_ONLY), names & set(TEACHER_ONLY)
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    for path in sorted(student_dir.iterdir()):
        if path.suffix in (".md", ".ipynb"):
            texts = ([c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]
                     if path.suffix == ".ipynb" else [path.read_text()])
            for target in (m for t in texts for m in link.findall(t)):
                if "://" not in target:
                    assert (student_dir / target).exists(), f"{path.name} links to {target}, not in the edition"
    toc = (student_dir / "_toc.yml").read_text()
    assert all(Path(t).stem not in toc for t in TEACHER_ONLY)
    assert "INSTRUCTORS" in (ROOT / "notebooks" / "_toc.yml").read_text()   # the teacher's book keeps it


def test_student_edition_listings_show_the_gapped_kernel(student_dir):
    """A listing above a kernel exercise shows the gap's marker where its answer was, in the stored
    output and in what the learner's own run prints (start(edition="student"))."""
    nb = nbformat.read(student_dir / "02_naive_dgrad.ipynb", as_version=4)
    assert any('start(edition="student")' in c.source for c in nb.cells)
    listings = [o["data"]["text/plain"] for c in nb.cells if c.cell_type == "code" and "show_source" in c.source
                for o in c.get("outputs", []) if "conv_dgrad/02" in o.get("data", {}).get("text/plain", "")
                or "Stage 02" in o.get("data", {}).get("text/plain", "")]
    assert listings and all("answer to kernel exercise naive_checks" in t for t in listings)
    import helpers.chapters.notebook as notebook
    try:
        notebook.EDITION["name"] = "student"
        text = notebook.show_source("conv_dgrad", "memoized_bounds", inline=("dgrad_memoized.h",)).text
    finally:
        notebook.EDITION["name"] = "teacher"
    assert "memo_table" in text and not found(text, secret_lines())
    teacher = notebook.show_source("conv_dgrad", "memoized_bounds", inline=("dgrad_memoized.h",)).text
    assert found(teacher, secret_lines())


def test_hide_keeps_a_diff_column_and_merges_a_run():
    secrets = {"constintoh_s=h+PAD-r;": "g", "if(oh>=OH)continue;": "g"}
    text = "--- a\n+++ b\n+    const int oh_s = h + PAD - r;\n+#pragma unroll\n+    if (oh >= OH) continue;\n x = 1;\n"
    got = hide(text, secrets).splitlines()
    assert got[:2] == ["--- a", "+++ b"] and got[2].startswith("+    /* ...") and got[3] == " x = 1;", got
