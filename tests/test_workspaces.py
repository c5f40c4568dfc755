"""Workspaces (scratch buffers): declared with dtype and size by the kernel family, inside guard
zones under test like every other buffer, and counted against a budget the caller can set."""
import dataclasses

import pytest

import helpers
from helpers import stages as registry
from helpers.engine.kernels import kernel_source
from helpers.launch import Workspace
from helpers.ops.conv_forward import random_problem_args
from helpers.runner import prepare, workspace_bytes

ARGS = random_problem_args(1, 3, 5, 5, 3)   # 16 * CO * P = 432 elements of M: not a multiple of WG


def test_workspaces_declare_dtype_and_size():
    s = helpers.get_stage("conv_forward", "wino_naive")
    ws = s.family.workspace(s, prepare("conv_forward", **ARGS), s.defines)
    assert set(ws) == {"U", "V", "M"} and all(isinstance(w, Workspace) and w.dtype == "float32" for w in ws.values())
    assert ws["M"].count == 16 * 3 * 9 and ws["M"].nbytes == 4 * ws["M"].count
    assert workspace_bytes("conv_forward", "wino_naive", **ARGS) == sum(w.nbytes for w in ws.values())


def test_a_stage_over_the_workspace_budget_is_refused_before_launch(ctx, monkeypatch):
    import pyopencl as cl
    need = workspace_bytes("conv_forward", "wino_naive", ctx=ctx, **ARGS)
    helpers.check_stage("conv_forward", "wino_naive", ctx=ctx, workspace_limit=need, **ARGS)
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", lambda *a, **k: pytest.fail("a kernel was launched"))
    with pytest.raises(ValueError, match="budget of"):
        helpers.run_stage("conv_forward", "wino_naive", ctx=ctx, workspace_limit=need - 1, **ARGS)


def test_a_write_past_the_end_of_a_workspace_is_caught(ctx, monkeypatch):
    st = helpers.get_stage("conv_forward", "wino_naive")
    src = kernel_source(st.kernel)
    old, new = "if (idx >= 16 * COP * PP) return;", "if (idx > 16 * COP * PP) return;"
    assert old in src, "the planted bug no longer applies; update this test"
    bad = dataclasses.replace(st, number=91, name="scratch_overrun", source=lambda d: src.replace(old, new))
    monkeypatch.setitem(registry.REGISTRY, "conv_forward", registry.REGISTRY["conv_forward"] + [bad])
    with pytest.raises(helpers.GuardViolation, match="M: .* after the tensor"):
        helpers.run_stage("conv_forward", "scratch_overrun", ctx=ctx, guard=True, **ARGS)
