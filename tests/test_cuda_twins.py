"""The CUDA twins of chapters 09-10 compile through NVRTC for compute_80 and compute_90 (no GPU
needed); skipped where cuda-bindings or nvidia-cuda-nvrtc are not installed."""
import pytest

from helpers.ops.conv_dgrad import random_problem_args
from helpers.runner import prepare

from cuda_twins import TWINS, compile_twin, twin_defines

nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="pip install cuda-bindings nvidia-cuda-nvrtc")


@pytest.mark.parametrize("arch", ["compute_80", "compute_90"])
@pytest.mark.parametrize("key", TWINS)
def test_twin_compiles(key, arch):
    for shape in ((2, 64, 56, 56, 64, 3, 1, 1, "relu"), (1, 17, 7, 7, 33, 1, 1, 0, "none")):
        p = prepare("conv_dgrad", **random_problem_args(*shape, seed=0))
        defines, grid, block = twin_defines(key, p)
        try:
            ptx = compile_twin(key, defines, arch)
        except RuntimeError as err:
            if "nvrtc" in str(err).lower() and "load" in str(err).lower():
                pytest.skip(f"NVRTC library not loadable: {err}")
            raise
        assert ".entry conv_dgrad" in ptx and ".shared" in ptx
        assert block[0] * grid[0] > 0
