"""Bad input gets a TypeError/ValueError that names the problem, before any launch."""
import numpy as np
import pytest

import helpers
from helpers.ops.conv_dgrad import random_problem_args


def good(**over):
    a = random_problem_args(2, 3, 7, 6, 4, 3, 1, 1, "relu", seed=0)
    a.update(over)
    return a


def no_launch(monkeypatch):
    """Make any kernel launch fail the test: errors must come before it."""
    import pyopencl as cl
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", lambda *a, **k: pytest.fail("a kernel was launched"))


@pytest.mark.parametrize("over, err, match", [
    (dict(grad_output=np.zeros((2, 4, 7), np.float32)), ValueError, "grad_output must have 4 dimensions"),
    (dict(grad_output=np.zeros((2, 4, 7, 5), np.float32)), ValueError, r"grad_output must have shape \(N, K, OH, OW\)"),
    (dict(weight=np.zeros((5, 4, 3, 3), np.float32)), ValueError, "first dimension must equal the input's channels"),
    (dict(weight=np.zeros((3, 4, 3, 3), np.float64)), TypeError, "weight must be float32"),
    (dict(grad_output=np.zeros((2, 4, 7, 6), np.int32)), TypeError, "grad_output must be float32"),
    (dict(weight=np.zeros((3, 4, 3, 3), np.float32)[:, :, :, ::-1]), ValueError, "C-contiguous"),
    (dict(weight=np.zeros((3, 4, 3, 3), np.float32).tolist()), TypeError, "must be a NumPy array"),
    (dict(input_shape=(2, 3, 0, 6)), ValueError, "zero-sized"),
    (dict(input_shape=(2, 3, 7)), ValueError, "4 entries"),
    (dict(grad_output=np.zeros((0, 4, 7, 6), np.float32)), ValueError, "zero-sized"),
    (dict(output=None), TypeError, "needs output"),
    (dict(output=np.zeros((2, 4, 7, 5), np.float32)), ValueError, "output must have grad_output's shape"),
    (dict(activation="gelu"), ValueError, "activation must be one of"),
    (dict(stride=0), ValueError, "stride must be >= 1"),
    (dict(stride=1.5), TypeError, "stride must be an integer"),
    (dict(padding=-1), ValueError, "padding must be >= 0"),
    (dict(bias=np.zeros(4, np.float32)), TypeError, "unknown argument"),
])
def test_bad_arguments(ctx, monkeypatch, over, err, match):
    no_launch(monkeypatch)
    with pytest.raises(err, match=match):
        helpers.run_stage("conv_dgrad", "naive", ctx=ctx, **good(**over))


def test_missing_required_argument(ctx):
    a = good()
    del a["weight"]
    with pytest.raises(TypeError, match="weight is required"):
        helpers.run_stage("conv_dgrad", "naive", ctx=ctx, **a)


def test_output_without_activation(ctx):
    with pytest.raises(ValueError, match="only used with an activation"):
        helpers.run_stage("conv_dgrad", "naive", ctx=ctx, **good(activation="none"))


def test_unknown_op_and_stage(ctx):
    with pytest.raises(ValueError, match="unknown op"):
        helpers.run_stage("conv_backward_magic", "naive", ctx=ctx)
    with pytest.raises(ValueError, match="has no stage 'fastest'"):
        helpers.run_stage("conv_dgrad", "fastest", ctx=ctx, **good())
    with pytest.raises(ValueError, match="has no stage 99"):
        helpers.run_stage("conv_dgrad", 99, ctx=ctx, **good())


def test_unknown_define(ctx):
    with pytest.raises(ValueError, match="no JIT parameter TILE"):
        helpers.run_stage("conv_dgrad", "naive", ctx=ctx, defines={"TILE": 8}, **good())


def test_work_group_beyond_the_device(ctx, monkeypatch):
    no_launch(monkeypatch)
    too_big = ctx.devices[0].max_work_group_size * 2
    with pytest.raises(ValueError, match="allows at most"):
        helpers.run_stage("conv_dgrad", "naive", ctx=ctx, defines={"WG": too_big}, **good())


def test_tensor_beyond_the_device(ctx, monkeypatch):
    """A buffer larger than the device can allocate is refused before anything is allocated."""
    no_launch(monkeypatch)
    dev = ctx.devices[0]
    n = dev.max_mem_alloc_size // (4 * 16 * 64 * 64) + 1     # grad_input > max_mem_alloc_size
    dy = np.zeros((1, 1, 1, 1), np.float32)
    big = dict(grad_output=np.broadcast_to(dy, (n, 1, 64, 64)), weight=np.zeros((16, 1, 1, 1), np.float32),
               input_shape=(n, 16, 64, 64))
    # a broadcast view is not contiguous: the first complaint; a real array this size would not fit here
    with pytest.raises(ValueError, match="C-contiguous"):
        helpers.run_stage("conv_dgrad", "naive", ctx=ctx, **big)
    problem = helpers.prepare("conv_dgrad", grad_output=np.zeros((1, 1, 64, 64), np.float32),
                              weight=np.zeros((16, 1, 1, 1), np.float32), input_shape=(1, 16, 64, 64))
    problem.outputs["grad_input"] = (n, 16, 64, 64)
    from helpers.runner import plan_problem
    with pytest.raises(ValueError, match="allocates at most"):
        plan_problem("conv_dgrad", "naive", problem, ctx, None, guard=False)


def test_no_opencl_platform(monkeypatch):
    import pyopencl as cl

    from helpers.engine import devices

    def none():
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")
    monkeypatch.setattr(cl, "get_platforms", none)
    with pytest.raises(helpers.NoDeviceError, match="Install an OpenCL driver"):
        devices.find_device("0:0")


def test_unknown_device_selector():
    with pytest.raises(helpers.NoDeviceError, match="No OpenCL device matches"):
        helpers.get_context("no-such-device-anywhere")


# -- conv_wgrad: the same contract ---------------------------------------------------------

def good_wgrad(**over):
    from helpers.ops.conv_wgrad import random_problem_args as wgrad_args
    a = wgrad_args(2, 3, 7, 6, 4, 3, 1, 1, "relu", seed=0)
    a.update(over)
    return a


@pytest.mark.parametrize("over, err, match", [
    (dict(input=np.zeros((2, 3, 7), np.float32)), ValueError, "input must have 4 dimensions"),
    (dict(input=np.zeros((2, 3, 7, 6), np.float64)), TypeError, "input must be float32"),
    (dict(grad_output=np.zeros((2, 4, 7, 5), np.float32)), ValueError, r"grad_output must have shape \(N, K, OH, OW\)"),
    (dict(grad_output=np.zeros((2, 4, 7, 6), np.int32)), TypeError, "grad_output must be float32"),
    (dict(input=np.zeros((2, 3, 7, 6), np.float32)[:, :, :, ::-1]), ValueError, "C-contiguous"),
    (dict(weight_shape=(5, 4, 3, 3)), ValueError, "first entry must equal the input's channels"),
    (dict(weight_shape=(3, 4, 3)), ValueError, r"4 entries \(C, K, R, S\)"),
    (dict(weight_shape=(3, 4, 3, 0)), ValueError, "zero-sized"),
    (dict(weight_shape=(3, 4, 3, 3.0)), TypeError, "entries must be integers"),
    (dict(weight_shape=(3, 4, 11, 3)), ValueError, "does not fit in the padded"),
    (dict(output=None), TypeError, "needs output"),
    (dict(output=np.zeros((2, 4, 7, 5), np.float32)), ValueError, "output must have grad_output's shape"),
    (dict(activation="gelu"), ValueError, "activation must be one of"),
    (dict(stride=0), ValueError, "stride must be >= 1"),
    (dict(padding=-1), ValueError, "padding must be >= 0"),
    (dict(weight=np.zeros((3, 4, 3, 3), np.float32)), TypeError, "unknown argument"),
])
def test_bad_wgrad_arguments(ctx, monkeypatch, over, err, match):
    no_launch(monkeypatch)
    for stage in helpers.stage_names("conv_wgrad"):
        with pytest.raises(err, match=match):
            helpers.run_stage("conv_wgrad", stage, ctx=ctx, **good_wgrad(**over))


def test_wgrad_missing_arguments(ctx, monkeypatch):
    no_launch(monkeypatch)
    for name in ("input", "grad_output", "weight_shape"):
        a = good_wgrad()
        del a[name]
        with pytest.raises(TypeError, match=f"{name}.* is required"):
            helpers.run_stage("conv_wgrad", "naive", ctx=ctx, **a)
    with pytest.raises(ValueError, match="only used with an activation"):
        helpers.run_stage("conv_wgrad", "naive", ctx=ctx, **good_wgrad(activation="none"))


def test_wgrad_beyond_32_bit_indexing():
    """A weight gradient of more than 2^31 - 1 elements is refused (the shapes alone, no tensor
    that large is made)."""
    x = np.zeros((1, 65536, 1, 1), np.float32)
    dy = np.zeros((1, 65536, 1, 1), np.float32)
    with pytest.raises(ValueError, match="32-bit"):
        helpers.prepare("conv_wgrad", input=x, grad_output=dy, weight_shape=(65536, 65536, 1, 1))
