"""Every chapter is a lab a learner can finish in one sitting (60-90 minutes):

- at most 4,500 words of prose (markdown cells; words are white-space separated tokens), deep
  dives included: evidence beyond the lesson goes into a deep dive beside its chapter;
- a numbered chapter opens with its aims: the first cell names what the learner will learn
  (**What you will learn**) and the lab's targets (**Targets**);
- it closes with **What you learned** (a `## What you learned` section after its last exercise:
  a few bullets and one recap table);
- every exercise has graded hints: a visible nudge (**Hint**) and more help folded in `<details>`
  blocks, in the markdown above the exercise's cell.

A deep dive (its title says "Deep dive") keeps only the word limit. A chapter not yet reworked
into a lab is listed in PENDING with the reason, as an expected failure that fails once it passes
(strict), so the list cannot outlive the work.
"""
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WORDS = 4500
EXERCISE = re.compile(r"^ok = (check_\w+|gap\.check)\(", re.M)
PENDING: dict = {}   # (test, notebook stem) -> why it fails today


def prose_words(nb) -> int:
    """Words of markdown, each run of letters and digits one word ("N·H·W" is three, "x1.17" two):
    the stricter count, so that a chapter under the limit here is under it however words are counted."""
    return sum(len(re.findall(r"\w+", c.source)) for c in nb.cells if c.cell_type == "markdown")


def is_deep_dive(nb) -> bool:
    return bool(nb.cells) and "deep dive" in nb.cells[0].source.splitlines()[0].lower()


def structure_problems(nb) -> list[str]:
    """What keeps a numbered chapter from the lab's shape (empty when it has it)."""
    out = []
    first = nb.cells[0]
    if first.cell_type != "markdown" or not re.match(r"# \d\d[a-z]? · ", first.source):
        out.append("the first cell is not the chapter's title ('# NN · title')")
    for label in ("What you will learn", "Targets"):
        if not re.search(rf"(\*\*|^#+ ){label}\b", first.source, re.M):
            out.append(f"the first cell does not state '{label}'")
    learned = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
               and re.search(r"^#{2,3} What you learned\s*$", c.source, re.M)]
    exercises = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and EXERCISE.search(c.source)]
    if len(learned) != 1:
        out.append(f"{len(learned)} '## What you learned' sections, not one")
    else:
        text = nb.cells[learned[0]].source.split("What you learned", 1)[1]
        if exercises and learned[0] < exercises[-1]:
            out.append("'What you learned' comes before the last exercise")
        if len(re.findall(r"^\s*[-*] ", text, re.M)) < 2:
            out.append("'What you learned' has fewer than two bullets")
        if not re.search(r"^\|.*\|\s*\n\|[\s:|-]+\|\s*\n\|", text, re.M):
            out.append("'What you learned' has no recap table")
    for i in exercises:
        above = next((c.source for c in reversed(nb.cells[:i]) if c.cell_type == "markdown"), "")
        if "**Hint**" not in above or "<details>" not in above:
            out.append(f"the exercise in cell {i} has no graded hints above it (**Hint**, then <details>)")
    return out


def _params(kind):
    return [pytest.param(p, id=p.stem, marks=pytest.mark.xfail(reason=PENDING[(kind, p.stem)], strict=True))
            if (kind, p.stem) in PENDING else pytest.param(p, id=p.stem) for p in NOTEBOOKS]


@pytest.mark.parametrize("path", _params("words"))
def test_prose_fits_one_lab(path):
    words = prose_words(nbformat.read(path, as_version=4))
    assert words <= WORDS, f"{path.name}: {words:,} words of prose, more than {WORDS:,}"


@pytest.mark.parametrize("path", _params("structure"))
def test_chapter_is_a_lab(path):
    nb = nbformat.read(path, as_version=4)
    if is_deep_dive(nb):
        pytest.skip("a deep dive: evidence beside its chapter, not a lab of its own")
    problems = structure_problems(nb)
    assert not problems, f"{path.name}: " + "; ".join(problems)


def test_structure_check_can_fail():
    """A notebook without aims, recap or hints is refused on each count."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 99 · A chapter\n\nSome text."),
                nbformat.v4.new_markdown_cell("## Exercise\n\nWrite it."),
                nbformat.v4.new_code_cell("ok = check_thing(f)")]
    problems = " ".join(structure_problems(nb))
    for says in ("What you will learn", "Targets", "0 '## What you learned'", "no graded hints"):
        assert says in problems, problems
    nb.cells[1].source += "\n\n**Hint**: look up.\n\n<details><summary>More</summary>Further up.</details>"
    nb.cells.append(nbformat.v4.new_markdown_cell("## What you learned\n\n- one\n- two\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n"))
    nb.cells[0].source += "\n\n**What you will learn**\n\n- this\n\n**Targets**\n\n- that"
    assert structure_problems(nb) == []
