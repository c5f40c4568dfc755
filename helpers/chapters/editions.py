"""The two editions of the course: the teacher notebooks (notebooks/, with solutions) and the
student edition generated from them.

    python -m helpers.chapters.editions [OUT]   # or ./course student; OUT defaults to build/student

One convention marks what the student edition leaves out, nbgrader's: in code cells, lines between
``### BEGIN SOLUTION`` and ``### END SOLUTION`` (in a kernel string, ``// ### BEGIN SOLUTION``);
in markdown cells, the same markers around an answer or a hint that gives one away. nbgrader's
own ClearSolutions preprocessor replaces them (code: ``raise NotImplementedError()``, which every
check in helpers/chapters/exercises.py and helpers/chapters/kernel_exercises.py reports as "not
answered yet"; markdown: a line asking for the learner's answer). The outputs of those cells are cleared too,
and their ``NBVAL_CHECK_OUTPUT`` marker removed, so the student edition runs top to bottom under
nbval with the exercises unanswered.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "BEGIN SOLUTION", "END SOLUTION"
TEXT_STUB = "*Your answer here (double-click to edit).*"


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


def student_notebook(nb):
    """A copy of a teacher notebook with every solution region, and those cells' outputs, removed."""
    import copy

    from nbgrader.preprocessors import ClearSolutions
    nb = copy.deepcopy(nb)
    marked = [i for i, c in enumerate(nb.cells) if has_solution(c)]
    ClearSolutions(enforce_metadata=False, text_stub=TEXT_STUB).preprocess(nb, {})
    for i in marked:
        cell = nb.cells[i]
        if cell.cell_type == "code":
            cell.outputs = _unanswered_outputs(cell.source)   # keeps its execution count: nbval
            if not cell.outputs:                              # skips cells that were never run
                cell.execution_count = None
                cell.source = "\n".join(ln for ln in cell.source.split("\n") if ln.strip() != "# NBVAL_CHECK_OUTPUT")
    nb.metadata["course_edition"] = "student"
    return nb


def _unanswered_outputs(source: str) -> list:
    """What an unanswered exercise cell prints: one polite line per check it calls (nbval compares
    it, so the student edition's test proves that the checks say so instead of raising)."""
    import re

    from nbformat.v4 import new_output

    from .exercises import NOT_ANSWERED
    from .kernel_exercises import NOT_ANSWERED_KERNEL
    lines = [NOT_ANSWERED_KERNEL if "gap.check(" in ln else NOT_ANSWERED
             for ln in source.splitlines() if re.search(r"\bcheck_\w+\(|gap\.check\(", ln)
             and not ln.lstrip().startswith(("from ", "import ", "#"))]
    return [new_output("stream", name="stdout", text="".join(ln + "\n" for ln in lines))] if lines else []


def write_student(out: Path | None = None) -> Path:
    """Write the student edition of every notebook (and the notebooks' other files) into ``out``."""
    import nbformat

    from .folders import claim, seal
    out = claim(out or ROOT / "build" / "student", COMMAND)      # refused before anything is written
    src = ROOT / "notebooks"
    for path in sorted(src.iterdir()):
        if path.suffix == ".ipynb":
            nbformat.write(student_notebook(nbformat.read(path, as_version=4)), out / path.name)
        elif path.is_file():
            shutil.copy2(path, out / path.name)
    seal(out, COMMAND)
    return out


COMMAND = "./course student"


def main(argv=None) -> int:
    """The command line (helpers/chapters/folders.py: command_line)."""
    from .folders import command_line

    def write(out) -> int:
        out = write_student(out)
        print(f"student edition written to {out} (solutions, answer hints and their outputs removed)")
        return 0
    return command_line(COMMAND, "build/student", write, argv)


if __name__ == "__main__":
    sys.exit(main())
