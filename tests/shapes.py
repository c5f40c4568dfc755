"""The grid of awkward conv shapes every conv stage is checked on (fixed seed, > 200 cases).

Every kernel size (1, 2, 3, 5) with every stride (1, 2, 3), every padding (0 .. kernel-1) and every
activation; batch 1-3; channels from {1, 3, 16, 17, 32, 48}; spatial sizes from
{1, 2, 5, 7, 8, 13, 28}, with H != W in most cases.
"""
import itertools

import numpy as np

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


def case_id(c) -> str:
    return (f"n{c['n']}c{c['c']}k{c['k']}_{c['h']}x{c['w']}_r{c['kernel']}s{c['stride']}p{c['padding']}"
            f"_{c['activation']}")


# Every path a stage has (fast, general, fallback, ...) must be taken by at least this many
# cases of the grid: a fast path that silently stops being taken fails the tests.
MIN_PER_PATH = 12

# Paths no case of the grid can take, each with the test that takes it instead.
OFF_GRID = {
    # the column workspace past 32-bit indexing needs > 8 GiB of columns: tests/test_paths.py
    # lowers the index limit so grid cases take it, tests/test_conv_gemm.py checks the real size
    "11_gemm_col2im": {"fallback"},
}


def require_paths(stage, counts: dict, off_grid: bool = False) -> None:
    """``counts``: path -> cases of the grid that took it (runner.path_taken). ``off_grid``: the
    cases were changed so that the paths of OFF_GRID are taken too; require them."""
    expected = ({"fast", "general"} if stage.fast else {"only"}) | ({"fallback"} if stage.fallback else set())
    if stage.requires and stage.fallback and not stage.fast:     # its own kernel: "only"
        expected.add("only")
    if not off_grid:
        expected -= OFF_GRID.get(stage.key, set())
    missing = {p: counts.get(p, 0) for p in expected if counts.get(p, 0) < MIN_PER_PATH}
    assert not missing, (f"stage {stage.key}: paths taken too rarely on the grid {missing} "
                         f"(need >= {MIN_PER_PATH} each; all counts: {counts})")
