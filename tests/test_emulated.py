"""The CUDA stages run on the CPU (helpers/emulated_stage.py), checked by the one checker.

Without an NVIDIA GPU the .cu files were only compiled to PTX (tests/test_cuda.py); here every
CUDA stage is built as C++ for the CPU and run over small shapes chosen to reach every edge of its
tiles (positions, channels and the reduction each past a whole tile, K not a multiple of a chunk,
stride 2, kernels 1, 2, 3 and 5, every activation), with guard zones around every tensor and
workspace, against the NumPy reference, on two schedules, the two ends of what a GPU may do
(copies landing as late as the kernel's waits allow, warps in step; copies landing when issued,
the first warp running ahead of the others); every tuning candidate once; the TMA store; and
planted faults that the GPU tests would catch and the PTX compile does not (each asserted
caught). The emulated mma.sync, ldmatrix and wgmma (and the TMA's swizzled boxes) read their
fragment layouts and the 128-byte swizzle from helpers/engine/fragments.py (tests/test_fragments.py
checks it against the PTX ISA): a wrong model fails here too.
"""
import dataclasses
import os
import warnings
from collections import Counter

import numpy as np
import pytest

import helpers
from helpers.emulated_stage import check_emulated, emulate_stage
from helpers.engine import fragments
from helpers.engine.backends import emulated
from helpers.engine.check import MismatchError
from helpers.engine.tensor import to_bfloat16, to_tf32
from helpers.runner import check_plan, prepare, resolve
from helpers.stages import REGISTRY

from test_cuda import _args
from shapes import case_id

CUDA = [s for stages in REGISTRY.values() for s in stages if s.backend == "cuda"]

MISSING = emulated.missing()


@pytest.fixture(autouse=True)
def _compiler():
    """A machine without g++ skips these tests with the reason; in CI (COURSE_CI=1) that fails."""
    if MISSING:
        if os.environ.get("COURSE_CI") == "1":
            pytest.fail(f"COURSE_CI=1 but {MISSING}")
        pytest.skip(MISSING)


def case(n, c, h, w, k, kernel, stride, padding, activation):
    return dict(n=n, c=c, h=h, w=w, k=k, kernel=kernel, stride=stride, padding=padding, activation=activation)


# One thread per element (02, 03; blocks of WG = 64): H*W past one block, kernels 1, 2, 3, 5.
DIRECT = [case(2, 3, 9, 8, 5, 3, 1, 1, "relu"), case(1, 2, 7, 9, 4, 5, 2, 2, "sigmoid"),
          case(2, 2, 6, 5, 3, 1, 3, 0, "tanh"), case(1, 3, 5, 7, 3, 2, 1, 0, "none")]
# Tiles in shared memory (09, 10; stride 1, else 03's twin): the tile fitted to the plane (16 x 8
# and 32 x 4 here), rows and columns past the last whole tile, C past a block of CB = 32 channels,
# K not a multiple of a chunk of KC = 4, a 5 x 5 kernel's wide halo; a stride 2 runs the fallback.
LOCAL = [case(1, 40, 11, 13, 6, 3, 1, 1, "relu"), case(2, 7, 5, 20, 9, 5, 1, 2, "tanh"),
         case(1, 3, 8, 8, 5, 1, 1, 0, "sigmoid"), case(1, 5, 7, 6, 3, 3, 2, 1, "none")]
# Tensor cores (blocks of 128 positions x 64 channels, chunks of 32 reduction indices; wgmma's
# blocks 128 wide here, chunks of 64 16-bit or 32 tf32 values, 4 k-steps each): positions, channels
# and the reduction past a whole tile (K = 40: every k-step of a chunk, then a part of one);
# K*KH*KW % 8 != 0 (tc_fp16_pipe falls back) and K % 8 != 0 (the channel-last stages fall back;
# K % 4 == 0 runs TF32's), stride 2, 1x1 and 5x5.
MMA = [case(2, 70, 9, 8, 5, 3, 1, 1, "relu"), case(1, 20, 11, 13, 40, 3, 2, 1, "tanh"),
       case(2, 9, 7, 6, 16, 1, 1, 0, "sigmoid"), case(1, 66, 8, 9, 12, 5, 1, 2, "none")]
# The forward pass on tensor cores (C, its reduction's channels, a multiple of 8): K (its output
# channels) past a block of 64, positions past 128, a bias with every activation but one.
FORWARD = [case(2, 16, 9, 8, 70, 3, 1, 1, "relu"), case(1, 8, 11, 13, 20, 3, 2, 1, "tanh"),
           case(2, 24, 7, 6, 9, 1, 1, 0, "sigmoid"), case(1, 8, 8, 9, 66, 5, 1, 2, "none")]


def cases(stage) -> list:
    if stage.op == "conv_forward":
        return FORWARD
    return {"direct": DIRECT, "local": LOCAL}.get(stage.family_name, MMA)


def run_checked(stage, c, seed=0, defines=None, schedule="lazy"):
    """The stage on one case with guard zones, checked; its plan (path, defines)."""
    plan = emulate_stage(stage.op, stage, guard=True, defines=defines, schedule=schedule, **_args(c, seed=seed, op=stage.op))
    try:
        plan.check_guards()
        check_plan(plan)
    except (AssertionError, helpers.GuardViolation) as err:
        raise AssertionError(f"{stage.key} ({stage.op}) emulated on {case_id(c)} {defines or ''} ({schedule}):"
                             f"\n{err}") from None
    return plan


@pytest.mark.parametrize("stage", CUDA, ids=lambda s: f"{s.op}-{s.name}")
def test_emulated_stage_matches_reference_with_guards(stage):
    """Every case of the stage's shapes; the stage's own kernel and, where it has one, its
    fallback both run (a fast path that silently stopped running would show here)."""
    paths = Counter(run_checked(stage, c, seed=i).path for i, c in enumerate(cases(stage)))
    assert paths["only"] + paths["fast"] >= 2, paths
    assert bool(paths["fallback"]) == bool(stage.fallback), paths


SYNCED = [s for s in CUDA if "__syncthreads" in helpers.kernel_source(s.kernel)]


@pytest.mark.parametrize("stage", SYNCED, ids=lambda s: f"{s.op}-{s.name}")
def test_emulated_stage_on_the_eager_schedule(stage):
    """The stages whose threads share memory again, on the eager schedule: each cp.async or TMA copy
    lands when issued, and the first warp that can run runs until it must wait (a slot refilled
    while it is still read, or memory shared across a missing barrier, is spoiled so)."""
    paths = Counter(run_checked(stage, c, seed=i, schedule="eager").path for i, c in enumerate(cases(stage)))
    assert paths["only"] + paths["fast"] >= 2, paths


def runs_own_kernel(stage, problem, defines=None) -> bool:
    """Whether the stage runs its own kernel on the problem (not its fallback, not refused)."""
    try:
        return resolve(stage.op, stage, problem, emulated.DEVICE, defines)[0] == stage
    except ValueError:
        return False


def _own_case(stage):
    """The first case on which the stage runs its own kernel."""
    return next(c for c in cases(stage) if runs_own_kernel(stage, prepare(stage.op, **_args(c, op=stage.op))))


@pytest.mark.parametrize("stage", [s for s in CUDA if s.tune], ids=lambda s: f"{s.op}-{s.name}")
def test_emulated_tune_candidates_match_reference(stage):
    """Each tuning candidate (the search may pick any) on a case that runs the stage's own kernel:
    alone, or where alone it does not fit (a ring of 8 chunks per row in 3 slots), with the other
    parameters at their smallest candidates; SPLIT_TARGET with SPLIT_MIN lowered, so that it splits
    where the reduction allows."""
    c = _own_case(stage)
    problem = prepare(stage.op, **_args(c, op=stage.op))
    smallest = {name: min(values) for name, values in stage.tune.items()}
    ran = 0
    for name, values in stage.tune.items():
        for v in values:
            if v == stage.defines.get(name):
                continue
            alone = {name: v, "SPLIT_MIN": 128} if name == "SPLIT_TARGET" else {name: v}
            for d in (alone, {**smallest, **alone}):
                if runs_own_kernel(stage, problem, d):
                    plan = run_checked(stage, c, defines=d)
                    assert plan.defines[name] == v
                    ran += 1
                    break
    assert ran >= 1


@pytest.mark.parametrize("stage", ["tc_fp16_nhwc", "tc_tf32_nchw32"])
def test_emulated_split_k_matches_reference(stage):
    """Split-K (SPLIT_MIN lowered: the reduction of 288 terms cut in two): the float32 dx zeroed,
    both runs' atomic adds, the rounding into dx."""
    s = helpers.get_stage("conv_dgrad", stage)
    plan = run_checked(s, case(1, 24, 6, 7, 32, 3, 1, 1, "relu"), defines={"SPLIT_MIN": 128})
    assert plan.jit_defines["SPLITK"] == 2 and [st.kernel for st in plan.steps][0] == "splitk_zero"


def planted(stage_name, old, new, op="conv_dgrad"):
    """A copy of the stage whose kernel has ``old`` replaced by ``new`` (once)."""
    s = helpers.get_stage(op, stage_name)
    text = helpers.kernel_source(s.kernel)
    assert text.count(old) == 1, f"{s.kernel} no longer holds {old!r}: update the planted fault"
    return dataclasses.replace(s, source=lambda jit: text.replace(old, new))


FAULTS = {
    "02_naive.cu: the weight index's r and s swapped":
        ("naive_cuda", "w[((c * K + k) * KH + r) * KW + s]", "w[((c * K + k) * KH + s) * KW + r]"),
    "13_tc_fp16.cu: A-fragment registers a1 and a2 swapped":
        ("tc_fp16", "a[mt][1] = *(const unsigned*)&As[r + 8][ks + 2 * t];\n"
                    "                a[mt][2] = *(const unsigned*)&As[r][ks + 2 * t + 8];",
         "a[mt][2] = *(const unsigned*)&As[r + 8][ks + 2 * t];\n"
         "                a[mt][1] = *(const unsigned*)&As[r][ks + 2 * t + 8];"),
    "13_tc_fp16_ldm.cu: ldmatrix reads A unswizzled, where the stores swizzled it":
        ("tc_fp16_ldm", "ldmatrix_x4(a[mt], as + 2 * SWZ(warp_m + mt * 16 + (lane & 15), (ks >> 3) + (lane >> 4)));",
         "ldmatrix_x4(a[mt], as + 2 * ((warp_m + mt * 16 + (lane & 15)) * BK + (((ks >> 3) + (lane >> 4)) << 3)));"),
    "13_tc_fp16_pipe.cu: a chunk's weights copied into the ring's next slot":
        ("tc_fp16_pipe", "h16* slot = Bs[i % STAGES];", "h16* slot = Bs[(i + 1) % STAGES];"),
    "13_tc_nhwc.cu: the mma reads a slot before its cp.async group is waited for":
        ("tc_fp16_nhwc", "cp_async_wait<STAGES - 2>();      // this thread's copies of chunk i have landed\n"
                         "        __syncthreads();                  // everyone's; and chunk i-1's",
         "cp_async_wait<STAGES - 1>();\n        __syncthreads();                  // everyone's; and chunk i-1's"),
    "13_tc_nhwc.cu (wgmma): B's descriptor 16 bytes further per k-step instead of 32":
        ("tc_fp16_wgmma", "wg_desc(bs + 32 * h)", "wg_desc(bs + 16 * h)"),
    "13_tc_nhwc.cu (wgmma): a slot refilled while the wgmma of two chunks before may still read it":
        ("tc_tf32_wgmma", "wgmma_wait<1>();                  // chunk i-1's products are done (chunk i's may run on) ...",
         "wgmma_wait<2>();", "eager"),
    "13_tc_fp16_pipe.cu: the barrier before a chunk's slot is refilled dropped":
        ("tc_fp16_pipe",
         "        __syncthreads();                  // everyone's, and A's store of chunk i; chunk i-1 is read\n",
         "\n", "eager"),
    "13_tc_nhwc.cu (wgmma): the barrier between the warpgroups before a slot is refilled dropped":
        ("tc_bf16_wgmma", "        __syncthreads();                  // ... in both warpgroups: its slot may be refilled\n",
         "\n", "eager"),
    "13_tc_nhwc.cu (TMA): the box of dy' one column off":
        ("tc_fp16_tma", "a_map, k0, j0 + (pw + PAD - s) / STRIDE,", "a_map, k0, j0 + 1 + (pw + PAD - s) / STRIDE,"),
    "13_tc_nhwc.cu (TMA): the product reads a slot without waiting for its mbarrier":
        ("tc_bf16_tma", "        mbar_wait(full + 8 * slot, phase);    // chunk i has landed\n", "\n"),
    "13_tc_nhwc.cu (TMA store): the box of dx stored at the patch's row and column exchanged":
        ("tc_tf32_tma", "tensor_store_4d(d_map, a_base, j0, i0, c0, n0);", "tensor_store_4d(d_map, a_base, i0, j0, c0, n0);",
         "lazy", case(2, 300, 9, 16, 40, 3, 1, 1, "none"), {"BN": 64, "SPLIT_TARGET": 1}),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_planted_fault_is_caught(fault):
    """Each fault, planted alone in a copy of the stage, fails the check on the first case where
    the stage runs its own kernel (or the fault's own case and defines), where the kernel as it is
    passes, on the fault's schedule."""
    name, old, new, schedule, *own = FAULTS[fault] + ("lazy",) * (len(FAULTS[fault]) == 3)
    s = helpers.get_stage("conv_dgrad", name)
    c, defines = own if own else (_own_case(s), None)
    run_checked(s, c, defines=defines, schedule=schedule)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)        # an all-NaN result (stale shared memory)
        with pytest.raises(MismatchError):
            check_emulated("conv_dgrad", planted(name, old, new), guard=True, defines=defines, schedule=schedule, **_args(c))


PERTURBED = {   # a table of the model, wrong in one place, and a stage whose result it must spoil
    "a_tf32": ("tc_tf32", lambda t: t[:, [0, 2, 1, 3]]),          # registers a1 and a2 exchanged
    "b_16": ("tc_fp16", lambda t: t[:, :, ::-1]),                   # b's two halves exchanged
    "c": ("tc_bf16", lambda t: np.roll(t, 4, axis=0)),              # accumulators one group off
    "ldm_lanes": ("tc_fp16_ldm", lambda t: t[[1, 0, 2, 3]]),        # the first two matrices' addresses
    "ldm_values": ("tc_fp16_pipe", lambda t: np.roll(t, 4, axis=0)),   # ldmatrix's rows one lane group off
    "d_wgmma": ("tc_fp16_wgmma", lambda t: np.roll(t, 32, axis=0)),      # wgmma's accumulators one warp off
    "swizzle_128b": ("tc_tf32_wgmma", lambda t: np.roll(t, 1, axis=0)),   # each line swizzled as the one before
}


@pytest.mark.parametrize("table", PERTURBED)
def test_a_wrong_fragment_model_fails_the_emulated_kernels(monkeypatch, table):
    """The emulated mma.sync and ldmatrix take their layouts from helpers/engine/fragments.py at each
    launch: a model wrong in one table makes a kernel that matches the PTX ISA fail its check."""
    name, wrong = PERTURBED[table]
    s = helpers.get_stage("conv_dgrad", name)
    c = _own_case(s)
    right = fragments.tables()
    monkeypatch.setattr(fragments, "tables", lambda: {**right, table: np.ascontiguousarray(wrong(right[table]))})
    with pytest.raises(MismatchError):
        check_emulated("conv_dgrad", s, **_args(c))


def test_emulated_roundings_are_the_ptx_isa_s():
    """cvt.rn.f16.f32 as NumPy's float16 (to nearest, ties to even, subnormals, overflow to Inf),
    cvt.rn.bf16.f32 and cvt.rna.tf32.f32 as the host's conversions (helpers/engine/tensor.py), on
    random values of every scale, ties, the edges of each format and Inf; NaN stays NaN; fp16 to
    float32 exact for all 65,536 bit patterns."""
    lib = emulated.runtime_library()
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(3000) * 10.0 ** rng.integers(-9, 6, 3000),
                        [0.0, -0.0, 65504, 65519.99, 65520, 1e30, np.inf, -np.inf, 2**-24, 2**-25, 3 * 2**-25,
                         2**-14, 1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-11 + 2**-23,
                         3.4028235e38, 1e-40]]).astype(np.float32)
    x = np.concatenate([x, -x])
    f16 = np.array([lib.emu_cvt_rn_f16(float(v)) for v in x], dtype=np.uint16)
    with np.errstate(over="ignore"):
        assert (f16 == x.astype(np.float16).view(np.uint16)).all()
    bf16 = np.array([lib.emu_cvt_rn_bf16(float(v)) for v in x], dtype=np.uint16)
    assert (bf16 == to_bfloat16(x)).all()
    tf32 = np.array([lib.emu_cvt_rna_tf32(float(v)) for v in x], dtype=np.uint32)
    assert (tf32 == to_tf32(x).view(np.uint32)).all()
    nan = np.float32(np.nan)
    assert np.isnan(np.uint16(lib.emu_cvt_rn_f16(nan)).view(np.float16)) and lib.emu_cvt_rn_bf16(nan) == 0x7FFF
    assert np.isnan(np.uint32(lib.emu_cvt_rna_tf32(nan)).view(np.float32))
    bits = np.arange(65536, dtype=np.uint16)
    back = np.array([lib.emu_f16_to_f32(int(b)) for b in bits], dtype=np.float32)
    want = bits.view(np.float16).astype(np.float32)
    assert ((back == want) | (np.isnan(back) & np.isnan(want))).all()


def test_a_warp_divided_at_a_barrier_is_reported():
    """Half a warp at __syncthreads, the other half at mma.sync: a hang on the GPU, a clear error
    here naming the block and thread."""
    s = planted("tc_fp16", "    for (int k0 = 0; k0 < KTOT; k0 += BK) {",
                "    if (lane < 16) __syncthreads();\n    for (int k0 = 0; k0 < KTOT; k0 += BK) {")
    with pytest.raises(emulated.EmulationError, match=r"block \(0, 0, 0\), thread .*deadlock"):
        check_emulated("conv_dgrad", s, **_args(MMA[0]))


@pytest.mark.parametrize("stage", ["tc_tf32_tma", "tc_bf16_tma"])
def test_emulated_tma_store_matches_reference(stage):
    """Step 8's TMA store (TMA_STORE = 1, asserted) on boxes that leave dx: images past N (two per
    patch on three), rows past H, channels past C; and again without it."""
    s = helpers.get_stage("conv_dgrad", stage)
    for i, c in enumerate((case(3, 72, 4, 16, 16, 3, 1, 1, "relu"), case(2, 130, 9, 16, 24, 5, 1, 2, "none"))):
        for store in (1, 0):
            plan = run_checked(s, c, seed=i, defines={"BN": 64, "SPLIT_TARGET": 1, "TMA_STORE": store})
            assert plan.stage == s and plan.jit_defines["TMA_STORE"] == store, plan.jit_defines


def test_an_opencl_stage_is_sent_to_pocl():
    with pytest.raises(ValueError, match="OpenCL stage"):
        emulate_stage("conv_dgrad", "naive", **_args(DIRECT[0]))
