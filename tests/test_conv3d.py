"""Op conv3d_dgrad (chapter 11's vol2col): the reference against a brute-force sum, bad input
(every stage against the reference with guard regions: tests/test_stages.py)."""
import itertools

import numpy as np
import pytest

import helpers
from helpers.ops.conv3d_dgrad import conv3d_dgrad, random_problem_args

def test_reference_matches_brute_force():
    a = random_problem_args(1, 2, 4, 3, 5, 3, kernel=3, stride=2, padding=1, seed=1)
    dy, w = a["grad_output"].astype(np.float64), a["weight"].astype(np.float64)
    n, c, d, h, wd = a["input_shape"]
    want = np.zeros(a["input_shape"])
    _, k, od, oh, ow = dy.shape
    for z, y, x, oz, oy, ox in itertools.product(range(d), range(h), range(wd), range(od), range(oh), range(ow)):
        t, r, s = z + 1 - 2 * oz, y + 1 - 2 * oy, x + 1 - 2 * ox
        if 0 <= t < 3 and 0 <= r < 3 and 0 <= s < 3:
            want[:, :, z, y, x] += np.einsum("nk,ck->nc", dy[:, :, oz, oy, ox], w[:, :, t, r, s])
    np.testing.assert_allclose(conv3d_dgrad(a["grad_output"], a["weight"], a["input_shape"], 2, 1), want, rtol=1e-12)


def test_bad_input():
    a = random_problem_args(1, 2, 4, 5, 3, 3)
    with pytest.raises(ValueError, match="grad_output must have shape"):
        helpers.prepare("conv3d_dgrad", **{**a, "stride": 2})
    with pytest.raises(ValueError, match="input_shape"):
        helpers.prepare("conv3d_dgrad", **{**a, "input_shape": (1, 2, 4, 5)})
    with pytest.raises(TypeError, match="float32"):
        helpers.prepare("conv3d_dgrad", **{**a, "weight": a["weight"].astype(np.float64)})
