"""The OpenCL-CUDA vocabulary that chapters 10 and 13 show: one list, every row complete."""
import pytest

from helpers.chapters import vocabulary as v


def test_every_row_names_both_words_and_a_meaning():
    for group, opencl, cuda, meaning in v.TERMS:
        assert group in v.GROUPS and opencl and cuda and meaning


def test_the_false_friend_is_explained():
    """'local memory' means on-chip group memory in OpenCL and per-thread spill space in CUDA."""
    text = v.markdown("memory")
    assert "`__shared__`" in text and "spill" in text


def test_an_unknown_group_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="the groups are execution, memory"):
        v.rows("nope")


def _first_use(cells, pattern):
    import re
    return next((i for i, c in enumerate(cells) if c.cell_type == "markdown" and re.search(pattern, c.source)), None)


def test_chapter_13_shows_the_table_before_it_speaks_cuda():
    """Chapter 13 is where CUDA's words take over: the table comes before its prose first says
    thread, block, shared memory or __syncthreads."""
    from pathlib import Path

    import nbformat
    nb = nbformat.read(Path(__file__).resolve().parent.parent / "notebooks" / "13_tensor_cores.ipynb", as_version=4)
    table = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "vocabulary()" in c.source)
    words = (r"\bthreads?\b", r"\bblocks?\b", r"shared memory", r"__syncthreads")
    for word in words:
        earlier = _first_use(nb.cells[:table], word)
        # the cell that introduces the table may name the words it maps; nothing before it may use them
        assert earlier is None or earlier == table - 1, f"'{word}' is used in cell {earlier}, before the table"
    assert sum(_first_use(nb.cells[table + 1:], w) is not None for w in words) >= 3, "the chapter no longer speaks CUDA?"
