"""The guard-region checks catch the boundary mistakes that stages 04 and 05 could make.

Each test builds a stage with one deliberate off-by-one (a copy of its source with one line
changed, registered for the test only) and asserts that the grid check fails, while the real
stage passes the same shapes. If these tests fail, the guards no longer protect the ladder.
"""
import dataclasses

import pytest

import helpers
from helpers.engine.build import kernel_source
from helpers.ops.conv_dgrad import random_problem_args
from helpers.stages import REGISTRY, get_stage

# 3x3 stride 1 shapes with borders, one (c, k) block at the end of the weights, an activation
SHAPES = [(1, 1, 5, 6, 1, "none"), (2, 3, 7, 4, 5, "sigmoid"), (1, 2, 1, 3, 3, "relu")]


def _variant(monkeypatch, stage, old, new, name):
    base = get_stage("conv_dgrad", stage)
    text = kernel_source(base.kernel)
    header = kernel_source("common/dgrad.h")
    if old in text:
        source = text.replace(old, new)
    else:  # the change is in the shared header: inline the changed header
        assert old in header, f"{old!r} is in neither {base.kernel} nor dgrad.h"
        source = text.replace('#include "dgrad.h"', header.replace(old, new))
    broken = dataclasses.replace(base, number=90, name=name, source=lambda d, s=source: s)
    monkeypatch.setitem(REGISTRY, "conv_dgrad", REGISTRY["conv_dgrad"] + [broken])
    return name


def _check_all(ctx, stage):
    for i, (n, c, h, w, k, act) in enumerate(SHAPES):
        args = random_problem_args(n, c, h, w, k, 3, 1, 1, act, seed=i)
        helpers.check_stage("conv_dgrad", stage, ctx=ctx, guard=True, **args)


@pytest.mark.parametrize("stage", ["weight_vec", "input_vec"])
def test_real_stages_pass(ctx, stage):
    _check_all(ctx, stage)


def test_weight_load_one_past_the_block_is_caught(ctx, monkeypatch):
    name = _variant(monkeypatch, "weight_vec", "u.v.hi = p[8];", "u.v.hi = p[8] + 0.0f * p[9];", "overread_w")
    with pytest.raises(AssertionError):
        _check_all(ctx, name)


def test_vector_window_one_column_left_is_caught(ctx, monkeypatch):
    name = _variant(monkeypatch, "input_vec", "const bool inside = x + PAD - 2 >= 0 && x + PAD < OW;",
                    "const bool inside = x + PAD - 2 >= -1 && x + PAD < OW;", "overread_left")
    with pytest.raises(AssertionError):
        _check_all(ctx, name)


def test_vector_window_one_column_right_is_caught(ctx, monkeypatch):
    name = _variant(monkeypatch, "input_vec", "const bool inside = x + PAD - 2 >= 0 && x + PAD < OW;",
                    "const bool inside = x + PAD - 2 >= 0 && x + PAD <= OW;", "overread_right")
    with pytest.raises(AssertionError):
        _check_all(ctx, name)
