"""Every stage of every operation, from the registry, over its operation's grid with guard regions.

What is covered, per stage (one test each, the whole grid inside it):
- every case of its operation's grid (tests/shapes.py: GRIDS; the convolutions' grid with its
  tiers, RESIDUES, WIDE and LARGE; 16_igemm_nd, built per shape, every third plain case), and the
  cases of its own tile (shapes.tile_cases: channels at T - 1 and T + 1 for its TM and TN, so a
  partial block follows a full one), checked against the NumPy reference with guard zones around
  every tensor and workspace; a case the stage cannot run must be refused by name before any launch
  (conv_forward: Winograd off 3x3 stride 1, a bias or an activation without a fused epilogue);
- the paths it took (runner.path_taken: fast, general, fallback, only), each at least
  MIN_PER_PATH times (shapes.require_paths), for every stage that has paths, of every operation;
- its ``variants`` (registry: the define sets beside its defaults) over every third case;
- a fast path its kernel decides for itself (``branches``, e.g. stage 08's ``inside``), probed:
  a copy of the kernel marks the guard zone before its output where the branch is taken, and
  enough fast-path cases of the grid must show the mark.
The grid test is one test per operation (a class: a scope of its own for the workers) and backend
the engine knows (helpers/engine/backends: BACKENDS), each on its backend's context fixture
(tests/conftest.py: CONTEXTS), and every stage must land in one.
CUDA stages run where CuPy sees an NVIDIA GPU (the cuda_ctx fixture skips them elsewhere, saying
why; tests/test_cuda.py compiles them to PTX on any machine). Stage auto times every candidate
per shape: tests/test_conv_dgrad.py runs it on a subset.

The planted faults at the end prove the grid's power at its size: each is planted in a
temporary copy of a stage or launcher and must be caught by the same code the grid test runs.
"""
import dataclasses
import os
import re
from collections import Counter

import pyopencl as cl
import pytest

import helpers
from helpers.engine import build
from helpers.engine.backends import BACKENDS
from helpers.launch import gemm, igemm_nd
from helpers.runner import path_of, stage_source
from helpers.stages import REGISTRY

from conftest import CONTEXTS
from shapes import (ANY_SHAPE, GRIDS, MIN_PER_PATH, RESIDUES, TIERS, case_id, conv_grid, expected_paths, host_paths,
                    require_paths, tile_cases)

STAGES = [s for ss in REGISTRY.values() for s in ss if not s.choose]
OPENCL = [s for s in STAGES if s.backend == "opencl"]      # the host-side path and branch probes


def key(s) -> str:
    return f"{s.op}-{s.name}"


def run_grid(stage, ctx, cases, defines=None) -> Counter:
    """Check ``stage`` on each (label, make_args) case with guards; the paths taken, and
    "refused" for a case refused by name before any launch."""
    paths = Counter()
    for label, make in cases:
        try:
            res = helpers.check_stage(stage.op, stage, ctx=ctx, guard=True, defines=defines, **make())
        except ValueError as err:
            if "cannot run this problem" not in str(err):
                raise
            paths["refused"] += 1
            continue
        except (AssertionError, helpers.GuardViolation) as err:
            raise AssertionError(f"stage {stage.key} of {stage.op} {defines or ''} failed on {label}:\n{err}") from None
        paths[res.path] += 1
    return paths


def grid_cases(stage) -> list:
    """The stage's grid: its operation's, and the cases of its own tile. 16_igemm_nd is built for
    each layer's shape (its taps, strides, dilations and fitted tile are JIT parameters: nearly every
    case is a build of its own, about 2 s on PoCL), so it runs every third of the plain cases and
    every any-shape case, the shapes it is for."""
    cases = GRIDS[stage.op]()
    if stage.family is igemm_nd:
        cases = cases[:-len(ANY_SHAPE)][::3] + cases[-len(ANY_SHAPE):]
    return cases + tile_cases(stage)


def check_over_grid(stage, ctx) -> None:
    cases = grid_cases(stage)
    if os.environ.get("COURSE_QUICK"):        # ./course test --quick: the first case the stage runs
        for case in cases:
            paths = run_grid(stage, ctx, [case])
            if not paths["refused"]:
                return
        raise AssertionError(f"stage {stage.key} ran none of its {len(cases)} grid cases")
    paths = run_grid(stage, ctx, cases)
    ran = sum(paths.values()) - paths["refused"]
    assert ran >= min(MIN_PER_PATH, len(cases)), f"stage {stage.key} ran {ran} of {len(cases)} grid cases: {dict(paths)}"
    require_paths(stage, paths)
    for variant in stage.variants:
        run_grid(stage, ctx, cases[::3], variant)


def grid_test(backend: str, stages: list):
    """The grid test of one backend's ``stages``, on the context its fixture gives (conftest.CONTEXTS).
    The fixture is requested by name (usefixtures), so pytest still parametrizes it over the
    backend's devices, and a stage runs on every device of its own backend and only there."""
    fixture = CONTEXTS[backend]

    @pytest.mark.usefixtures(fixture)
    @pytest.mark.parametrize("stage", stages, ids=key)
    @pytest.mark.debug_builds       # on a CPU, without the optimiser: the test below checks with it
    def test(self, request, stage):
        check_over_grid(stage, request.getfixturevalue(fixture))
    return test


def grid_class(op: str):
    """TestGrid_<op>: test_opencl_stage_over_its_grid, test_cuda_stage_over_its_grid, ...: one per
    backend that has a context fixture and stages of ``op`` (a backend without a fixture is caught
    by the test below, not skipped in silence). A class per operation is a scope of its own for
    the suite's --dist loadscope, so the operations' grids, most of this module's time, spread
    over the workers instead of queueing on one."""
    tests = {f"test_{b}_stage_over_its_grid": grid_test(b, stages)
             for b in BACKENDS if b in CONTEXTS and (stages := [s for s in STAGES if s.op == op and s.backend == b])}
    return type(f"TestGrid_{op}", (), tests)


GRID_CLASSES = [grid_class(op) for op in REGISTRY]
globals().update({cls.__name__: cls for cls in GRID_CLASSES})
GRID_TESTS = [test for cls in GRID_CLASSES for name, test in vars(cls).items() if name.startswith("test_")]


@pytest.mark.parametrize("stage", OPENCL, ids=key)
def test_every_stage_is_right_at_the_drivers_optimisation(ctx, stage):
    """The grids and the other breadth tests build for a CPU without the optimiser (debug_builds:
    three times faster on PoCL). Here each OpenCL stage is built as a learner's run builds it, with
    the driver's optimisation, and checked on the last grid case it runs with its own kernel (its
    own tile's partial block where it has one), so that an answer that depends on the optimiser
    fails."""
    assert not build.UNOPTIMISED_ON_CPU
    cases = grid_cases(stage)
    for case in reversed(cases):
        paths = run_grid(stage, ctx, [case])
        if not paths["refused"] and not paths["fallback"]:
            return
    raise AssertionError(f"stage {stage.key} ran none of its {len(cases)} grid cases with its own kernel")


@pytest.mark.debug_builds
def test_debug_builds_reach_a_cpu_build_and_no_other(ctx):
    """The marker's switch adds -cl-opt-disable to a CPU's builds, and only there; unmarked, nothing."""
    on_cpu = bool(ctx.devices[0].type & cl.device_type.CPU)
    assert build.UNOPTIMISED_ON_CPU
    assert ("-cl-opt-disable" in build._build_options(ctx, {"KH": 3})) == on_cpu
    build.UNOPTIMISED_ON_CPU = False        # (the fixture's monkeypatch restores it after the test)
    assert "-cl-opt-disable" not in build._build_options(ctx, {"KH": 3})


def ungridded(stages, tests) -> list:
    """The stages (as op-name) that none of ``tests`` is parametrized over."""
    gridded = {key(s) for test in tests for mark in test.pytestmark if mark.name == "parametrize"
               for s in mark.args[1]}
    return [key(s) for s in stages if key(s) not in gridded]


def test_every_stage_lands_in_a_grid_test():
    missing = ungridded(STAGES, GRID_TESTS)
    backends = sorted({s.backend for s in STAGES} - set(CONTEXTS))
    assert not missing, (f"no grid test runs {', '.join(missing)}: backend(s) {', '.join(backends)} need a "
                         f"context fixture, named in tests/conftest.py: CONTEXTS")


def test_a_stage_of_a_backend_without_a_context_fixture_is_caught():
    """A third backend's stage, planted: no grid test takes it, and the test above would say so."""
    third = dataclasses.replace(STAGES[0], name="naive_third", backend="third")
    assert ungridded(STAGES + [third], GRID_TESTS) == [key(third)]


def test_every_operation_has_a_grid():
    assert set(GRIDS) == set(REGISTRY), "a new operation needs its grid in tests/shapes.py (GRIDS)"


def test_the_tiers_cover_every_residue():
    """RESIDUES: channels (C, K) and widths at 1, 2, 3 mod 4 (every pair of C % 4 and W % 4) and
    at 1-3 and 5-7 mod 8."""
    assert {(c["c"] % 4, c["w"] % 4) for c in RESIDUES} == {(a, b) for a in (1, 2, 3) for b in (1, 2, 3)}
    for dim in ("c", "k", "w"):
        assert {c[dim] % 8 for c in RESIDUES} >= {1, 2, 3, 5, 6, 7}, dim


# ---- paths, decided on the host (no kernel runs): every OpenCL stage with paths -------------------

@pytest.mark.parametrize("stage", [s for s in OPENCL if expected_paths(s) != {"only"}], ids=key)
@pytest.mark.whole_grid
def test_every_path_is_taken_on_the_grid(ctx, stage):
    """Cheap and on every device: the grid test above counts the same paths while it checks."""
    require_paths(stage, host_paths(stage, ctx, GRIDS[stage.op]()))


# ---- fast paths the kernel decides for itself ---------------------------------------------------

OUTPUT = re.compile(r"__global\s+float\s*\*\s*(?:restrict\s+)?(\w+)")


def probed(stage, branch: str):
    """A copy of ``stage`` whose kernel writes 0 just before its output tensor wherever a work-item
    takes ``branch`` (``const bool branch = ...;``): the guard zone before the output shows it."""
    def source(jit):
        text = stage_source(stage, jit) or helpers.kernel_source(stage.kernel)
        out = OUTPUT.search(text).group(1)           # the first non-const float pointer: the output
        marked, n = re.subn(rf"(const bool {branch} = [^;]*;)", rf"\1 if ({branch}) {out}[-1] = 0.0f;", text)
        assert n, f"{stage.key}: no 'const bool {branch} = ...;' in its kernel"
        return marked
    return dataclasses.replace(stage, source=source)


def branch_taken(stage, branch: str, ctx, cases) -> int:
    """On how many of ``cases`` some work-item of ``stage`` took ``branch``, with the registry's
    defaults (a device's tuned tile changes which cases take it: the count must not depend on it)."""
    copy, taken = probed(stage, branch), 0
    for _, make in cases:
        plan = helpers.plan_stage(stage.op, copy, ctx=ctx, guard=True, defines=stage.defines, **make())
        plan.enqueue()
        plan.queue.finish()
        out = plan.tensor(next(iter(plan.problem.outputs))).check_guards()
        taken += bool(out and "before the tensor" in out)
    return taken


def fast_cases(stage, ctx) -> list:
    """The cases of the grid on which ``stage`` takes its fast path at stride 1 (where the
    kernels decide their own branches; with a stride they take the plain loads)."""
    return [(label, make) for label, make in GRIDS[stage.op]()
            if helpers.prepare(stage.op, **make()).dims.get("stride") == 1     # a plain 2-D shape at stride 1
            and path_of(stage.op, stage, ctx=ctx, defines=stage.defines, **make()) in ("fast", "only")]


def require_branch(stage, branch: str, ctx) -> None:
    taken = branch_taken(stage, branch, ctx, fast_cases(stage, ctx))
    assert taken >= MIN_PER_PATH, (f"stage {stage.key}: its kernel took its fast branch {branch!r} on "
                                   f"{taken} grid cases (need >= {MIN_PER_PATH})")


@pytest.mark.parametrize("stage, branch", [(s, b) for s in OPENCL for b in s.branches],
                         ids=lambda v: v if isinstance(v, str) else key(v))
@pytest.mark.whole_grid
def test_kernel_branches_are_taken_on_the_grid(ctx, stage, branch):
    require_branch(stage, branch, ctx)


# ---- planted faults: each must be caught by what the grid test runs ----------------------------

def planted(stage, old: str, new: str, header: str | None = None):
    """A copy of ``stage`` whose kernel (generated text included) has ``old`` replaced by ``new``;
    with ``header`` (a file of kernels/common), the fault goes into that header, inlined in place of
    its #include."""
    def source(jit):
        text = stage_source(stage, jit) or helpers.kernel_source(stage.kernel)
        if header:
            text = text.replace(f'#include "{header}"', helpers.kernel_source(f"common/{header}"))
        assert old in text, f"the planted fault no longer applies to {stage.key}; update this test"
        return text.replace(old, new)
    return dataclasses.replace(stage, source=source)


def test_a_dropped_tail_after_a_full_block_is_caught_by_the_tile_cases(ctx):
    """Stage 06 of the weight gradient leaving out the rows of K's last partial block when a full
    block comes before it (K > TM, K % TM != 0): every case of the fixed grid has K <= 64, the
    default TM, so only the cases from the stage's own tile meet it."""
    blocked = helpers.get_stage("conv_wgrad", "igemm_blocked")
    bad = planted(blocked, "if (k >= K) continue;", "if (k >= K || (m0 > 0 && k >= K / TM * TM)) continue;")
    assert max(c["k"] for c in conv_grid() + TIERS) <= blocked.defines["TM"]     # the fixed grid's K
    assert run_grid(bad, ctx, GRIDS["conv_wgrad"]()[:40], blocked.defines)        # its cases pass the fault
    with pytest.raises(AssertionError, match=r"failed on tile64_"):
        run_grid(bad, ctx, tile_cases(blocked), blocked.defines)


WIDTH = helpers.get_stage("conv_dgrad", "width")
STORE = "if (c0 + j < C && x0 + p < W) dx[((n * C + c0 + j) * H + h) * W + x0 + p] = acc[j][p];"


def test_a_store_past_dx_on_a_partial_block_is_caught(ctx):
    """Stage 08 writing its last element one past dx, leaving the last unwritten, only where
    C % CPW == 2 and W % XPW == 3: the residue tier has such a case (the main grid's channels
    are 1, 3, 16, 17, 32, 48, 64) and the grid test's run over the tier fails on it, at the
    registry's CPW and XPW (a device's tuned values would move the residues)."""
    last = "(C % CPW == 2 && W % XPW == 3 && n == N - 1 && c0 + j == C - 1 && h == H - 1 && x0 + p == W - 1)"
    bad = planted(WIDTH, STORE, STORE.replace("x0 + p] = acc", f"x0 + p + {last}] = acc"))
    cases = GRIDS["conv_dgrad"]()
    start = len(cases) - len(ANY_SHAPE) - len(TIERS)
    tier = cases[start:start + len(RESIDUES)]
    assert [label for label, _ in tier] == [case_id(c) for c in RESIDUES]
    with pytest.raises(AssertionError, match=r"failed on n2c18k10_6x15_.*\n.*grad_input.*after the tensor"):
        run_grid(bad, ctx, tier, WIDTH.defines)
    assert run_grid(WIDTH, ctx, tier, WIDTH.defines)          # the stage itself passes the same cases


def test_the_im2col_vector_path_switched_off_is_caught(ctx):
    """The im2col forward's float4 path switched off in its launcher (the entry's jit replaced:
    the registry holds the function itself): every case runs the general path, and the grid's
    path count refuses it."""
    im2col = helpers.get_stage("conv_forward", "im2col")
    require_paths(im2col, host_paths(im2col, ctx, GRIDS["conv_forward"]()))
    off = dataclasses.replace(im2col, jit=lambda p, d: {"GEMM_VEC_B": 0})
    with pytest.raises(AssertionError, match=r"11_im2col: paths taken too rarely on the grid \{'fast': 0\}"):
        require_paths(off, host_paths(off, ctx, GRIDS["conv_forward"]()))


def test_the_forward_igemm_pointwise_path_switched_off_is_caught(ctx, monkeypatch):
    """The forward implicit GEMM's pointwise path (1x1 stride 1: B is x as it lies) switched off in
    its launcher: every case gathers, still right, and only the grid's path count refuses it."""
    igemm = helpers.get_stage("conv_forward", "igemm")
    require_paths(igemm, host_paths(igemm, ctx, GRIDS["conv_forward"]()))
    monkeypatch.setattr(gemm, "pointwise", lambda q: False)
    with pytest.raises(AssertionError, match=r"11_igemm: paths taken too rarely on the grid \{'fast': 0\}"):
        require_paths(igemm, host_paths(igemm, ctx, GRIDS["conv_forward"]()))


def test_the_forward_igemm_float4_columns_run_on_the_grid(ctx):
    """Inside the pointwise path, B's float4 copy (H*W % 4 == 0): the registry's path count proves
    only POINTWISE, so the grid must take the float4 copy too (at least 6 cases; 8 today: the
    pointwise tier's and the main grid's 1x1 layers with H*W % 4 == 0 that the stage runs, each
    checked with guards by the grid test), and
    the launcher's float4 switch turned off must show."""
    igemm = helpers.get_stage("conv_forward", "igemm")
    narrowed = dataclasses.replace(igemm, fast={"POINTWISE": 1, "GEMM_VEC_B": 1})
    assert host_paths(narrowed, ctx, GRIDS["conv_forward"]())["fast"] >= 6
    off = dataclasses.replace(narrowed, jit=lambda p, d: {**igemm.jit(p, d), "GEMM_VEC_B": 0})
    assert host_paths(off, ctx, GRIDS["conv_forward"]())["fast"] == 0


def test_a_fast_branch_forced_off_inside_the_kernel_is_caught(ctx):
    """Stage 08's ``inside`` (4-wide row loads where the whole window lies inside dy) forced to
    false in the kernel: every answer is still right, so only the probe sees it."""
    bad = planted(WIDTH, "const bool inside = colok[0] && colok[NCOL - 1];", "const bool inside = false;")
    with pytest.raises(AssertionError, match=r"08_width: its kernel took its fast branch 'inside' on 0 grid cases"):
        require_branch(bad, "inside", ctx)
