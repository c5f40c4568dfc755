"""The grids every stage is checked on: each operation's awkward shapes (fixed seeds).

conv_grid (conv_dgrad, conv_wgrad; conv_forward takes every other case): every kernel size (1, 2,
3, 5) with every stride (1, 2, 3), every padding (0 .. kernel-1) and every activation; batch 1-3;
channels from {1, 3, 16, 17, 32, 48} (and 64 in the cases aimed at the combining stages'
requirements); spatial sizes from {1, 2, 5, 7, 8, 13, 28}, with H != W in most cases. More than
200 cases: every path of a stage is counted on it (MIN_PER_PATH).

Three tiers beside it, run by every stage of the three convolutions (tests/test_stages.py):
RESIDUES, channel counts (C and K) and widths at every residue 1, 2, 3 mod 4 (each of the nine
pairs of C % 4 and W % 4 once) and 1-3, 5-7 mod 8, so that a per-work-item block of channels or
positions (CPW, XPW, float4s) meets every partial last block; WIDE, 3x3 stride-1 layers with
K % 16 == 0 on rows wide enough for the direct stages' in-kernel fast branch; and LARGE, planes
larger than a work-group's tile in both directions (37 x 61, 64 x 67 ...), so that tiles repeat
and the last ones are partial. conv_forward's grid adds POINTWISE, 1x1 stride-1 layers without
padding (the forward implicit GEMM's path with nothing to gather). ANY_SHAPE
(helpers/ops/grid_any_shape.py), after them in every convolution's grid: groups, dilation, strides
per axis, padding per side, 1 to 4 spatial axes (the any-shape stages run them, the others refuse
them by name).
"""
import itertools
from collections import Counter

import numpy as np

from helpers.ops import conv3d_dgrad, conv_dgrad, conv_forward, conv_wgrad, gemm
from helpers.ops import reference as ref
from helpers.ops.batchnorm_backward import random_backward_args
from helpers.ops.batchnorm_forward import random_args as bn_forward_args
# the any-shape tier (DEPTHWISE, ANY_SHAPE) lives in the package: chapter 16's kernel exercise runs it too
from helpers.ops.grid_any_shape import ANY_SHAPE, DEPTHWISE, any_shape_args, any_shape_id  # noqa: F401
from helpers.runner import path_of

ACTS = ("none", "relu", "sigmoid", "tanh")
CHANNELS = (1, 3, 16, 17, 32, 48)
SIZES = (1, 2, 5, 7, 8, 13, 28)


def conv_grid(per_combo: int = 6, seed: int = 1234):
    rng = np.random.default_rng(seed)
    cases = []
    combos = [(k, s, p) for k in (1, 2, 3, 5) for s in (1, 2, 3) for p in range(k)]
    for i, ((k, s, p), rep) in enumerate(itertools.product(combos, range(per_combo))):
        act = ACTS[(i + rep) % len(ACTS)]
        while True:
            h, w = (int(v) for v in rng.choice(SIZES, 2))
            if h + 2 * p >= k and w + 2 * p >= k:
                break
        n = int(rng.integers(1, 4))
        c, kk = (int(v) for v in rng.choice(CHANNELS, 2))
        cases.append(dict(n=n, c=c, h=h, w=w, k=kk, kernel=k, stride=s, padding=p, activation=act))
    # channel counts that hit the combining stages' requirements exactly, and ones that miss them
    for i, (c, kk) in enumerate([(16, 16), (32, 48), (17, 32), (48, 17), (3, 64), (64, 3)]):
        cases.append(dict(n=2, c=c, h=13, w=7, k=kk, kernel=3, stride=1 + i % 2, padding=1, activation=ACTS[i % 4]))
    # 3x3 stride-1 layers with K >= 16 (Winograd F(4x4)), widths on and off its float4 stores
    # (W % 4 == 0), every padding
    for i, (c, kk, h, w) in enumerate([(16, 16, 8, 8), (17, 32, 5, 12), (3, 16, 13, 4), (32, 17, 7, 8),
                                       (16, 48, 4, 28), (1, 16, 9, 16), (48, 16, 6, 4), (16, 17, 7, 9),
                                       (17, 16, 12, 13)]):
        cases.append(dict(n=1 + i % 2, c=c, h=h, w=w, k=kk, kernel=3, stride=1, padding=i % 3, activation=ACTS[i % 4]))
    return cases


def _case(n, c, h, w, k, kernel=3, stride=1, padding=1, i=0):
    return dict(n=n, c=c, h=h, w=w, k=k, kernel=kernel, stride=stride, padding=padding, activation=ACTS[i % 4])


# C % 4 runs 1, 2, 3 three times while W % 4 stays 1, 2, 3 for three cases each: all nine pairs;
# C % 8 and W % 8 cover 1, 2, 3, 5, 6, 7; K too. 3x3 stride 1 (the fast paths), two strided.
RESIDUES = [_case(1 + i % 2, c, h, w, k, 3, 1 + (i in (4, 8)), 1, i) for i, (c, w, k, h) in enumerate(
    [(9, 9, 5, 4), (10, 13, 6, 5), (11, 17, 7, 3), (13, 10, 13, 6), (14, 14, 14, 4), (15, 6, 15, 5),
     (17, 11, 9, 3), (18, 15, 10, 6), (19, 7, 11, 4)])]
# 3x3 stride-1 layers with K % 16 == 0 (the direct stages' 16-depth blocks) on rows wider than
# two of stage 08's groups with their halo: the kernels' own fast branch (a window inside dy) runs
WIDE = [_case(1 + i % 2, c, h, w, k, 3, 1, p, i) for i, (c, h, w, k, p) in enumerate(
    [(5, 4, 17, 16, 1), (6, 3, 22, 32, 1), (7, 5, 19, 16, 0), (9, 3, 27, 48, 2), (10, 4, 14, 16, 1),
     (3, 3, 31, 32, 1), (12, 5, 23, 16, 0), (2, 6, 41, 64, 2)])]
LARGE = [_case(1, 5, 37, 61, 6, 3, 1, 1, 1), _case(1, 6, 45, 30, 3, 3, 2, 1, 0),
         _case(2, 3, 33, 35, 10, 5, 1, 2, 3), _case(1, 2, 64, 67, 17, 3, 1, 1, 2)]
# conv_forward's pointwise layers (1x1, stride 1, no padding: its implicit GEMM gathers nothing),
# without an activation so that every forward stage runs them; H*W on and off a multiple of 4
POINTWISE = [dict(n=n, c=c, h=h, w=w, k=k, kernel=1, stride=1, padding=0, activation="none") for n, c, k, h, w in
             [(1, 16, 16, 4, 4), (2, 3, 5, 5, 7), (1, 17, 65, 6, 6), (3, 8, 9, 3, 5), (2, 33, 12, 8, 3), (1, 5, 70, 9, 9),
              (2, 64, 31, 2, 6), (1, 20, 8, 7, 11), (1, 1, 1, 12, 4), (2, 9, 17, 1, 13), (1, 130, 7, 4, 5), (3, 6, 40, 10, 2)]]
TIERS = RESIDUES + WIDE + LARGE


def case_id(c) -> str:
    return (f"n{c['n']}c{c['c']}k{c['k']}_{c['h']}x{c['w']}_r{c['kernel']}s{c['stride']}p{c['padding']}"
            f"_{c['activation']}")


def wino_grid(seed: int = 12):
    """3x3 stride-1 shapes: every padding with sizes 1-13 (H != W), channels off every block."""
    rng = np.random.default_rng(seed)
    sizes, chans = (1, 2, 3, 5, 7, 8, 13), (1, 3, 16, 17, 33)
    cases = []
    for pad, rep in itertools.product(range(3), range(8)):
        while True:
            h, w = (int(v) for v in rng.choice(sizes, 2))
            if h + 2 * pad >= 3 and w + 2 * pad >= 3:
                break
        c, k = (int(v) for v in rng.choice(chans, 2))
        cases.append(dict(n=int(rng.integers(1, 4)), c=c, h=h, w=w, k=k, padding=pad))
    # more tiles than one 64-wide block of the register-blocked product, a partial last block
    # and more channels than one step of it (TK), so the prefetch of the next step runs
    cases.append(dict(n=3, c=37, h=23, w=21, k=66, padding=1))
    return cases


def forward_cases() -> list:
    """conv_forward's grid: every other case of conv_grid and the tiers without a bias or an
    activation (what every stage computes), wino_grid's 3x3 stride-1 shapes and six more whose
    output width is a multiple of 4 (F(4x4)'s float4 stores) for the Winograd stages, POINTWISE, and every
    sixth case of conv_grid with its activation, and a bias on half of them and on those without
    an activation (the stages with a fused epilogue; the others refuse them by name)."""
    bare = [dict(c, activation="none", bias=False) for c in conv_grid()[::2] + TIERS + POINTWISE]
    vec4 = [dict(n=1 + i % 2, c=c, h=h, w=w, k=k, padding=p) for i, (c, k, h, w, p) in enumerate(
        [(3, 5, 5, 8, 1), (17, 6, 9, 12, 1), (2, 19, 7, 6, 0), (9, 4, 6, 10, 0), (5, 3, 11, 4, 2), (10, 7, 4, 16, 1)])]
    wino = [dict(c, kernel=3, stride=1, activation="none", bias=False) for c in wino_grid() + vec4]
    fused = [dict(c, bias=c["activation"] == "none" or i % 2 == 0) for i, c in enumerate(conv_grid()[1::6])]
    return bare + wino + fused


# batch norm (N, C, H, W): N = 1, C = 1, H*W = 1, odd sizes, H*W % 4 in {0, 1, 2, 3}, slabs that
# start misaligned, more values per channel than one work-group holds; the last six with
# H*W % 4 == 0 (stages 05-06's float4 path). Each with values offset by 0 or 1000 (the
# statistics' cancellation).
BN_SHAPES = [(1, 1, 1, 2), (2, 1, 1, 1), (1, 3, 1, 1), (3, 2, 1, 1), (1, 1, 5, 7), (2, 3, 5, 7),
             (3, 5, 2, 3), (2, 2, 7, 7), (4, 3, 1, 6), (1, 2, 13, 5), (5, 1, 3, 3), (3, 2, 9, 11),
             (1, 3, 33, 31), (1, 4, 8, 8), (2, 6, 14, 14), (2, 3, 4, 4), (1, 5, 6, 6), (3, 2, 2, 10),
             (2, 4, 12, 12)]
# channels too large for one work-group's registers (stage 06 falls back to 05: more than 256 x 25
# units), centred values: 26,244 values offset by 1000 are past the naive stage's sequential sums
# (its mean 1000.21 for 1000.45, 1.6x the tolerance)
BN_LARGE = [(4, 2, 81, 81), (1, 3, 163, 159), (8, 1, 60, 57), (16, 1, 40, 44), (2, 2, 75, 90), (3, 1, 70, 123)]
BN_MODES = [dict(), dict(momentum=0.1), dict(training=False)]
BN_OFFSETS = [(0.0, 1.0), (1000.0, 1.0), (1000.0, 0.05)]

# gemm (M, N, K): 1, primes, non-multiples of the tiles and of 4; twelve with N and K multiples
# of 4 (the float4 path: the first of them, and the last eleven)
GEMM_SIZES = [(1, 1, 1), (1, 7, 3), (5, 1, 9), (17, 33, 5), (64, 64, 64), (65, 63, 17), (70, 129, 36),
              (3, 200, 128), (130, 12, 1), (96, 100, 40), (2, 3, 5), (9, 10, 11), (31, 17, 13), (100, 3, 7),
              (6, 50, 2), (4, 4, 4), (8, 12, 16), (33, 20, 8), (1, 4, 12), (13, 16, 4), (65, 68, 20),
              (7, 36, 44), (128, 32, 64), (5, 8, 100), (40, 24, 52)]
# conv3d_dgrad (N, C, D, H, W, K, kernel, stride, padding)
VOL_CASES = [(1, 2, 4, 5, 3, 3, 3, 1, 1), (2, 3, 5, 4, 6, 4, 3, 2, 1), (1, 1, 1, 1, 1, 1, 1, 1, 0),
             (1, 5, 6, 3, 5, 7, 2, 2, 0), (2, 4, 3, 7, 4, 2, 3, 3, 2)]


def _any_shape(op: str, first_seed: int = 0) -> list:
    return [(any_shape_id(c), lambda i=i, c=c: any_shape_args(op, c, first_seed + i)) for i, c in enumerate(ANY_SHAPE)]


def _conv(op: str, make):
    def cases():
        return [(case_id(c), lambda i=i, c=c: make(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"],
                                                   c["padding"], c["activation"], seed=i))
                for i, c in enumerate(conv_grid() + TIERS)] + _any_shape(op)
    return cases


def tile_cases(stage) -> list:
    """(label, make_args) cases derived from a stage's own tile: the fixed grid's largest channel
    count is 64, the default TM, so a product's partial last block after a full one would never be
    met there. For each tile extent T among TM, TN of the stage's defaults, channels C and K at T + 1 and T - 1
    on a plane of more than T positions, so that both the rows and the columns of the product (K or
    C; N*H*W or C*taps) have a full block followed by a partial one. Stride 1 and 2, no activation
    (what every stage computes); conv ops only, [] for a stage without such a tile."""
    if stage.op not in ("conv_dgrad", "conv_wgrad", "conv_forward"):
        return []
    sizes = sorted({stage.defines[t] for t in ("TM", "TN") if t in stage.defines})
    make = {"conv_dgrad": conv_dgrad.random_problem_args, "conv_wgrad": conv_wgrad.random_problem_args,
            "conv_forward": lambda n, c, h, w, k, r, st, p, act, seed: conv_forward.random_problem_args(
                n, c, h, w, k, r, st, p, seed)}[stage.op]
    out = []
    for t in sizes:
        for i, (c, k, st) in enumerate(((t + 1, t - 1, 1), (t - 1, t + 1, 2))):
            case = dict(n=1 + i, c=c, h=13, w=11, k=k, kernel=3, stride=st, padding=1, activation="none")
            out.append((f"tile{t}_" + case_id(case), lambda c=case, i=i: make(
                c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"], c["stride"], c["padding"], "none", seed=40 + i)))
    return out


def _forward():
    return [(case_id(c) + "_bias" * c["bias"],
             lambda i=i, c=c: conv_forward.random_problem_args(c["n"], c["c"], c["h"], c["w"], c["k"], c["kernel"],
                                                               c["stride"], c["padding"], i, c["activation"], c["bias"]))
            for i, c in enumerate(forward_cases())] + _any_shape("conv_forward")


def _bn_forward():
    out = []
    for i, (shape, mode) in enumerate((s, m) for s in BN_SHAPES + BN_LARGE for m in BN_MODES
                                      if not (m.get("training", True) and s[0] * s[2] * s[3] < 2)):
        offset, scale = BN_OFFSETS[i % len(BN_OFFSETS)] if shape in BN_SHAPES else (0.0, 1.0)
        out.append((f"{shape} {mode} offset {offset} scale {scale}",
                    lambda i=i, shape=shape, mode=mode, o=offset, s=scale: bn_forward_args(*shape, offset=o, scale=s,
                                                                                            seed=i, **mode)))
    return out


def _bn_backward():
    out = []
    for i, shape in enumerate(BN_SHAPES + BN_LARGE):
        offset, scale = BN_OFFSETS[i % len(BN_OFFSETS)] if shape in BN_SHAPES else (0.0, 1.0)
        for act in ("none", "relu"):
            out.append((f"{shape} {act} offset {offset}",
                        lambda i=i, shape=shape, a=act, o=offset, s=scale: random_backward_args(
                            *shape, activation=a, offset=o, scale=s, seed=i)))
    return out


# each operation's grid: (label, a function making the case's arguments), in a fixed order
GRIDS = {
    "conv_dgrad": _conv("conv_dgrad", conv_dgrad.random_problem_args),
    "conv_wgrad": _conv("conv_wgrad", conv_wgrad.random_problem_args),
    "conv_forward": _forward,
    "batchnorm_forward": _bn_forward,
    "batchnorm_backward": _bn_backward,
    "gemm": lambda: [(f"M{m}N{n}K{k}", lambda i=i, m=m, n=n, k=k: gemm.random_args(m, n, k, seed=i))
                     for i, (m, n, k) in enumerate(GEMM_SIZES)],
    "conv3d_dgrad": lambda: [(f"{c}", lambda i=i, c=c: conv3d_dgrad.random_problem_args(*c, seed=i))
                             for i, c in enumerate(VOL_CASES)],
}


# Every path a stage has (fast, general, fallback, ...) must be taken by at least this many
# cases of its grid: a fast path that silently stops being taken fails the tests.
MIN_PER_PATH = 12

# Paths no case of the grid can take, with the test that takes it instead.
OFF_GRID = {
    # the column workspace past 32-bit indexing needs > 8 GiB of columns: tests/test_paths.py
    # lowers the index limit so grid cases take it, tests/test_conv_gemm.py checks the real size
    "conv_dgrad/11_gemm_col2im": {"fallback"},
    # forward F(4x4) falls back to F(2x2) only past 32-bit scratch indices, where F(2x2), whose
    # scratch is larger on the same layer, cannot run either: no layer takes it (both refuse
    # what is not 3x3 stride 1, by name)
    "conv_forward/06_wino4_blocked": {"fallback"},
}


def expected_paths(stage, off_grid: bool = False) -> set:
    """The paths a stage's grid must take: fast and general (a stage with ``fast``) or only, and
    fallback (a stage with one); ``off_grid``: OFF_GRID's too."""
    expected = ({"fast", "general"} if stage.fast else {"only"}) | ({"fallback"} if stage.fallback else set())
    if stage.requires and stage.fallback and not stage.fast:     # its own kernel: "only"
        expected.add("only")
    return expected if off_grid else expected - OFF_GRID.get(f"{stage.op}/{stage.key}", set())


def require_paths(stage, counts: dict, off_grid: bool = False) -> None:
    """``counts``: path -> cases of the grid that took it (runner.path_taken; "refused": cases the
    stage cannot run, refused by name before any launch). ``off_grid``: the cases were changed
    so that the paths of OFF_GRID are taken too; require them. A stage of one path has none to
    count (the grid test requires that it ran)."""
    expected = expected_paths(stage, off_grid)
    if expected == {"only"}:
        return
    missing = {p: counts.get(p, 0) for p in expected if counts.get(p, 0) < MIN_PER_PATH}
    assert not missing, (f"stage {stage.key}: paths taken too rarely on the grid {missing} "
                         f"(need >= {MIN_PER_PATH} each; all counts: {counts})")


def host_paths(stage, ctx, cases) -> Counter:
    """The paths a stage takes on (label, make_args) cases, decided on the host without a launch
    (runner.path_of): what the grid test counts while it checks; "refused" for a case the stage
    cannot run (refused by name)."""
    paths = Counter()
    for _, make in cases:
        try:
            paths[path_of(stage.op, stage, ctx=ctx, **make())] += 1
        except ValueError as err:
            if "cannot run this problem" not in str(err):
                raise
            paths["refused"] += 1
    return paths


def covering(tune: dict, strength: int = 3) -> list:
    """Rows of ``tune``'s product (dicts of one value per parameter) such that every ``strength``
    parameters take every combination of their values in some row: a covering array, picked greedily
    from the product in its order (deterministic). For 7 two-valued tile parameters, 3-way coverage
    takes 16 of the 128 rows; a fault that needs four parameters at once to show is the rest's risk."""
    names = sorted(tune)
    rows = list(itertools.product(*(tune[n] for n in names)))
    groups = list(itertools.combinations(range(len(names)), min(strength, len(names))))
    left = {(g, tuple(row[i] for i in g)) for row in rows for g in groups}
    picked = []
    while left:
        best = max(rows, key=lambda row: sum((g, tuple(row[i] for i in g)) in left for g in groups))
        left -= {(g, tuple(best[i] for i in g)) for g in groups}
        picked.append(dict(zip(names, best)))
    return picked
