"""The checks themselves can fail: planted bugs in a copy of the naive kernel are caught."""
import dataclasses

import pytest

import helpers
from helpers import stages as registry
from helpers.engine.build import kernel_source
from helpers.ops.conv_dgrad import random_problem_args

NAIVE = registry.get_stage("conv_dgrad", "naive")
STORE = "dx[((n * C + c) * H + h) * W + x] = grad;"
ACCUM = "grad += GRAD_IN(dy, y, o) * w[((c * K + k) * KH + r) * KW + s];"


def planted(monkeypatch, name, old, new):
    src = kernel_source(NAIVE.kernel)
    assert old in src, "the planted bug no longer applies to the naive kernel; update this test"
    bad = dataclasses.replace(NAIVE, number=90, name=name, title="planted bug",
                              source=lambda d: src.replace(old, new))
    monkeypatch.setitem(registry.REGISTRY, "conv_dgrad", registry.REGISTRY["conv_dgrad"] + [bad])
    return name


ARGS = dict(n=2, c=3, h=7, w=5, k=4, kernel=3, stride=1, padding=1, activation="relu")


def args():
    a = ARGS
    return random_problem_args(a["n"], a["c"], a["h"], a["w"], a["k"], a["kernel"], a["stride"],
                               a["padding"], a["activation"], seed=3)


def test_write_past_the_end_is_caught(ctx, monkeypatch):
    s = planted(monkeypatch, "writes_after", STORE,
                STORE + " if (hw == H * W - 1 && c == C - 1 && n == N - 1) dx[N * C * H * W] = 0.0f;")
    with pytest.raises(helpers.GuardViolation, match="after"):
        helpers.check_stage("conv_dgrad", s, ctx=ctx, guard=True, **args())


def test_write_into_an_input_is_caught(ctx, monkeypatch):
    s = planted(monkeypatch, "writes_input", STORE, STORE + " if (hw == 0) ((__global float*)w)[0] = 1.0f;")
    with pytest.raises(helpers.GuardViolation, match="inside the input"):
        helpers.check_stage("conv_dgrad", s, ctx=ctx, guard=True, **args())


def test_read_before_the_start_is_caught(ctx, monkeypatch):
    s = planted(monkeypatch, "reads_before", ACCUM, ACCUM + " if (hw == 0 && k == 0) grad += dy[o - OW * OH * K * N];")
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_dgrad", s, ctx=ctx, guard=True, **args())


def test_unwritten_output_is_caught(ctx, monkeypatch):
    s = planted(monkeypatch, "skips_one", STORE, "if (!(hw == 3 && c == 0 && n == 0)) " + STORE)
    with pytest.raises(helpers.MismatchError, match="1 of"):
        helpers.check_stage("conv_dgrad", s, ctx=ctx, guard=True, **args())


def test_one_dropped_term_is_caught(ctx, monkeypatch):
    s = planted(monkeypatch, "drops_term", "for (int k = 0; k < K; k++)", "for (int k = 0; k < K - 1; k++)")
    with pytest.raises(helpers.MismatchError):
        helpers.check_stage("conv_dgrad", s, ctx=ctx, **args())


def test_build_error_shows_the_offending_line(ctx, monkeypatch):
    s = planted(monkeypatch, "typo", "const int h = hw / W;", "const int h = hw / W")
    with pytest.raises(helpers.KernelBuildError, match="hw / W"):
        helpers.run_stage("conv_dgrad", s, ctx=ctx, **args())
