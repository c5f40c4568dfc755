"""Chapter 13 on the CPU: the TF32 rounding the reference reproduces, the tensor-core tolerance,
the pipelined stage's requirement, the bank model of the 16-bit stages' shared layouts, the mma
fragment map, and the benchmark's per-precision cuDNN comparison. (The kernels themselves:
tests/test_cuda.py compiles them and, on an NVIDIA GPU, runs them over the grid.)"""
import numpy as np
import pytest

from helpers import bench
from helpers.chapters import ncu_reports, tensor_core_layouts
from helpers.engine.check import EPS32, OPERAND_ROUNDING, STORAGE_ROUNDING, rtol_for_sum, rtol_mma
from helpers.engine.fragments import fragment_owner
from helpers.engine.tensor import to_tf32
from helpers.launch.tensor_cores import mma_pipe_requires
from helpers.ops import conv_dgrad
from helpers.ops.vendor import cudnn_conv_dgrad
from helpers.runner import prepare

from shapes import conv_grid


def test_tf32_rounds_to_nearest_ties_away_and_products_are_exact():
    one = np.float32(1)
    ulp = np.float32(2.0**-10)                           # TF32's unit in the last place at 1
    x = np.float32([1 + 2.0**-11, 1 + 3 * 2.0**-11, -(1 + 2.0**-11), 1 + 2.0**-12, np.inf, np.nan])
    got = to_tf32(x)
    assert got[0] == one + ulp and got[1] == one + 2 * ulp and got[2] == -(one + ulp)   # ties away
    assert got[3] == one and np.isinf(got[4]) and np.isnan(got[5])
    rng = np.random.default_rng(0)
    a, b = (to_tf32(rng.standard_normal(1000, dtype=np.float32)) for _ in range(2))
    assert np.array_equal((a * b).astype(np.float64), a.astype(np.float64) * b.astype(np.float64))
    assert np.all(np.abs(to_tf32(a) - a) == 0)           # idempotent


def test_tensor_core_tolerance():
    for p in ("tf32", "fp16", "bf16"):
        for n in (1, 9, 576, 4608):
            plain, fused = rtol_mma(n, p, False), rtol_mma(n, p, True)
            assert plain >= rtol_for_sum(n) and fused == pytest.approx(plain + OPERAND_ROUNDING[p])
        assert rtol_mma(16000, p, False) == pytest.approx(4 * EPS32 * 16000 / (8 if p == "tf32" else 16))


def test_fp16_tolerance_still_catches_a_dropped_term_on_the_grid():
    """Without an activation, the fp16 stages' tolerance on every grid shape is below the error of
    one dropped term of a sum of similar terms (about 1/n of the magnitude). (bf16, and fp16 with
    a fused activation, are too loose for that on the largest sums: they share the fp16 file.)"""
    for c in conv_grid():
        if c["activation"] != "none":
            continue
        p = prepare("conv_dgrad", **conv_dgrad.random_problem_args(**c))
        n = c["k"] * c["kernel"] ** 2
        assert conv_dgrad.rtol(p, mma="fp16") + STORAGE_ROUNDING["fp16"][0] < 1 / n, c


def test_pipelined_stage_requirement():
    args = conv_dgrad.random_problem_args(1, 3, 7, 9, 4, 3, 1, 1)            # K*R*S = 36
    p = prepare("conv_dgrad", **args)
    assert "multiple of 8" in mma_pipe_requires(p, {"STAGES": 3})
    p8 = prepare("conv_dgrad", **conv_dgrad.random_problem_args(1, 3, 7, 9, 8, 3, 1, 1))
    assert mma_pipe_requires(p8, {"STAGES": 3}) is None
    assert "at least 2" in mma_pipe_requires(p8, {"STAGES": 1})


def test_bank_model_of_the_shared_layouts():
    table = {(access, layout): n for access, layout, n, _ in tensor_core_layouts.bank_table()}
    for access in ("ldmatrix.x4 of A", "16-byte row stores"):
        assert table[(access, "plain")] == 16                    # 4-way conflicts
        assert table[(access, "swizzled")] == table[(access, "padded")] == 4


def test_fragment_map_is_a_bijection():
    for op, (rows, cols, per_lane) in {"A": (16, 8, 4), "B": (8, 8, 2), "C": (16, 8, 4)}.items():
        owners = [fragment_owner(op, r, c) for r in range(rows) for c in range(cols)]
        assert len(set(owners)) == len(owners)
        assert {lane for lane, _ in owners} == set(range(32))
        assert {reg for _, reg in owners} == set(range(per_lane))


def test_each_row_is_compared_with_cudnn_in_its_precision():
    out = {"op": "conv_dgrad", "rows": [{"layer": "L", "stage": s, "precision": p, "median_ms": 1.0}
                                        for s, p in (("tc_tf32", "tf32"), ("tc_fp16", "fp16"))],
           "vendor": [{"layer": "L", "precision": "tf32", "median_ms": 0.5},
                      {"layer": "L", "precision": "fp16", "median_ms": 0.25}]}
    bench._relative(out)
    assert [r["x_vendor"] for r in out["rows"]] == [0.5, 0.25]
    with pytest.raises(ValueError, match="precision"):
        cudnn_conv_dgrad(None, None, (1, 1, 1, 1), 1, 0, precision="fp8")


def test_recorded_profiles_read_back():
    """Chapter 13 prints Nsight Compute's reports from results/tc: each run of the report is read
    back with the metrics the prose quotes (a report recorded with other sections would lose them)."""
    step5 = ncu_reports.ncu_summary()
    assert set(step5) == {"tc_fp16_nhwc res64@56", "tc_tf32_nhwc res64@56", "tc_fp16_nhwc res128@56/s2"}
    step7 = ncu_reports.ncu_summary("tc/ncu_wgmma_nvidia-h200.txt", ncu_reports.NCU_METRICS + ncu_reports.NCU_MEMORY)
    assert len(step7) == 4
    for run, m in step7.items():
        assert set(ncu_reports.NCU_METRICS + ncu_reports.NCU_MEMORY) <= set(m) and "top pipeline" in m, run
        assert {"wait", "barrier", "selected"} <= set(m["stalls"]) and 1 < sum(m["stalls"].values()) < 100, run
    wide = step7["tc_tf32_wgmma vgg512@28"]
    assert wide["top pipeline"][1].endswith("(Tensor)") and wide["Registers Per Thread"][0] > 128


def test_tma_store_layers_name_why_the_store_is_kept_off():
    """Chapter 13's table of where step 8 writes dx by the TMA store: the layers of the recorded pair
    where it ran (res64@56 and vgg256@56 in TF32, vgg64@224 in all three) and a reason everywhere
    else; the recorded runs agree with it row by row."""
    from helpers.analysis import pairs
    rows = {(r["layer"], r["precision"]): r for r in tensor_core_layouts.tma_store_layers()}
    ran = {k for k, r in rows.items() if r["store"]}
    assert ran == {("res64@56", "tf32"), ("vgg256@56", "tf32"), ("vgg64@224", "tf32"), ("vgg64@224", "fp16"),
                   ("vgg64@224", "bf16")}
    assert rows[("res128@56/s2", "tf32")]["why"] == "stride 2" and rows[("res512@7", "fp16")]["why"] == "split-K"
    assert rows[("res128@28", "tf32")]["why"] == "box rows of 16 bytes"
    assert rows[("res256@14", "fp16")]["why"] == "dx rows of 28 bytes"
    for set_name in ("resnet50", "vgg16"):
        assert pairs.recorded_pairs("conv_dgrad", set_name, "TMA_STORE"), set_name
        for off, on in pairs.recorded_pairs("conv_dgrad", set_name, "TMA_STORE"):
            for r in pairs.pair_rows(off, on, "TMA_STORE"):
                precision = {"tc_tf32_tma": "tf32", "tc_fp16_tma": "fp16", "tc_bf16_tma": "bf16"}[r["key"][3:]]
                assert r["kept_off"] != rows[(r["layer"], precision)]["store"], r["layer"]
