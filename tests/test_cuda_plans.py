"""CUDA plans on device tensors: one interface on both backends.

Without a GPU: the two tensor classes and the two plan classes have the same public interface
(introspection); CudaTensor's own code (guard zones, checks, counted transfers) runs against
host memory standing in for the GPU's and must lay out and report guards exactly as DeviceTensor
does; a tensor of one backend given to a stage or bound to a plan of the other is refused with one
line naming both, before anything is built.

On an NVIDIA GPU with CuPy (`pytest tests/test_cuda_plans.py -k gpu`; skipped elsewhere): two
CUDA plans chained on the device give what NumPy-in, NumPy-out runs give, without one host copy
between them; a plan re-bound to a second input gives that input's result; bind refuses a wrong
shape, dtype or backend; guards are checked on bound tensors; a re-bound plan is checked again
before it is timed; float16 tensors through a tensor-core stage.
"""
import inspect

import numpy as np
import pytest

import helpers
from helpers import runner
from helpers.engine import tensor as tensors
from helpers.engine.backends import BackendUnavailable, cuda, cuda_missing
from helpers.engine.backends.cuda import CudaTensor
from helpers.engine.backends.opencl import DeviceTensor
from helpers.engine.tensor import from_bfloat16, to_bfloat16
from helpers.engine.timing import time_plan
from helpers.ops.conv_dgrad import random_problem_args
from helpers.engine.backends import opencl
from helpers.engine.backends.opencl import ClPlan
from helpers.engine.backends.cuda import CudaPlan
from helpers.runner import plan_stage

NO_CUDA = cuda_missing()
gpu = pytest.mark.skipif(NO_CUDA is not None, reason=f"{NO_CUDA}")
DTYPES = ["float32", "float16", "bfloat16"]


def public(cls) -> set:
    return {n for n in dir(cls) if not n.startswith("_")}


@pytest.fixture
def host_cuda(monkeypatch):
    """CudaTensor with host memory standing in for the GPU's: its own code runs on any machine,
    only where the values live (``_allocate``, ``_transfer``) and the device lookup change."""
    monkeypatch.setattr(cuda, "device", lambda: {"id": 0, "name": "host stand-in"})
    monkeypatch.setattr(CudaTensor, "_allocate", lambda self, count: np.empty(count, self.storage))
    monkeypatch.setattr(CudaTensor, "_transfer", lambda self, dest, src: np.copyto(dest, src))
    return CudaTensor


def _values(seed=0, shape=(2, 3, 4, 5)):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- without a GPU -----------------------------------------------------------------------------

def test_the_tensor_classes_have_one_interface(ctx, host_cuda):
    assert public(DeviceTensor) == public(CudaTensor)
    assert {"from_array", "read", "write", "check_guards", "backend"} <= public(CudaTensor)
    a = DeviceTensor.from_array(ctx, _values(), guard=True)
    b = CudaTensor.from_array(_values(), guard=True)
    # the same fields on an instance, apart from where each lives (context and queue; device)
    assert set(vars(a)) - {"ctx", "queue"} == set(vars(b)) - {"device"}
    assert {"name", "shape", "dtype", "layout", "nbytes", "size", "buffer", "guard"} <= set(vars(b))
    # from_array takes the same arguments, apart from the OpenCL context and queue
    cl_args = [p for p in inspect.signature(DeviceTensor.from_array).parameters if p not in ("ctx", "queue")]
    assert cl_args == list(inspect.signature(CudaTensor.from_array).parameters)
    assert (a.backend, b.backend) == ("opencl", "cuda")
    assert helpers.CudaTensor is CudaTensor and helpers.DeviceTensor is DeviceTensor


def test_the_plan_classes_have_one_interface():
    assert public(ClPlan) == public(CudaPlan)
    assert {"tensor", "bind", "enqueue", "time", "time_steps", "outputs", "check_guards", "result",
            "ensure_checked"} <= public(CudaPlan)
    for name in ("tensor", "bind"):      # one implementation, not two that can drift
        assert getattr(ClPlan, name) is getattr(CudaPlan, name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_tensor_round_trip_and_counted_transfers(host_cuda, dtype):
    x = _values(1)
    before = dict(tensors.TRANSFERS)
    t = CudaTensor.from_array(x, dtype=dtype, guard=True)
    assert (t.dtype, t.shape, t.layout, t.nbytes) == (dtype, x.shape, "NCHW", x.size * (4 if dtype == "float32" else 2))
    expected = {"float32": x, "float16": x.astype(np.float16),
                "bfloat16": from_bfloat16(to_bfloat16(x)).reshape(x.shape)}[dtype]
    assert np.array_equal(t.read(), expected)
    assert t.check_guards() is None
    t.write(-x)
    assert np.array_equal(t.read(), -expected)
    assert t.check_guards() is None, "a write from the host is not a stray write"
    counted = {k: tensors.TRANSFERS[k] - before.get(k, 0) for k in ("upload", "read")}
    assert counted == {"upload": 2, "read": 4}, counted


def _corrupt(t, index: int) -> None:
    """Overwrite one stored element of ``t``'s guarded buffer (index into the whole of it)."""
    whole = np.empty_like(t.initial)
    t._transfer(whole, t.parent)
    whole.view(f"u{whole.itemsize}")[index] ^= 1        # one bit flipped
    t._transfer(t.parent, whole)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("is_input", [True, False], ids=["input", "output"])
def test_cuda_guards_are_the_opencl_guards(ctx, host_cuda, dtype, is_input):
    """The same zones (NaN around and inside outputs, canaries around outputs, an input's contents
    read-only), the same bits, and the same report for the same stray write."""
    x = _values(2) if is_input else None

    def pair():
        a = DeviceTensor(ctx, helpers.get_queue(ctx), "t", (2, 3, 4, 5), x, True, is_input, dtype)
        return a, CudaTensor("t", (2, 3, 4, 5), x, True, is_input, dtype)
    a, b = pair()
    assert a.pad == b.pad, "this OpenCL device's alignment widens its guard zones; compare zone by zone"
    assert a.initial.tobytes() == b.initial.tobytes()
    for where in [0, a.pad - 1, a.pad + a.size, a.pad + a.size + 7] + ([a.pad + 5] if is_input else []):
        a, b = pair()
        _corrupt(a, where)
        _corrupt(b, where)
        assert b.check_guards() == a.check_guards() is not None
    if not is_input:    # an output's body is meant to be written
        a, b = pair()
        _corrupt(b, b.pad + 5)
        assert b.check_guards() is None


def test_an_opencl_stage_refuses_a_cuda_tensor_before_building(ctx, host_cuda, monkeypatch):
    a = random_problem_args(1, 4, 5, 5, 3, seed=2)
    monkeypatch.setattr(opencl, "build", lambda *args, **kw: pytest.fail("built before the refusal"))
    t = CudaTensor.from_array(a["grad_output"])
    with pytest.raises(TypeError, match=r"^grad_output: stage 02_naive runs on OpenCL, but the CudaTensor "
                                        r"given lives on CUDA; pass a NumPy array or a DeviceTensor$"):
        helpers.run_stage("conv_dgrad", "naive", ctx=ctx, **{**a, "grad_output": t})


def test_a_cuda_stage_refuses_an_opencl_tensor_first(ctx):
    """Refused for what it is, before CUDA is looked for (so the same message with or without a GPU)."""
    a = random_problem_args(1, 4, 5, 5, 3, seed=2)
    t = DeviceTensor.from_array(ctx, a["weight"])
    with pytest.raises(TypeError, match=r"^weight: stage 02_naive_cuda runs on CUDA, but the DeviceTensor "
                                        r"given lives on OpenCL; pass a NumPy array or a CudaTensor$"):
        helpers.run_stage("conv_dgrad", "naive_cuda", **{**a, "weight": t})


def test_an_opencl_plan_refuses_to_bind_a_cuda_tensor(ctx, host_cuda):
    a = random_problem_args(1, 4, 5, 5, 3, seed=2)
    plan = plan_stage("conv_dgrad", "naive", ctx=ctx, **a)
    old = plan.tensor("grad_output")
    with pytest.raises(TypeError, match="runs on OpenCL, but the CudaTensor given lives on CUDA"):
        plan.bind(grad_output=CudaTensor.from_array(a["grad_output"]))
    with pytest.raises(TypeError, match="bind: grad_output must be a DeviceTensor, got ndarray"):
        plan.bind(grad_output=a["grad_output"])
    assert plan.tensor("grad_output") is old


def test_binding_an_alias_is_refused(ctx):
    """Without an activation, `output` is unused and shares grad_output's tensor: it follows a
    re-bound grad_output, and binding it alone would split the two."""
    a = random_problem_args(1, 4, 5, 5, 3, seed=2)
    plan = plan_stage("conv_dgrad", "naive", ctx=ctx, **a)
    other = DeviceTensor.from_array(ctx, a["grad_output"])
    with pytest.raises(ValueError, match="bind: output is unused in this problem and shares grad_output's tensor"):
        plan.bind(output=other)
    plan.bind(grad_output=other)
    assert plan.tensor("output") is other


@pytest.mark.skipif(NO_CUDA is None, reason="CUDA is available here: the tensors are made instead")
def test_a_cuda_tensor_needs_cuda():
    with pytest.raises(BackendUnavailable, match="CuPy|NVIDIA GPU"):
        CudaTensor.from_array(_values())


# ---- on an NVIDIA GPU --------------------------------------------------------------------------

def _two_layers(seed=0):
    """Two input gradients in a row: dx1 (N, 5, 9, 7) from dy, then dx2 (N, 3, 9, 7) from dx1."""
    first = random_problem_args(2, 5, 9, 7, 4, seed=seed)
    second = random_problem_args(2, 3, 9, 7, 5, seed=seed + 1)
    return first, second


@gpu
@pytest.mark.parametrize("stages", [("naive_cuda", "memoized_bounds_cuda"), ("naive_cuda", "naive_cuda")])
def test_gpu_two_cuda_plans_chain_on_the_device(stages, monkeypatch):
    first_args, second_args = _two_layers()
    dx1 = helpers.run_stage("conv_dgrad", stages[0], **first_args)
    dx2 = helpers.run_stage("conv_dgrad", stages[1], **{**second_args, "grad_output": dx1})

    first = plan_stage("conv_dgrad", stages[0], guard=True, **first_args)
    second = plan_stage("conv_dgrad", stages[1], guard=True,
                        **{**second_args, "grad_output": first.tensor("grad_input")})
    assert second.tensor("grad_output") is first.tensor("grad_input")
    before = dict(tensors.TRANSFERS)
    monkeypatch.setattr(CudaTensor, "_transfer", lambda *a: pytest.fail("a host copy between the chained plans"))
    first.enqueue()
    second.enqueue()
    first.queue.finish()
    monkeypatch.undo()
    assert dict(tensors.TRANSFERS) == before
    first.check_guards()
    second.check_guards()
    assert np.array_equal(first.result(), dx1) and np.array_equal(second.result(), dx2)
    helpers.check_outputs(second)           # its reference reads the chained input back


@gpu
def test_gpu_a_cuda_plan_rebound_to_a_second_input():
    a = random_problem_args(2, 4, 6, 6, 5, seed=5)
    b = random_problem_args(2, 4, 6, 6, 5, seed=6)
    plan = plan_stage("conv_dgrad", "memoized_bounds_cuda", guard=True, **a)
    plan.enqueue()
    helpers.check_outputs(plan)
    other = CudaTensor.from_array(b["grad_output"], guard=True)
    uploads = tensors.TRANSFERS["upload"]
    plan.bind(grad_output=other)
    assert plan.tensor("grad_output") is other and plan.tensor("output") is other   # its alias too
    assert not plan.checked and tensors.TRANSFERS["upload"] == uploads
    plan.enqueue()
    expected = helpers.run_stage("conv_dgrad", "memoized_bounds_cuda", **{**a, "grad_output": b["grad_output"]})
    assert np.array_equal(plan.result(), expected)
    helpers.check_outputs(plan)


@gpu
def test_gpu_a_cuda_plan_rebound_to_another_output():
    a = random_problem_args(2, 4, 6, 6, 5, seed=5)
    plan = plan_stage("conv_dgrad", "naive_cuda", **a)
    out = CudaTensor("dx", a["input_shape"], guard=True)       # an output: NaN inside, canaries around
    plan.bind(grad_input=out)
    assert plan.tensor("grad_input") is out
    plan.enqueue()
    assert out.check_guards() is None
    assert np.array_equal(out.read(), helpers.run_stage("conv_dgrad", "naive_cuda", **a))


@gpu
def test_gpu_bind_refuses_wrong_shape_dtype_and_backend(ctx):
    a = random_problem_args(2, 4, 6, 6, 5, seed=5)
    plan = plan_stage("conv_dgrad", "naive_cuda", **a)
    old = plan.tensor("grad_output")
    with pytest.raises(ValueError, match=r"bind: grad_output must have shape \(2, 5, 6, 6\) \(NCHW\), got \(2, 5, 6, 5\)"):
        plan.bind(grad_output=CudaTensor.from_array(a["grad_output"][..., :5].copy()))
    with pytest.raises(ValueError, match="bind: weight must have shape"):
        plan.bind(weight=old)
    with pytest.raises(TypeError, match="grad_output: stage 02_naive_cuda reads float32 tensors, got a float16"):
        plan.bind(grad_output=CudaTensor.from_array(a["grad_output"].astype(np.float16)))
    with pytest.raises(TypeError, match="stage 02_naive_cuda runs on CUDA, but the DeviceTensor given lives on OpenCL"):
        plan.bind(grad_output=DeviceTensor.from_array(ctx, a["grad_output"]))
    with pytest.raises(ValueError, match=r"must be a NCHW tensor, got a NHWC device tensor"):
        helpers.run_stage("conv_dgrad", "naive_cuda",
                          **{**a, "grad_output": CudaTensor.from_array(a["grad_output"], layout="NHWC")})
    assert plan.tensor("grad_output") is old


@gpu
def test_gpu_guards_are_checked_on_bound_tensors():
    a = random_problem_args(2, 4, 6, 6, 5, seed=5)
    plan = plan_stage("conv_dgrad", "naive_cuda", guard=True, **a)
    bound = CudaTensor.from_array(a["grad_output"], guard=True, name="bound")
    plan.bind(grad_output=bound)
    plan.enqueue()
    plan.result()                     # guarded: checks every tensor, the bound one included
    bound.parent[bound.pad + bound.size + 3] = 0      # a stray write just past the bound tensor
    with pytest.raises(helpers.GuardViolation, match="bound: 1 value.* changed after the tensor"):
        plan.check_guards()


@gpu
def test_gpu_a_rebound_plan_is_checked_again_before_timing(monkeypatch):
    a = random_problem_args(2, 4, 6, 6, 5, seed=5)
    plan = plan_stage("conv_dgrad", "naive_cuda", **a)
    time_plan(plan, warmup=1, repeats=3, flush_bytes=0)
    assert plan.checked
    plan.bind(grad_output=CudaTensor.from_array(a["grad_output"] * 2))
    assert not plan.checked

    def refuse(p, expected=None):
        raise helpers.MismatchError("planted: the check ran")
    monkeypatch.setattr(runner, "check_plan", refuse)
    with pytest.raises(helpers.MismatchError, match="planted"):
        time_plan(plan, warmup=1, repeats=3, flush_bytes=0)
    monkeypatch.undo()
    assert len(time_plan(plan, warmup=1, repeats=3, flush_bytes=0).times_ms) == 3 and plan.checked


@gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_cuda_tensor_round_trip(dtype):
    x = _values(1)
    t = CudaTensor.from_array(x, dtype=dtype, guard=True)
    expected = {"float32": x, "float16": x.astype(np.float16),
                "bfloat16": from_bfloat16(to_bfloat16(x)).reshape(x.shape)}[dtype]
    assert np.array_equal(t.read(), expected) and t.check_guards() is None
    assert t.buffer.size == x.size and t.parent.size == x.size + 2 * t.pad
    t.write(-x)                       # into the guarded buffer's body, the guards untouched
    assert np.array_equal(t.read(), -expected) and t.check_guards() is None


@gpu
def test_gpu_float16_tensors_through_a_tensor_core_stage():
    """float16 CudaTensors in: float16 out, the same values as float16 NumPy arrays give."""
    args = {k: (v.astype(np.float16) if isinstance(v, np.ndarray) else v)
            for k, v in random_problem_args(2, 32, 14, 14, 48, 3, 1, 1, "relu", seed=3).items()}
    expected = helpers.run_stage("conv_dgrad", "tc_fp16", **args)
    on_device = {k: CudaTensor.from_array(v) if isinstance(v, np.ndarray) else v for k, v in args.items()}
    plan = plan_stage("conv_dgrad", "tc_fp16", **on_device)
    plan.enqueue()
    assert plan.tensor("grad_input").dtype == "float16"
    got = plan.result()
    assert got.dtype == np.float16 and np.array_equal(got, expected)
    helpers.check_outputs(plan)
