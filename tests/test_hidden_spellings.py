"""A kernel exercise's answer stays hidden in the student edition however a later stage spells it:
chapter 09's diff of 09_local_tile and 09_prefetch showed the tile copy's lines (with `(k0)` and an
extra term) next to the gap, and chapter 12's diff of stages 01 and 02 showed the padding test the
gap asks for (with `live &&` in front), and chapter 14's diffs showed 05_fused's inv_std (its count
named n_i) above the exercise that asks for it; chapter 16's depthwise rungs and forward implicit GEMM,
listed above its kernel exercise, spell its dilated tap and its group offset. Checked on the text
itself, white space removed, with no use of the edition's own matching."""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# (chapter, an expression of its kernel exercise's answer that a later stage's listing repeats)
SPELLED = [
    ("09_local_memory", "k < K && oh >= 0 && oh < OH && ow >= 0 && ow < OW"),
    ("09_local_memory", "GRAD_IN(dy, y, ((n * K + k) * OH + oh) * OW + ow)"),
    ("09_local_memory", "oh = oh0 + py, ow = ow0 + px"),
    ("12_winograd", "h >= 0 && h < IH && x_ >= 0 && x_ < IW"),
    ("14_batch_norm", "1.0f / sqrt(m2 / n_i + eps)"),
    ("16_any_shape", "h + PH - r * DH - t.oh0 * SH"),
    ("16_any_shape", "x + PW - s * DW - t.ow0 * SW"),
    ("16_any_shape", "(n * C + g * CG) * V"),
    ("16_any_shape", "(img * K + g * KG) * OV"),
]


def squeezed(nb) -> str:
    """Every source and stored output of a notebook (an nbformat node or its JSON), white space removed."""
    parts = []
    for cell in nb["cells"]:
        parts.append("".join(cell["source"]))
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            for text in (out.get("text", ""), *(data.get(k, "") for k in ("text/plain", "text/html", "text/markdown"))):
                parts.append("".join(text) if isinstance(text, list) else text)
    import html
    return re.sub(r"\s+", "", html.unescape(re.sub(r"<[^>]+>", "", "\n".join(parts))))


@pytest.mark.parametrize("chapter, expression", SPELLED)
def test_a_later_spelling_of_an_answer_is_hidden_in_the_student_edition(chapter, expression):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbgrader", reason="the student edition clears solutions with nbgrader")
    from helpers.tools.editions import student_notebook
    path = ROOT / "notebooks" / f"{chapter}.ipynb"
    key = re.sub(r"\s+", "", expression)
    assert key in squeezed(json.loads(path.read_text())), "the teacher's chapter shows it (the check can fail)"
    assert key not in squeezed(student_notebook(nbformat.read(path, as_version=4)))


def test_the_tensor_core_header_leaves_the_accumulator_fragment_to_chapter_13s_exercise():
    """Chapter 13 lists kernels/common/tc.cuh above its exercise 1 (which elements of C a lane
    holds, read from the picture): the header's comments name the A and B fragments, not C's."""
    text = re.sub(r"\s+", "", (ROOT / "kernels" / "common" / "tc.cuh").read_text())
    nb = squeezed(json.loads((ROOT / "notebooks" / "13_tensor_cores.ipynb").read_text()))
    for closed_form in ("C[g][2t", "C[g+8][2t", "rowg,channels2t"):
        assert closed_form not in text and closed_form not in nb, closed_form
