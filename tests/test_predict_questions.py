"""A chapter that asks its reader to predict how its stage runs ("**Predict**, then measure") keeps
that answer to itself: no earlier chapter shows the stage's measurements. Chapter 02 once did,
through its ladder of the recorded GPU run (every stage up to 08) and the CUDA twins' table
(stage 03 beside 02)."""
import json
import re
from pathlib import Path

import pytest

from helpers.stages import REGISTRY

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]*.ipynb"))


def chapter(path: Path) -> int:
    return int(path.name[:2])


def cells(path: Path) -> list:
    return json.loads(path.read_text())["cells"]


def output_text(cell: dict) -> str:
    out = []
    for o in cell.get("outputs", []):
        data = o.get("data", {})
        out += [o.get("text", ""), data.get("text/plain", ""), data.get("text/html", ""), data.get("text/markdown", "")]
    return "".join("".join(t) if isinstance(t, list) else t for t in out)


def predicted_stages() -> dict:
    """{chapter file: the stage keys its "Predict" question is about}: the input-gradient stages
    numbered as the chapter that asks."""
    out = {}
    for path in NOTEBOOKS:
        if any(c["cell_type"] == "markdown" and "**Predict**" in "".join(c["source"]) for c in cells(path)):
            keys = [s.key for s in REGISTRY["conv_dgrad"] if s.number == chapter(path)]
            if keys:
                out[path.name] = keys
    return out


def shown_before(keys: list, name: str, notebooks=NOTEBOOKS) -> list:
    """Where a notebook before the one named ``name`` prints one of ``keys`` in an output."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, keys)) + r")\b")
    return [f"{p.name} cell {i}: {m}" for p in notebooks if p.name < name
            for i, c in enumerate(cells(p)) for m in pattern.findall(output_text(c))]


def test_the_predict_questions_are_found():
    assert {"03_memoized_bounds.ipynb", "05_input_vectorization.ipynb"} <= set(predicted_stages())


@pytest.mark.parametrize("name, keys", sorted(predicted_stages().items()))
def test_no_earlier_chapter_prints_what_a_predict_question_asks(name, keys):
    shown = shown_before(keys, name)
    assert not shown, f"{name} asks to predict {keys}, which an earlier chapter shows: {shown}"


def test_the_ladder_chapters_plot_only_the_stages_so_far():
    """Chapters 02-08 draw the recorded GPU's ladder through ladder_so_far(run, their number), which
    cuts every run at their stage (a figure is an image: its stages cannot be read back)."""
    for path in NOTEBOOKS:
        if not 2 <= chapter(path) <= 8:
            continue
        source = "\n".join("".join(c["source"]) for c in cells(path) if c["cell_type"] == "code")
        assert "plots.ladder(" not in source, f"{path.name} plots a ladder past its own stage"
        assert re.findall(r"ladder_so_far\(\w+, (\d+)\)", source) == [str(chapter(path))], path.name


def test_the_check_finds_a_later_stage_printed_earlier(tmp_path):
    """Planted: chapter 02 printing stage 03's row again, in an output of its last code cell."""
    nb = json.loads((NOTEBOOKS[0].parent / "02_naive_dgrad.ipynb").read_text())
    last = max(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    nb["cells"][last]["outputs"].append(
        {"output_type": "stream", "name": "stdout", "text": ["  03_memoized_bounds  opencl  4566.1 GFLOP/s\n"]})
    planted = tmp_path / "02_naive_dgrad.ipynb"
    planted.write_text(json.dumps(nb))
    notebooks = [planted if p.name == planted.name else p for p in NOTEBOOKS]
    assert shown_before(["03_memoized_bounds"], "03_memoized_bounds.ipynb", notebooks) == [
        f"02_naive_dgrad.ipynb cell {last}: 03_memoized_bounds"]


PREDICT = "# PREDICT BEFORE RUNNING"


def test_the_cell_after_each_predict_prompt_waits_for_the_prediction():
    """The first code cell after a "Predict" prompt (and the launch chapter 01a asks to compute) is
    marked, so the student edition leaves its output for the learner to make."""
    unmarked = []
    for path in NOTEBOOKS:
        cs = cells(path)
        for i, c in enumerate(cs):
            text = "".join(c["source"])
            if c["cell_type"] == "markdown" and ("**Predict**" in text or "Predict, then" in text):
                j = next(k for k in range(i + 1, len(cs)) if cs[k]["cell_type"] == "code")
                if PREDICT not in "".join(cs[j]["source"]):
                    unmarked.append(f"{path.name} cell {j}")
    assert not unmarked, f"cells that answer a Predict prompt in the student edition: {unmarked}"


def test_the_student_edition_shows_no_launch_before_it_is_predicted():
    """Chapter 01a's exercise asks for the launch of N=2, C=16, 13x9, WG=64: the teacher's stored
    output prints it (4096 work-items, 352 idle, 64 groups); the student's cell holds no output."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbgrader", reason="the student edition clears solutions with nbgrader")
    from helpers.tools.editions import student_notebook
    path = NOTEBOOKS[0].parent / "01a_execution_and_memory_model.ipynb"
    teacher = nbformat.read(path, as_version=4)
    student = student_notebook(teacher)
    shown = lambda nb: "".join(output_text(c) for c in nb.cells if c.cell_type == "code")
    assert "4096 work-items, 352 of them return at once" in shown(teacher)
    assert "4096 work-items, 352 of them return at once" not in shown(student)
    for cell in student.cells:
        if PREDICT in cell.source:
            assert cell.outputs == [] and cell.execution_count is None and "NBVAL_CHECK_OUTPUT" not in cell.source
