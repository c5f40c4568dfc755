"""The two editions of the course: the teacher notebooks (notebooks/, with solutions) and the
student edition generated from them.

    python -m helpers.tools.editions [OUT]   # or ./course student; OUT defaults to build/student

One convention marks what the student edition leaves out, nbgrader's: in code cells, lines between
``### BEGIN SOLUTION`` and ``### END SOLUTION`` (in a kernel string, ``// ### BEGIN SOLUTION``);
in markdown cells, the same markers around an answer or a hint that gives one away. nbgrader's
own ClearSolutions preprocessor replaces them (code: ``raise NotImplementedError()``, which every
check in helpers/chapters/exercises.py and helpers/chapters/kernel_exercises.py reports as "not
answered yet"; markdown: a line asking for the learner's answer). The outputs of those cells are cleared too,
and their ``NBVAL_CHECK_OUTPUT`` marker removed, so the student edition runs top to bottom under
nbval with the exercises unanswered.

No answer anywhere else either (helpers/chapters/answers.py says what an answer is):
- the instructors' guide (``TEACHER_ONLY``) is not copied, and what links to it is left out: a
  markdown file's region between ``<!-- teacher edition -->`` and ``<!-- end teacher edition -->``,
  and its entry in ``_toc.yml``;
- every stored output that shows a line of an answer (a kernel listing or diff above a kernel
  exercise) is rewritten with those lines hidden, a listing re-highlighted from its text;
- each notebook's ``start()`` becomes ``start(edition="student")``, so the listings a learner's
  own run prints hide the same lines;
- a code cell marked ``# PREDICT BEFORE RUNNING`` (the measurement after a "Predict" question, the
  launch an exercise asks to compute) keeps its source and loses its stored outputs (and its
  ``NBVAL_CHECK_OUTPUT`` marker): the learner predicts first, then runs it.
"""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from ..chapters.answers import BEGIN, END  # noqa: F401 (the solution markers, defined with what they hide)

ROOT = Path(__file__).resolve().parents[2]
TEXT_STUB = "*Your answer here (double-click to edit).*"
TEACHER_ONLY = ("INSTRUCTORS.md",)                 # files of notebooks/ the student edition leaves out
TEACHER_REGION = re.compile(r"<!-- teacher edition -->.*?<!-- end teacher edition -->\n?", re.S)
START = re.compile(r"\bstart\(\)")
PREDICT = "# PREDICT BEFORE RUNNING"      # a cell whose output answers a question asked before it


def has_solution(cell) -> bool:
    return BEGIN in cell.source


def solutions(nb) -> list[str]:
    """The text of every solution region of a notebook (what the student edition must not hold)."""
    out = []
    for cell in nb.cells:
        inside, region = False, []
        for line in cell.source.splitlines():
            if BEGIN in line:
                inside, region = True, []
            elif END in line:
                inside = False
                out.append("\n".join(region))
            elif inside:
                region.append(line)
    return out


def student_notebook(nb, secrets: dict | None = None):
    """A copy of a teacher notebook with every solution region, and those cells' outputs, removed,
    every stored output's answer lines hidden (``secrets``: the course's, by default), and its
    ``start()`` told that this is the student edition."""
    import copy

    from nbgrader.preprocessors import ClearSolutions

    from ..chapters.answers import notebook_secrets
    from ..chapters.kernel_exercises import secret_lines
    secrets = {**notebook_secrets(nb), **secret_lines()} if secrets is None else secrets
    nb = copy.deepcopy(nb)
    marked = [i for i, c in enumerate(nb.cells) if has_solution(c)]
    ClearSolutions(enforce_metadata=False, text_stub=TEXT_STUB).preprocess(nb, {})
    for i in marked:
        cell = nb.cells[i]
        if cell.cell_type == "code":
            cell.outputs = _unanswered_outputs(cell.source)   # keeps its execution count: nbval
            if not cell.outputs:                              # skips cells that were never run
                _unchecked(cell)
    for cell in nb.cells:
        if cell.cell_type == "code" and PREDICT in cell.source:
            cell.outputs = []
            _unchecked(cell)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = START.sub('start(edition="student")', cell.source)
            for out in cell.get("outputs", []):
                _hide_in_output(out, secrets)
    nb.metadata["course_edition"] = "student"
    return nb


def _unchecked(cell) -> None:
    """A code cell with no stored output to compare: never run, and nbval's output check removed."""
    cell.execution_count = None
    cell.source = "\n".join(ln for ln in cell.source.split("\n") if ln.strip() != "# NBVAL_CHECK_OUTPUT")


def _hide_in_output(out, secrets: dict) -> None:
    """Hide the answer lines of one stored output: stream text, plain text and markdown line by
    line; a listing's HTML re-highlighted from its hidden text; other HTML that holds an answer
    dropped (its plain text stays)."""
    from ..chapters.answers import found, hide
    from ..chapters.listing import _highlight
    if "text" in out:
        out["text"] = hide(out["text"], secrets)
    data = out.get("data", {})
    for kind in ("text/plain", "text/markdown"):
        if kind in data:
            data[kind] = hide(data[kind], secrets)
    if "text/html" in data and found(_html_text(data["text/html"]), secrets):
        language = out.get("metadata", {}).get("text/html", {}).get("course_source")
        if language is None and "text/plain" in data:
            language = "diff" if data["text/plain"].startswith("--- ") else "c"
        if language and "text/plain" in data:
            data["text/html"] = _highlight(data["text/plain"], language).data
        else:
            del data["text/html"]


def _html_text(html: str) -> str:
    """The text an HTML output shows: tags removed, entities decoded."""
    import html as html_lib
    return html_lib.unescape(re.sub(r"<[^>]+>", "", html))


def _unanswered_outputs(source: str) -> list:
    """What an unanswered exercise cell prints: one polite line per check it calls (nbval compares
    it, so the student edition's test proves that the checks say so instead of raising)."""
    import re

    from nbformat.v4 import new_output

    from ..chapters.exercises import NOT_ANSWERED
    from ..chapters.kernel_exercises import NOT_ANSWERED_KERNEL
    lines = [NOT_ANSWERED_KERNEL if "gap.check(" in ln else NOT_ANSWERED
             for ln in source.splitlines() if re.search(r"\bcheck_\w+\(|gap\.check\(", ln)
             and not ln.lstrip().startswith(("from ", "import ", "#"))]
    return [new_output("stream", name="stdout", text="".join(ln + "\n" for ln in lines))] if lines else []


def write_student(out: Path | None = None) -> Path:
    """Write the student edition of every notebook (and the notebooks' other files) into ``out``."""
    import nbformat

    from ..chapters.answers import notebook_secrets
    from ..chapters.kernel_exercises import secret_lines
    from .folders import claim, seal
    out = claim(out or ROOT / "build" / "student", COMMAND)      # refused before anything is written
    src = ROOT / "notebooks"
    teacher = {p: nbformat.read(p, as_version=4) for p in sorted(src.glob("*.ipynb"))}
    secrets = {}
    for nb in teacher.values():
        secrets.update(notebook_secrets(nb))
    secrets.update(secret_lines())                 # a gap's own lines are named by the gap
    for path in sorted(src.iterdir()):
        if path.suffix == ".ipynb":
            nbformat.write(student_notebook(teacher[path], secrets), out / path.name)
        elif path.name in TEACHER_ONLY or not path.is_file():
            continue
        elif path.suffix == ".md":
            (out / path.name).write_text(TEACHER_REGION.sub("", path.read_text()))
        elif path.name == "_toc.yml":
            (out / path.name).write_text("".join(
                ln for ln in path.read_text().splitlines(keepends=True)
                if not any(re.search(rf"file:\s*{re.escape(Path(t).stem)}\s*$", ln) for t in TEACHER_ONLY)))
        else:
            shutil.copy2(path, out / path.name)
    seal(out, COMMAND)
    return out


COMMAND = "./course student"


def main(argv=None) -> int:
    """The command line (helpers/tools/folders.py: command_line)."""
    from .folders import command_line

    def write(out) -> int:
        out = write_student(out)
        print(f"student edition written to {out} (solutions, answer hints and their outputs removed)")
        return 0
    return command_line(COMMAND, "build/student", write, argv)


if __name__ == "__main__":
    sys.exit(main())
