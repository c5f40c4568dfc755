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
