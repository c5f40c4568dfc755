"""The backend seam: a stage's backend becomes its plan class in one place, and the CUDA path
(the runner, the registry, the CUDA backend, everything a CUDA stage is planned with) imports
and runs with pyopencl absent, as on a machine with CuPy and NVRTC but no OpenCL.

The subprocess below blocks ``import pyopencl`` (a sys.meta_path finder that refuses it, proven
to refuse it first), then plans CUDA stages as far as they go without a GPU: the stage resolved,
its JIT parameters, launches, workspaces and generated source decided (runner.specify), its PTX
compiled by NVRTC where the wheel is installed, and run_stage refused by the CUDA backend for want
of CuPy (not by an ImportError of pyopencl). With the device looked up from a stand-in, planning
goes on to the plan class's memory checks and stops exactly at the build, CuPy's first use."""
import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

from helpers.engine import backends
from helpers.engine.backends import nvrtc
from helpers.stages import REGISTRY

ROOT = pathlib.Path(__file__).resolve().parent.parent

BLOCKED = textwrap.dedent('''
    import json, sys

    class NoOpenCL:
        """Refuses pyopencl, as a machine without OpenCL would, and CuPy, so that the CUDA path is
        planned the same way on a GPU machine (where CuPy is installed) as on one without it."""
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("pyopencl", "cupy", "cupyx", "cupy_backends"):
                raise ImportError(f"{name} is blocked: this process has no OpenCL and no CuPy")

    sys.meta_path.insert(0, NoOpenCL())
    try:
        import pyopencl
        sys.exit("the blocker let pyopencl through")
    except ImportError:
        pass

    import helpers
    from helpers import runner, stages
    from helpers.engine.backends import BackendUnavailable, cuda, nvrtc
    from helpers.ops.conv_dgrad import random_problem_args
    out = {}
    args = random_problem_args(1, 8, 9, 7, 16, 3, 1, 1, "relu", seed=1)
    try:
        helpers.run_stage("conv_dgrad", "naive_cuda", **args)
    except BackendUnavailable as err:
        out["refused"] = str(err)

    # the device from a stand-in: planning goes on until CuPy is needed (the build)
    cuda.device = lambda: {"id": 0, "name": "stand-in", "total_memory": 2**34, "compute_capability": "90",
                           "max_threads_per_block": 1024, "max_shared_per_block": 227 * 1024, "l2_bytes": 2**25}

    class Built(Exception):
        pass

    def build(relpath, defines, source=None, arch=""):
        raise Built(relpath)
    cuda.build = build
    out["specs"], out["built"], out["ptx"] = {}, {}, {}
    cuda_stages = [s for ss in stages.REGISTRY.values() for s in ss if s.backend == "cuda"]
    for s in cuda_stages:
        problem = runner.prepare("conv_dgrad", **args) if s.op == "conv_dgrad" else None
        if problem is None:
            continue
        spec = runner.specify(s.op, s.name, problem, None, None, None)
        out["specs"][s.name] = [spec.stage.key, spec.path, [st.kernel for st in spec.steps]]
        try:
            helpers.plan_stage(s.op, s.name, **args)
        except Built as err:
            out["built"][s.name] = str(err)
        if nvrtc.missing() is None and s.name in ("naive_cuda", "tc_fp16_pipe"):
            ptx = nvrtc.compile_ptx(spec.stage.kernel, spec.jit_defines, "compute_80", spec.source)
            out["ptx"][s.name] = ".entry conv_dgrad(" in ptx
    out["modules"] = sorted(m for m in sys.modules if m.split(".")[0] in ("pyopencl", "cupy"))
    print(json.dumps(out))
''')


def run_blocked() -> dict:
    res = subprocess.run([sys.executable, "-c", BLOCKED], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_the_cuda_path_needs_no_opencl():
    out = run_blocked()
    assert out["modules"] == [], f"imported with pyopencl blocked: {out['modules']}"
    assert "CuPy" in out["refused"], out["refused"]           # the CUDA backend refuses, naming CuPy
    cuda_dgrad = [s.name for s in REGISTRY["conv_dgrad"] if s.backend == "cuda"]
    assert sorted(out["specs"]) == sorted(cuda_dgrad)
    assert out["specs"]["naive_cuda"] == ["02_naive_cuda", "only", ["conv_dgrad"]]
    # every CUDA stage of conv_dgrad reached its build: the last step before CuPy
    assert sorted(out["built"]) == sorted(cuda_dgrad), set(cuda_dgrad) - set(out["built"])
    if nvrtc.missing() is None:
        assert out["ptx"] == {"naive_cuda": True, "tc_fp16_pipe": True}


def test_one_dispatch_maps_each_backend_to_its_plan_class():
    from helpers.engine.backends.cuda import CudaPlan
    from helpers.engine.backends.opencl import ClPlan
    from helpers.engine.plan import Plan
    assert backends.plan_class("opencl") is ClPlan and backends.plan_class("cuda") is CudaPlan
    assert issubclass(ClPlan, Plan) and issubclass(CudaPlan, Plan)
    assert backends.BACKENDS == ("opencl", "cuda") and set(backends.KERNEL_FILES) == set(backends.BACKENDS)
    with pytest.raises(ValueError, match="unknown backend 'metal'; the backends are opencl, cuda"):
        backends.plan_class("metal")


def test_define_options_are_rendered_in_one_place():
    """OpenCL's build, CuPy's build and the PTX check all take their -D options from
    engine/kernels.py: one rendering (sorted, bools as 0/1, the include path first)."""
    from helpers.engine import build, kernels
    from helpers.engine.backends import cuda
    d = {"WG": 64, "FAST": True, "ACT": "ACT_RELU"}
    want = [f"-I{kernels.COMMON}", "-DACT=ACT_RELU", "-DFAST=1", "-DWG=64"]
    assert kernels.options(d) == want
    assert build.options is kernels.options and cuda.options is kernels.options
    assert nvrtc.options(d, "compute_80")[-4:] == want
    for path in (ROOT / "helpers").rglob("*.py"):
        if path.name != "kernels.py":
            assert 'f"-D{' not in path.read_text(), f"{path.relative_to(ROOT)} renders -D options itself"
