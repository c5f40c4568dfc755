"""The CUDA stages: every .cu kernel compiles to PTX for sm_80 and sm_90 with each of its
registered define combinations (NVRTC from pip: no GPU needed), the tensor-core stages' PTX holds
the instructions each is about (its registry entry's ``ptx``: mma.sync, ldmatrix, cp.async...),
and where CuPy sees an NVIDIA GPU each twin agrees with its OpenCL stage and the chapter 13 stages
run their special cases (every CUDA stage over its operation's grid with guard zones, its paths
counted: tests/test_stages.py). Without CUDA, asking for a CUDA stage is refused with a clear error."""
import itertools

import numpy as np
import pytest

import helpers
from helpers.engine.backends import BackendUnavailable, cuda_missing, nvrtc
from helpers.launch import gemm, tensor_cores
from helpers.ops import conv_forward
from helpers.ops.conv_dgrad import random_problem_args
from helpers.runner import jit_defines, path_of, prepare, stage_source
from helpers.stages import LOCAL_TWINNED, REGISTRY, twin_of
from helpers.stages.conv_dgrad import TENSOR_COPY_4D

from shapes import case_id, conv_grid

CUDA_STAGES = [s for stages in REGISTRY.values() for s in stages if s.backend == "cuda"]
TWINS = [s for s in CUDA_STAGES if s.name.endswith("_cuda")]        # of an OpenCL stage
TENSOR_CORES = [s for s in CUDA_STAGES if s.tensor_cores]          # chapter 13
# chapter 13's channel-last kernel (13_tc_nhwc.cu) by its switches: on mma.sync (dy' channel-last or
# interleaved), on Hopper's wgmma, with the Tensor Memory Accelerator's copies
CHANNEL_LAST = [s.name for s in TENSOR_CORES if s.op == "conv_dgrad" and s.launch.startswith("mma_nhwc")]
NHWC_STAGES = [n for n in CHANNEL_LAST if not {"WGMMA", "ILV"} & set(helpers.get_stage("conv_dgrad", n).defines)]
NCHW32_STAGES = [n for n in CHANNEL_LAST if "ILV" in helpers.get_stage("conv_dgrad", n).defines]
TMA_STAGES = [n for n in CHANNEL_LAST if helpers.get_stage("conv_dgrad", n).defines.get("TMA")]
WGMMA_STAGES = [n for n in CHANNEL_LAST if helpers.get_stage("conv_dgrad", n).defines.get("WGMMA") and n not in TMA_STAGES]
TENSOR_STORE_4D = "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group"


ARCHS = ("compute_80", "compute_90")


def archs(stage) -> tuple:
    """The virtual architectures a stage's kernel is compiled for: its own (Stage.arch, e.g.
    sm_90a for wgmma), else Ampere's and Hopper's."""
    return (stage.arch.replace("sm_", "compute_"),) if stage.arch else ARCHS


NO_NVRTC = nvrtc.missing()
NO_CUDA = cuda_missing()
# problems that set every define a conv_dgrad kernel reads: kernel sizes, strides, activations
PROBLEMS = [dict(n=1, c=3, h=7, w=9, k=4, kernel=3, stride=1, padding=1, activation="none"),
            dict(n=1, c=2, h=9, w=8, k=16, kernel=5, stride=2, padding=2, activation="relu"),
            dict(n=1, c=2, h=6, w=6, k=3, kernel=1, stride=3, padding=0, activation="tanh"),
            dict(n=1, c=2, h=6, w=6, k=3, kernel=2, stride=1, padding=0, activation="sigmoid")]


def define_sets(stage):
    """The stage's defaults, then each tune candidate alone."""
    yield dict(stage.defines)
    for name, values in stage.tune.items():
        for v in values:
            if v != stage.defines.get(name):
                yield {**stage.defines, name: v}


def _args(c, seed=0, op="conv_dgrad"):
    """A grid case's arguments for ``op``: conv_forward reads c as its input channels and adds a
    bias where there is an activation or the seed is odd (so both epilogues meet every activation)."""
    if op == "conv_forward":
        return conv_forward.random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"],
                                                c["padding"], seed, c["activation"],
                                                bias=c["activation"] != "none" or seed % 2 == 1)
    return random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"],
                               c["padding"], c["activation"], seed=seed)


def test_there_are_cuda_twins():
    """The rules of a CUDA stage (a twin of an OpenCL stage, or chapter 13's on tensor cores;
    a twin's number, family, defines, tune lists and file; its fallback a CUDA stage) are the
    registry's validator's (tests/test_registry.py plants each mistake)."""
    assert len(TWINS) >= 2 and len(TWINS) + len(TENSOR_CORES) == len(CUDA_STAGES)
    assert all(twin_of(s).backend == "opencl" for s in TWINS)


def test_a_cuda_twin_runs_its_opencl_stage_s_tuned_tile(monkeypatch):
    """Without values of its own in results/tuned.json a twin takes its OpenCL stage's (the same
    kernel in another language: compared at the same tile); its own values win when it has them."""
    from helpers import runner
    from helpers.engine.backends import cuda
    tuned = {"10_hoisted": {"TY": 8, "XPW": 8, "CPW": 8, "SPLIT": 3}}      # SPLIT: not the twin's
    monkeypatch.setattr(cuda, "describe", lambda: {"name": "Some GPU"})
    monkeypatch.setattr(runner, "tuned_for", lambda op, key, dev: runner.Tuned(dict(tuned.get(key, {})), "test"))
    s = helpers.get_stage("conv_dgrad", "hoisted_cuda")
    assert twin_of(s).key == "10_hoisted" and twin_of(twin_of(s)) is None
    assert LOCAL_TWINNED == ("prefetch", "transposed", "padded", "swizzle", "hoisted")
    got = runner.device_defines("conv_dgrad", s, None)
    assert got == {**s.defines, "TY": 8, "XPW": 8, "CPW": 8}
    tuned["10_hoisted_cuda"] = {"TY": 4}
    assert runner.device_defines("conv_dgrad", s, None) == {**s.defines, "TY": 4}


@pytest.mark.skipif(NO_NVRTC is not None, reason=f"{NO_NVRTC}")
@pytest.mark.parametrize("stage", CUDA_STAGES, ids=lambda s: f"{s.op}-{s.name}")
def test_cuda_kernel_compiles_to_ptx(stage):
    """The defaults on every problem (each sets other JIT parameters: kernel size, stride,
    activation), each tune candidate on the one with a 5x5 kernel, stride 2 and ReLU."""
    count = 0
    for i, defines in enumerate(define_sets(stage)):
        for c in (PROBLEMS if i == 0 else PROBLEMS[1:2]):
            problem = prepare(stage.op, **_args(c, op=stage.op))
            jit = jit_defines(stage, problem, defines)
            for arch in archs(stage):
                ptx = nvrtc.compile_ptx(stage.kernel, jit, arch, source=stage_source(stage, jit))
                assert f".entry {stage.entry or stage.op}(" in ptx
                assert f".target {arch.replace('compute_', 'sm_')}" in ptx
                count += 1
    assert count >= len(PROBLEMS) * len(archs(stage))


@pytest.mark.skipif(NO_NVRTC is not None, reason=f"{NO_NVRTC}")
@pytest.mark.parametrize("stage", TENSOR_CORES, ids=lambda s: f"{s.op}-{s.name}")
def test_tensor_core_ptx_holds_its_instructions(stage):
    """What each tensor-core stage's PTX must hold (its registry entry's ``ptx``, which the
    validator requires of every such stage): its fast path, which must not silently disappear."""
    problem = prepare(stage.op, **_args(PROBLEMS[1], op=stage.op))   # K*KH*KW = 400: the pipelined path
    jit = jit_defines(stage, problem, stage.defines)
    for arch in archs(stage):
        ptx = nvrtc.compile_ptx(stage.kernel, jit, arch, source=stage_source(stage, jit))
        for instruction in stage.ptx:
            assert instruction in ptx, f"{stage.name} ({arch}): no {instruction} in its PTX"


@pytest.mark.skipif(NO_NVRTC is not None, reason=f"{NO_NVRTC}")
def test_a_broken_cuda_kernel_is_caught():
    src = helpers.kernel_source(CUDA_STAGES[0].kernel).replace("grad += ", "grad += undefined_name + ", 1)
    with pytest.raises(nvrtc.CudaCompileError, match="undefined_name"):
        nvrtc.compile_ptx(CUDA_STAGES[0].kernel, {}, "compute_80", source=src)


@pytest.mark.skipif(NO_CUDA is None, reason="CUDA is available here: the stages run instead")
def test_cuda_stage_refused_without_cuda():
    with pytest.raises(BackendUnavailable, match="CuPy|NVIDIA GPU"):
        helpers.run_stage("conv_dgrad", CUDA_STAGES[0].name, **_args(PROBLEMS[0]))


@pytest.mark.parametrize("stage", NHWC_STAGES)
def test_channel_last_stages_take_both_paths(stage):
    """The channel-last stages run their own kernels where K is a multiple of a 16-byte copy and
    fall back elsewhere: both cases are in the grid (decided on the host by the stage's
    requirement, no GPU needed); K = 20 suits TF32's copies (4 values) but not the 16-bit ones (8);
    a ring beyond the static shared memory is refused with the numbers."""
    s = helpers.get_stage("conv_dgrad", stage)
    requires = s.requires
    needs = [requires(prepare("conv_dgrad", **_args(c)), s.defines) for c in conv_grid()]
    assert needs.count(None) >= 12 and len(needs) - needs.count(None) >= 6, needs
    k20 = requires(prepare("conv_dgrad", **_args(dict(PROBLEMS[0], k=20))), s.defines)
    assert (k20 is None) == (stage == "tc_tf32_nhwc"), k20
    big = requires(prepare("conv_dgrad", **_args(PROBLEMS[1])), {**s.defines, "BN": 128, "STAGES": 4})
    assert "65,536 bytes of shared memory" in big
    # the tuning candidates: those whose ring does not fit are refused (the search skips them)
    needs = [requires(prepare("conv_dgrad", **_args(PROBLEMS[1])), dict(zip(s.tune, values)))
             for values in itertools.product(*s.tune.values())]
    assert needs.count(None) >= 4 and all("bytes of shared memory" in n for n in needs if n), needs


@pytest.mark.parametrize("stage", NCHW32_STAGES)
def test_interleaved_stages_pad_k_and_refuse_nothing(stage):
    """The interleaved stages pad K with zeros to a multiple of 32 instead of refusing it: every
    grid problem runs their own kernels, the copies are sized for the padded K, and the launch of
    the dy' copy covers the padding channels; only a ring beyond the shared memory is refused."""
    s = helpers.get_stage("conv_dgrad", stage)
    requires = s.requires
    assert all(requires(prepare("conv_dgrad", **_args(c)), s.defines) is None for c in conv_grid())
    p = prepare("conv_dgrad", **_args(dict(PROBLEMS[0], k=20)))
    q = p.dims
    assert requires(p, s.defines) is None and tensor_cores.padded_k(p, s.defines) == 32
    size = 4 if s.precision == "tf32" else 2
    scratch = tensor_cores.mma_nhwc_scratch(p, s.defines, "float32" if size == 4 else "float16")
    assert scratch["dyp_copy"].count == q["N"] * q["OH"] * q["OW"] * 32
    assert scratch["w_crsk"].count == q["C"] * q["KH"] * q["KW"] * 32
    copy = next(st for st in tensor_cores.mma_nhwc_steps(p, s.defines) if st.kernel.startswith("dy_to"))
    assert copy.kernel == "dy_to_nchw32" and copy.global_size[1] == 8      # one block of 64 channels
    assert "65,536 bytes" in requires(p, {**s.defines, "BN": 128, "STAGES": 4})


@pytest.mark.skipif(NO_CUDA is not None, reason=f"{NO_CUDA}")
@pytest.mark.parametrize("stage", ["tc_fp16", "tc_bf16"])
def test_tensor_core_stage_takes_float16_arrays(stage):
    """float16 arrays in: float16 out from an fp16 stage (float32 from bf16), checked."""
    args = {k: (v.astype(np.float16) if isinstance(v, np.ndarray) else v)
            for k, v in random_problem_args(2, 32, 14, 14, 48, 3, 1, 1, "relu", seed=3).items()}
    got = helpers.run_stage("conv_dgrad", stage, **args)
    assert got.dtype == (np.float16 if stage == "tc_fp16" else np.float32)
    helpers.check_stage("conv_dgrad", stage, **args)


@pytest.mark.skipif(NO_CUDA is not None, reason=f"{NO_CUDA}")
def test_tf32_stage_refuses_float16():
    args = {k: (v.astype(np.float16) if isinstance(v, np.ndarray) else v) for k, v in _args(PROBLEMS[0]).items()}
    with pytest.raises(TypeError, match="must be float32"):
        helpers.run_stage("conv_dgrad", "tc_tf32", **args)


@pytest.mark.skipif(NO_CUDA is not None, reason=f"{NO_CUDA}")
@pytest.mark.parametrize("stage", [s.name for s in TWINS if s.op == "conv_dgrad"])
def test_cuda_twin_agrees_with_opencl(ctx, stage):
    s = helpers.get_stage("conv_dgrad", stage)
    args = random_problem_args(2, 32, 14, 14, 48, 3, 1, 1, "relu", seed=7)
    got = helpers.run_stage("conv_dgrad", stage, **args)
    ref = helpers.run_stage("conv_dgrad", twin_of(s).name, ctx=ctx, **args)
    assert got.shape == ref.shape and got.dtype == np.float32
    helpers.check_stage("conv_dgrad", stage, **args)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))


@pytest.mark.skipif(NO_CUDA is not None, reason=f"{NO_CUDA}")
@pytest.mark.parametrize("op, stage", [(s.op, s.name) for s in CUDA_STAGES if s.tune], ids=lambda v: str(v))
def test_cuda_tune_candidates_match_with_guards(op, stage):
    """Each tuning candidate the search may pick, on a shape that runs the stage itself and one
    that does not (the forward stages: two that run it, strides 1 and 2), with guard zones; a
    candidate whose ring does not fit is refused by the search (it would fall back and be timed
    under the stage's name), as is one the device cannot launch."""
    from helpers.tuning_trials import search
    s = helpers.get_stage(op, stage)
    shapes = [dict(n=2, c=16 if op == "conv_forward" else 17, h=7, w=5, k=16, kernel=3, stride=1, padding=1,
                   activation="relu"),
              dict(n=1, c=24, h=9, w=8, k=32, kernel=3, stride=2, padding=1, activation="tanh")]
    tried = search(op, s, [dict(c, name=case_id(c)) for c in shapes], None, "none", 1, 4)["tried"]
    for t in tried:
        if "error" in t:      # refused, not timed: it falls back, or it cannot be built or launched
            if "falls back" in t["error"]:
                assert "fallback" in [path_of(op, stage, defines=t["defines"], **_args(c, op=op)) for c in shapes], t
            else:
                refusals = []
                for c in shapes:
                    try:
                        helpers.check_stage(op, stage, defines=t["defines"], **_args(c, op=op))
                    except ValueError as err:       # DeviceLimitError is one
                        refusals.append(str(err))
                assert any(t["error"] in r for r in refusals), (t, refusals)
            continue
        for i, c in enumerate(shapes):
            helpers.check_stage(op, stage, guard=True, defines=t["defines"], **_args(c, seed=i, op=op))
    assert sum("error" not in t for t in tried) >= 2, tried


@pytest.mark.parametrize("stage", ["tc_fp16_nhwc", "tc_tf32_nhwc", "tc_bf16_nchw32"])
def test_split_k_where_the_product_has_few_blocks(stage):
    """Split-K, decided on the host: the reduction is cut where the product has fewer blocks than
    SPLIT_TARGET and the reduction has at least SPLIT_MIN terms (ResNet-50's two deepest layers at
    batch 1 and 8, never at batch 64), into at most SPLIT_MAX runs of at least SPLIT_MIN_TERMS;
    the steps zero a float32 dx, run the product over the runs (grid z) into it, then round it
    into dx, and the PTX holds the atomic adds and both kernels. SPLIT_TARGET = 1 never splits,
    nor does the forward pass; with SPLIT_MIN lowered the grid takes both ways."""
    from helpers.ops import conv_dgrad as op
    from helpers.ops.layers import layer_set
    s = helpers.get_stage("conv_dgrad", stage)
    splits = {lay["name"]: tensor_cores.nhwc_splits(prepare("conv_dgrad", **op.layer_args(lay)), s.defines)
              for lay in layer_set("edge") + layer_set("resnet50")}
    assert splits["res512@7/n1"] == gemm.SPLIT_MAX and splits["res256@14/n8"] > 1, splits
    assert splits["res128@28/n1"] == splits["res64@56/n1"] == 1, splits        # short reductions
    assert all(splits[lay["name"]] == 1 for lay in layer_set("resnet50")), splits
    p = prepare("conv_dgrad", **op.layer_args(next(l for l in layer_set("edge") if l["name"] == "res512@7/n1")))
    q, d = p.dims, s.defines
    steps = tensor_cores.mma_nhwc_steps(p, d)
    assert [st.kernel for st in steps][0] == "splitk_zero" and steps[-1].kernel == "splitk_store"
    product = next(st for st in steps if st.kernel == "conv_dgrad")
    assert product.global_size[2] == gemm.SPLIT_MAX and product.args[2] == "dx_split"
    assert tensor_cores.mma_nhwc_scratch(p, d)["dx_split"].count == q["N"] * q["C"] * q["H"] * q["W"]
    assert tensor_cores.nhwc_splits(p, {**d, "SPLIT_TARGET": 1}) == 1
    assert len(tensor_cores.mma_nhwc_steps(p, {**d, "SPLIT_TARGET": 1})) == 3
    on_grid = [tensor_cores.nhwc_splits(prepare("conv_dgrad", **_args(c)), {**d, "SPLIT_MIN": 128})
               for c in conv_grid()]
    assert sum(k > 1 for k in on_grid) >= 12 and on_grid.count(1) >= 12, on_grid
    if NO_NVRTC is None:
        jit = jit_defines(s, p, d)
        ptx = nvrtc.compile_ptx(s.kernel, jit, "compute_90", source=stage_source(s, jit))
        assert jit["SPLITK"] == gemm.SPLIT_MAX and "global.add.f32" in ptx
        assert ".entry splitk_zero(" in ptx and ".entry splitk_store(" in ptx
    fwd = helpers.get_stage("conv_forward", "tc_fp16_nhwc")
    assert "SPLIT_TARGET" not in fwd.defines and "SPLITK" not in jit_defines(fwd, prepare(
        "conv_forward", **_args(PROBLEMS[1], op="conv_forward")), fwd.defines)


def test_wgmma_blocks_fit_the_layer_and_the_build_needs_sm_90a():
    """The wgmma stages: 256 threads and a dynamic ring per block; BN narrowed to what the layer's
    channels need, to the device's fill and to the shared memory, in the kernel's build and the
    grid alike; a ring past Hopper's 227 KiB even at BN = 64 refused;
    a build for any target but sm_90a stops at the kernel's #error."""
    from helpers.ops import conv_dgrad as op
    from helpers.ops.layers import layer_set
    s = helpers.get_stage("conv_dgrad", "tc_tf32_wgmma")
    assert s.arch == "sm_90a" and s.defines["WGMMA"] == 1 and s.defines["BN"] == 256
    assert s.defines["SPLIT_TARGET"] == 128 and "BN" not in s.tune
    layers = {l["name"]: l for l in layer_set("resnet50") + layer_set("vgg16")}
    # (layer, C, SPLIT_TARGET, BN): narrowed to the channels (res64@56, res128@28), to the fill where
    # 256-wide blocks would be fewer than SPLIT_TARGET (res512@7: 25 x 2, vgg512@14: 49 x 2; not
    # below 128), kept where they are not (vgg512@28: 196 x 2), or where the target is 1; and to the
    # shared memory (5 buffers of 256-wide blocks: 246,784 bytes)
    for name, c, target, bn, *stages in (
            ("res64@56", 64, 128, 64), ("res128@28", 128, 128, 128), ("res512@7", 512, 128, 128),
            ("vgg512@14", 512, 128, 128), ("vgg512@28", 512, 128, 256), ("res512@7", 512, 1, 256),
            ("res512@7", 512, 10_000, 128), ("vgg512@28", 512, 128, 128, 5)):
        p = prepare("conv_dgrad", **op.layer_args(layers[name]))
        d = {**s.defines, "SPLIT_TARGET": target, "STAGES": stages[0] if stages else s.defines["STAGES"]}
        assert p.dims["C"] == c
        product = next(st for st in tensor_cores.mma_nhwc_steps(p, d) if st.kernel == "conv_dgrad")
        assert jit_defines(s, p, d)["BN"] == bn, name
        assert product.global_size[1] == -(-c // bn) and product.local_size == (256, 1, 1), name
        assert product.shared == d["STAGES"] * (128 + bn) * 128 + 1024, name
    big = {**s.defines, "STAGES": 10, "SPLIT_TARGET": 1}       # not even 64-wide blocks fit
    p = prepare("conv_dgrad", **op.layer_args(layers["res512@7"]))
    why = s.requires(p, big)
    assert f"{tensor_cores.mma_ring_bytes(tensor_cores.wgmma_fit(p, big)):,} bytes" in why
    assert f"{tensor_cores.WGMMA_SHARED:,}" in why
    assert s.requires(p, dict(s.defines)) is None
    if NO_NVRTC is None:
        jit = jit_defines(s, p, s.defines)
        with pytest.raises(nvrtc.CudaCompileError, match="needs a build for sm_90a"):
            nvrtc.compile_ptx(s.kernel, jit, "compute_90", source=stage_source(s, jit))


@pytest.mark.skipif(NO_NVRTC is not None, reason=f"{NO_NVRTC}")
def test_wgmma_rate_kernel_builds_for_sm_90a_only():
    """kernels/peak/wgmma.cu (python -m helpers.tc_peak, chapter 13): step 7's loop without the
    gather and the barriers, four wgmma of the case's shape per iteration, the case's wait and the
    copies beside them; the FLOP count matches them; a build for sm_90 stops at the #error."""
    from helpers import tc_peak
    for precision, bn, waitn, _, bulk in tc_peak.CASES:
        ptx = nvrtc.compile_ptx(tc_peak.KERNEL, {"TF32": int(precision == "tf32"), "BN": bn, "WAITN": waitn,
                                                 "BULK": bulk}, "compute_90a")
        k = 8 if precision == "tf32" else 16
        assert ptx.count(f"wgmma.mma_async.sync.aligned.m64n{bn}k{k}.f32") == 4, (precision, bn)
        assert f"wgmma.wait_group.sync.aligned {waitn};" in ptx
        if bulk:    # one thread's bulk copies, completing on an mbarrier; one barrier, after its init
            assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in ptx
            assert "mbarrier.arrive.expect_tx" in ptx and "cp.async.cg" not in ptx and ptx.count("bar.sync") == 1
        else:
            assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group 1;" in ptx and "bar.sync" not in ptx
        assert tc_peak.flops(precision, bn, 3, 5) == 3 * 2 * 5 * 4 * 2 * 64 * bn * k
    assert tc_peak.shared_bytes(256) == 1024 + 384 * 128 + 48 * 1024 + 16
    assert {("tf32", 256, 1, 0, 0), ("tf32", 256, 1, 12, 0), ("tf32", 256, 1, 12, 1)} <= set(tc_peak.CASES)
    with pytest.raises(nvrtc.CudaCompileError, match="needs a build for sm_90a"):
        nvrtc.compile_ptx(tc_peak.KERNEL, {}, "compute_90")


@pytest.mark.skipif(NO_CUDA is not None, reason=f"{NO_CUDA}")
@pytest.mark.parametrize("stage", WGMMA_STAGES)
def test_wgmma_block_widths_match_reference_with_guards(stage):
    """BN = 64, 128 and 256 (the grid's few channels narrow every block to 64): layers of 300 and
    260 channels, so each width runs with a partial last block, stride 1 and 2, an activation,
    guard zones around every tensor."""
    for bn in (64, 128, 256):
        for i, (n, c, h, w, k, stride) in enumerate(((2, 300, 9, 7, 40, 1), (1, 260, 11, 10, 24, 2))):
            args = random_problem_args(n, c, h, w, k, 3, stride, 1, "relu" if i else "none", seed=i)
            d = {"BN": bn, "STAGES": 3, "SPLIT_TARGET": 1}    # no split, no narrowing for the fill
            plan = helpers.plan_stage("conv_dgrad", stage, defines=d, **args)
            assert plan.stage.name == stage and plan.jit_defines["BN"] == bn    # its own kernel, this width
            helpers.check_stage("conv_dgrad", stage, guard=True, defines=d, **args)


@pytest.mark.skipif(NO_NVRTC is not None, reason=f"{NO_NVRTC}")
@pytest.mark.parametrize("stage", TMA_STAGES)
def test_tma_product_copies_by_tensor_maps_only(stage):
    """Step 8's product has no cp.async left (both operands come by the Tensor Memory
    Accelerator), where step 7's had them for both operands."""
    for name, copies in ((stage, 0), (stage.replace("_tma", "_wgmma"), 1)):
        s = helpers.get_stage("conv_dgrad", name)
        p = prepare("conv_dgrad", **_args(PROBLEMS[0]))
        jit = jit_defines(s, p, s.defines)
        ptx = nvrtc.compile_ptx(s.kernel, jit, "compute_90a", stage_source(s, jit))
        product = ptx[ptx.index(".entry conv_dgrad("):]
        product = product[:product.index("\n}\n")]
        assert ("cp.async.cg.shared.global" in product) == bool(copies), name
        assert (TENSOR_COPY_4D in product) != bool(copies), name


def _tma_jit(stage, n, c, h, w, k, kernel=3, stride=1, **defines):
    s = helpers.get_stage("conv_dgrad", stage)
    p = prepare("conv_dgrad", **random_problem_args(n, c, h, w, k, kernel, stride, kernel // 2, "none"))
    return s, jit_defines(s, p, {**s.defines, **defines})


@pytest.mark.parametrize("stage", TMA_STAGES)
def test_tma_store_runs_where_its_rows_are_whole_sectors(stage):
    """TMA_STORE (on by default) runs at stride 1 without split-K where dx's rows are multiples of
    16 bytes and the box's rows (PW values) of 32: vgg64@224's 4 x 32 patches in every precision,
    res64@56's 8 x 8 in TF32 only (16-byte rows in 16-bit), 4 x 4 patches (res128@28) in none;
    never at stride 2, with split-K, on 14-wide images (rows of 56 or 28 bytes) or when asked off."""
    item = 4 if stage == "tc_tf32_tma" else 2
    assert helpers.get_stage("conv_dgrad", stage).defines["TMA_STORE"] == 1
    for case, runs in (((8, 64, 224, 224, 64), True), ((32, 64, 56, 56, 64), item == 4),
                       ((32, 128, 28, 28, 128), False), ((32, 256, 14, 14, 256), False),
                       ((32, 128, 56, 56, 128, 3, 2), False)):
        s, jit = _tma_jit(stage, *case)
        assert jit["TMA_STORE"] == int(runs), (case, jit)
        assert runs == (jit["PW"] * item % 32 == 0 and case[3] * item % 16 == 0 and len(case) == 5), (case, jit)
    assert _tma_jit(stage, 32, 64, 56, 56, 64, TMA_STORE=0)[1]["TMA_STORE"] == 0
    split = _tma_jit(stage, 1, 64, 56, 56, 64, SPLIT_TARGET=4096, SPLIT_MIN=128)[1]
    assert split["SPLITK"] > 1 and split["TMA_STORE"] == 0, split
    # the box (128 x BN values) must fit the ring it is staged in: TF32 at BN = 256 with 2 slots does not
    for stages in (2, 3):
        wide = _tma_jit(stage, 8, 256, 224, 224, 64, STAGES=stages, BN=256)[1]
        assert wide["BN"] == 256 and wide["TMA_STORE"] == int(item == 2 or stages == 3), (stages, wide)


@pytest.mark.skipif(NO_NVRTC is not None, reason=f"{NO_NVRTC}")
@pytest.mark.parametrize("stage", TMA_STAGES)
def test_tma_store_is_in_the_product_only_when_it_runs(stage):
    """With TMA_STORE the product ends in one TMA store of the staged box, after a barrier of the
    two warpgroups alone (barrier 1); without it, store_dx's stores and no TMA store."""
    for store in (1, 0):
        s, jit = _tma_jit(stage, 2, 64, 32, 32, 64, TMA_STORE=store)        # 4 x 32 patches
        assert jit["TMA_STORE"] == store
        ptx = nvrtc.compile_ptx(s.kernel, jit, "compute_90a", stage_source(s, jit))
        product = ptx[ptx.index(".entry conv_dgrad("):]
        product = product[:product.index(".entry", 1)] if ".entry" in product[1:] else product
        assert (TENSOR_STORE_4D in product) == bool(store), store
        assert ("cp.async.bulk.wait_group.read 0" in product) == bool(store), store
        assert ("bar.sync 1," in product) == bool(store), store


def test_tma_patches_cover_the_layer_with_least_padding():
    """A TMA block's 128 positions are a patch PN x PH x PW of (N, H, W); the patch chosen for a
    layer makes the fewest blocks: none padded where a patch divides the image (ResNet-50's 56,
    28 and 14 at batch 64); on 7 x 7 images patches of 16 images x 1 row x 8 columns, one column in
    eight padding."""
    def patch(n, h, w):
        return tensor_cores.tma_patch(prepare("conv_dgrad", **random_problem_args(n, 4, h, w, 4, 3, 1, 1, "none")))
    for n, h, w in ((64, 56, 56), (64, 28, 28), (64, 14, 14), (8, 224, 224)):
        pn, ph, pw = patch(n, h, w)
        assert pn * ph * pw == 128 and n % pn == 0 and h % ph == 0 and w % pw == 0, (n, h, w, pn, ph, pw)
    assert patch(64, 7, 7) == (16, 1, 8)
    assert all(pn * ph * pw == 128 for pn, ph, pw in (patch(1, 9, 7), patch(3, 5, 300), patch(1, 1, 1)))


@pytest.mark.parametrize("stage", TMA_STAGES)
def test_tma_stage_takes_every_stride_and_refuses_unaligned_rows(stage):
    """Any stride (a block holds one phase's positions: one image of 9 x 8 at stride 2 has
    phases of 5 x 4 positions, one patch each, 4 blocks; 6 x 6 at stride 3, 2 x 2, 9 blocks), and,
    for 16-bit stages, K % 8 refused (the tensor map's strides must be multiples of 16 bytes):
    such layers run the stage's fallback."""
    s = helpers.get_stage("conv_dgrad", stage)
    requires = s.requires
    for c in PROBLEMS:
        assert requires(prepare("conv_dgrad", **_args(dict(c, k=8))), s.defines) is None, c
    for c, blocks in ((PROBLEMS[1], 4), (PROBLEMS[2], 9)):
        assert tensor_cores.position_blocks(prepare("conv_dgrad", **_args(dict(c, k=8))), s.defines) == blocks, c
    k20 = requires(prepare("conv_dgrad", **_args(dict(PROBLEMS[0], k=20))), s.defines)
    assert (k20 is None) == (stage == "tc_tf32_tma"), k20


@pytest.mark.skipif(NO_CUDA is not None, reason=f"{NO_CUDA}")
def test_tensor_map_refuses_with_the_reason():
    """A map the TMA cannot use is refused before the driver sees it (strides not multiples of 16
    bytes), and what the driver refuses comes back with the driver's name for the error."""
    from helpers.engine.backends import cuda
    t = cuda.CudaTensor("t", (64,), np.zeros(64, np.float32), is_input=True)
    with pytest.raises(ValueError, match="multiples of 16 bytes"):
        cuda.tensor_map(t, (3, 2), (3, 1))                 # rows of 12 bytes
    with pytest.raises(RuntimeError, match="cuTensorMapEncodeTiled refused the map of t .*CUDA_ERROR"):
        cuda.tensor_map(t, (32, 2), (32, 0))               # an empty box
    assert cuda.tensor_map(t, (32, 2), (32, 1)).nbytes == 128


@pytest.mark.skipif(NO_CUDA is not None, reason=f"{NO_CUDA}")
@pytest.mark.parametrize("stage", TMA_STAGES)
def test_tma_stage_matches_reference_with_guards(stage):
    """Step 8 on its own kernel (no fallback) with BN = 64, 128, 256, patches that overhang the
    image (7, 9 and 30 columns), several images per patch, K not a multiple of a row (the box
    reads zeros past K), C not a multiple of BN, strides 1, 2 and 3 (phases with 4, 2, 1 and no
    taps; odd sizes, so phases of unequal size), kernels 3, 5 and 1, split-K, an activation;
    guard zones around every tensor and workspace."""
    cases = ((2, 300, 9, 7, 40, 64, 3, 1), (3, 260, 5, 30, 72, 128, 3, 2), (1, 264, 14, 9, 136, 256, 3, 1),
             (2, 130, 11, 13, 24, 128, 5, 2), (2, 70, 10, 7, 32, 64, 1, 2), (1, 80, 12, 11, 16, 64, 3, 3))
    for i, (n, c, h, w, k, bn, kernel, stride) in enumerate(cases):
        for split in (1, 512):
            args = random_problem_args(n, c, h, w, k, kernel, stride, kernel // 2, "relu" if i % 2 else "none",
                                       seed=i)
            d = {"BN": bn, "STAGES": 3, "SPLIT_TARGET": split, "SPLIT_MIN": 128}
            plan = helpers.plan_stage("conv_dgrad", stage, defines=d, **args)
            jit = plan.jit_defines
            assert plan.stage.name == stage and jit["TMA"] == 1, plan.stage.name
            assert (jit["SPLITK"] > 1) == (split > 1 and k * kernel * kernel >= 256) and jit["BN"] in (bn, 128), jit
            helpers.check_stage("conv_dgrad", stage, guard=True, defines=d, **args)
    assert path_of("conv_dgrad", stage, **_args(dict(PROBLEMS[1], k=16))) == "only"     # stride 2


@pytest.mark.skipif(NO_CUDA is not None, reason=f"{NO_CUDA}")
@pytest.mark.parametrize("stage", TMA_STAGES)
def test_tma_store_matches_reference_with_guards(stage):
    """dx by one TMA store per block, on boxes that leave the tensor: images past N (two images
    per patch on three), rows past H (9 and 17 rows in patches of 4), channels past C (300 and 72
    in blocks of 64 and 128), kernels 3, 5 and 1, an activation; each case runs the TMA store
    (asserted), and again without it; guard zones around every tensor and workspace."""
    cases = ((2, 300, 9, 16, 40, 64, 3), (1, 130, 17, 24, 24, 128, 5), (5, 64, 7, 32, 8, 64, 1),
             (3, 72, 4, 16, 16, 64, 3))
    for i, (n, c, h, w, k, bn, kernel) in enumerate(cases):
        args = random_problem_args(n, c, h, w, k, kernel, 1, kernel // 2, "relu" if i % 2 else "none", seed=i)
        for store in (1, 0):
            d = {"BN": bn, "STAGES": 3, "SPLIT_TARGET": 1, "TMA_STORE": store}
            plan = helpers.plan_stage("conv_dgrad", stage, defines=d, **args)
            assert plan.stage.name == stage and plan.jit_defines["TMA_STORE"] == store, plan.jit_defines
            helpers.check_stage("conv_dgrad", stage, guard=True, defines=d, **args)
    s, jit = _tma_jit(stage, 3, 72, 4, 16, 16)
    assert jit["PH"] * jit["PW"] == 64, jit            # two images per patch: the third block's second is past N


@pytest.mark.skipif(NO_CUDA is not None, reason=f"{NO_CUDA}")
@pytest.mark.parametrize("stage", ["tc_fp16_nhwc", "tc_tf32_nchw32"])
def test_channel_last_stage_split_matches_reference_with_guards(stage):
    """Split-K on the grid's small shapes (SPLIT_MIN lowered to 128 terms: by default none of them
    splits), with guard zones around every tensor and the float32 dx."""
    for i, c in enumerate(conv_grid()[::2]):
        try:
            helpers.check_stage("conv_dgrad", stage, guard=True, defines={"SPLIT_MIN": 128}, **_args(c, seed=i))
        except (AssertionError, helpers.GuardViolation) as err:
            raise AssertionError(f"stage {stage} failed on {case_id(c)}:\n{err}") from None


FORWARD_TC = [s.name for s in CUDA_STAGES if s.op == "conv_forward"]


@pytest.mark.parametrize("stage", FORWARD_TC)
def test_forward_tensor_core_requirements(stage):
    """Decided on the host: the forward stages run where C (the channels they sum over) is a
    multiple of a 16-byte copy (8 values; TF32 4) and refuse elsewhere with the number, no
    fallback; both cases are in the grid; the copies are sized x (N, H, W, C), w (K, KH, KW, C)."""
    s = helpers.get_stage("conv_forward", stage)
    requires = s.requires
    needs = [requires(prepare("conv_forward", **_args(c, op="conv_forward")), s.defines) for c in conv_grid()]
    assert needs.count(None) >= 60 and len(needs) - needs.count(None) >= 60, needs
    assert all("is not a multiple of" in n and "x is copied" in n for n in needs if n)
    c20 = prepare("conv_forward", **_args(dict(PROBLEMS[0], c=20), op="conv_forward"))
    assert (requires(c20, s.defines) is None) == (stage == "tc_tf32_nhwc")
    p = prepare("conv_forward", **_args(dict(PROBLEMS[1], c=16), op="conv_forward"))
    q = p.dims
    scratch = tensor_cores.mma_fwd_scratch(p, s.defines)
    assert scratch["x_copy"].count == q["N"] * q["H"] * q["W"] * 16
    assert scratch["w_krsc"].count == q["K"] * q["KH"] * q["KW"] * 16
    x_copy, w_copy, product = tensor_cores.mma_fwd_steps(p, s.defines)
    assert x_copy.kernel == w_copy.kernel == "to_channel_last" and product.kernel == "conv_forward"
    assert product.args[3] == "bias" and product.args[4:11] == ("N", "K", "OH", "OW", "C", "H", "W")
