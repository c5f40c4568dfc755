"""Prose from data: every number quoted in a chapter's text (ratios such as x1.23 or 1.23x,
decimals, percentages) is printed by a code cell above it in the committed notebook (the same
number, or a printed one rounded to the digits quoted). The cells
print from results/, so a new recording that changes a number fails here until the prose is
updated; a number the text derives itself is listed below with its reason."""
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NUMBER = re.compile(r"(?<![\w./-])(?:x?\d+\.\d+x?|\d+(?:\.\d+)?\s?%)(?![\w.])")
# Numbers that are inputs or arithmetic stated in the same sentence, not measurements.
DERIVED = {
    "07_combining_input_depth": {"9.0": "Hopper's compute capability, a name, not a measurement"},
    "04_weight_vectorization": {"4.5": "9 requests over 2, stated beside it"},
    "12_winograd": {"2.25": "36 multiplications over 16, derived in the chapter"},
    "14_batch_norm": {"0.1": "the momentum, an input", "0.01": "the noise scale of the example, an input"},
}


def _core(quoted: str) -> str:
    return re.sub(r"^x|x$|\s?%$", "", quoted)


TOKEN = re.compile(r"\d+(?:\.\d+)?")


def _shown(core: str, printed: set) -> bool:
    """The quoted number is a printed number, or a printed one rounded to the quoted digits."""
    if core in printed:
        return True
    digits = len(core.split(".")[1]) if "." in core else 0
    return any("." in p and len(p.split(".")[1]) > digits and f"{float(p):.{digits}f}" == core for p in printed)


def unprinted_numbers(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    allowed = DERIVED.get(path.stem, {})
    printed, missing = set(), []
    for cell in nb.cells:
        if cell.cell_type == "code":
            for out in cell.get("outputs", []):
                printed |= set(TOKEN.findall(out.get("text", "") + out.get("data", {}).get("text/plain", "")))
        elif cell.cell_type == "markdown":
            for quoted in NUMBER.findall(cell.source):
                core = _core(quoted)
                if not _shown(core, printed) and core not in allowed:
                    missing.append(quoted)
    return missing


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_quoted_number_is_printed_above_it(path):
    missing = unprinted_numbers(path)
    assert not missing, (f"{path.name}: numbers in the prose that no cell above prints: {missing}; print them "
                         f"from results/ in a cell above, or compute them into the text")


def test_cpu_statements_say_when_the_spread_hides_a_difference():
    from helpers.chapters.pictures_direct import describe_step
    row = lambda n, t, q1, q3: {"layer": "a", "key": f"0{n}_s{n}", "number": n, "stage": f"s{n}",
                                "median_ms": t, "q1_ms": q1, "q3_ms": q3, "gflops": 1 / t, "x_first": 4 / t}
    run = {"device": {"name": "dev"}, "rows": [row(2, 4.0, 3.0, 5.0), row(3, 3.5, 3.2, 3.9)]}
    assert "within the spread" in describe_step(run, 3)[1]
    run["rows"][1] = row(3, 2.0, 1.9, 2.1)
    assert "2.00x faster" in describe_step(run, 3)[1]
