"""Shared fixtures: every test that runs kernels runs on every available device of its backend.

    ctx       each OpenCL device (a context); narrow them with COURSE_TEST_DEVICES
              (comma-separated selectors, e.g. "portable" or "nvidia"), as pyopencl's own tests
              do with PYOPENCL_TEST
    cuda_ctx  CuPy's current NVIDIA GPU (CUDA_VISIBLE_DEVICES picks it; CUDA stages take no
              context: the value is None); without one, the test is skipped with the reason

A test that runs every stage of a backend finds its fixture in CONTEXTS.
"""
import importlib.util
import os
from pathlib import Path

import pytest

from helpers.tools.needs import needed  # a test that judges the environment: skip, or fail under COURSE_CI=1
from helpers.engine.backends import cuda_missing
from helpers.engine.devices import find_device, get_context, list_devices


def _test_devices():
    sel = os.environ.get("COURSE_TEST_DEVICES")
    if sel:
        return [find_device(s) for s in sel.split(",")]
    return [dev for _, dev in list_devices()]


DEVICES = _test_devices()
CUDA_MISSING = cuda_missing()


def device_params(backend: str) -> list:
    """The devices a test of ``backend`` runs on, as pytest params: every OpenCL device; the
    current CUDA GPU, or one param skipped with what is missing."""
    if backend == "opencl":
        return [pytest.param(d, id=d.name.strip()[:24]) for d in DEVICES]
    return [pytest.param(None, id="cuda", marks=pytest.mark.skipif(CUDA_MISSING is not None,
                                                                    reason=str(CUDA_MISSING)))]


@pytest.fixture(params=device_params("opencl"), scope="session")
def ctx(request):
    return get_context(request.param)


@pytest.fixture(params=device_params("cuda"), scope="session")
def cuda_ctx(request):
    return request.param


# backend (helpers/engine/backends: BACKENDS) -> the fixture above that gives its tests a context on
# each device of that backend: the one place tests over every stage (tests/test_stages.py) learn
# how to run a backend's stages, so a new backend needs its fixture and a line here, nothing more
CONTEXTS = {"opencl": "ctx", "cuda": "cuda_ctx"}


@pytest.fixture(autouse=True, scope="session")
def _choices_out_of_the_checkout(tmp_path_factory):
    """Stage auto's cache of timed choices (helpers/chooser.py) goes to a temporary file in tests."""
    if "COURSE_CHOICES" not in os.environ:
        os.environ["COURSE_CHOICES"] = str(tmp_path_factory.mktemp("choices") / "choices.json")
    yield


@pytest.fixture(autouse=True, scope="session")
def _no_personal_tuning(tmp_path_factory):
    """A learner's own tuned values (./course tune: helpers/tuned_values.py's user cache) never reach the
    tests: they read an empty cache of their own unless COURSE_TUNE_CACHE names one."""
    if "COURSE_TUNE_CACHE" not in os.environ:
        os.environ["COURSE_TUNE_CACHE"] = str(tmp_path_factory.mktemp("tune") / "tuned.json")
        from helpers import tuned_values
        tuned_values.reload()
    yield


def nbgrader_missing() -> str | None:
    return None if importlib.util.find_spec("nbgrader") else \
        "nbgrader is not installed here (./course student clears solutions with it: pip install nbgrader)"


def course_venv_missing() -> str | None:
    """./course sets up .venv on first use, installing from the package index: where the checkout
    has none (a GPU machine without network), the command cannot be run as a user types it."""
    venv = Path(__file__).resolve().parent.parent / ".venv" / "bin" / "python"
    return None if venv.exists() else ("this checkout has no .venv, and ./course would install one from the "
                                       "package index (run ./course setup first)")


@pytest.fixture(autouse=True)
def _debug_builds(request, monkeypatch):
    """Tests marked ``debug_builds`` (the breadth tests: thousands of builds) build for a CPU device
    with -cl-opt-disable (helpers/engine/build.py: UNOPTIMISED_ON_CPU); the rest, the notebooks and
    every GPU build keep the driver's optimisation."""
    if request.node.get_closest_marker("debug_builds"):
        from helpers.engine import build
        monkeypatch.setattr(build, "UNOPTIMISED_ON_CPU", True)


@pytest.fixture(autouse=True)
def _environment_needs(request):
    """Tests marked ``nbgrader`` need nbgrader, ``course_venv`` the checkout's .venv (pyproject.toml)."""
    if request.node.get_closest_marker("nbgrader"):
        needed(nbgrader_missing())
    if request.node.get_closest_marker("course_venv"):
        needed(course_venv_missing())


# ./course test --quick: the unit tests with one grid case per stage, no notebooks, no test marked
# slow and none of the runs of whole editions (the full suite, ./course test, runs everything)
QUICK_LEFT_OUT = ("notebooks/", "tests/test_editions.py", "tests/test_answer_leaks.py", "tests/test_site.py",
                  "tests/test_browser.py", "tests/test_lab_times.py", "tests/test_checker_at_size.py",
                  "tests/test_emulated.py")


def pytest_addoption(parser):
    parser.addoption("--quick", action="store_true",
                     help="the unit tests and one grid case per stage, without the notebooks (about 11 minutes on 2 CPU cores)")


def pytest_configure(config):
    if config.getoption("--quick", default=False):
        os.environ["COURSE_QUICK"] = "1"


# The longest scopes start first (./course test runs --dist loadscope --no-loadscope-reorder, so the
# workers take scopes in this order): the student edition's run (one test, about 10 minutes on 2
# cores), then the grid of each operation (tests/test_stages.py, a class each), then the rest as
# collected, the notebooks last: short scopes at the end keep both workers busy to the end.
def _start_order(item) -> int:
    return 0 if item.nodeid.startswith("tests/test_editions.py") else 1 if "::TestGrid_" in item.nodeid else 2


def pytest_collection_modifyitems(config, items):
    items.sort(key=_start_order)    # stable: each scope's tests keep their order
    if not config.getoption("--quick", default=False):
        return
    kept, left = [], []
    for item in items:
        out = item.nodeid.startswith(QUICK_LEFT_OUT) or item.get_closest_marker("slow") or \
            item.get_closest_marker("whole_grid")
        (left if out else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept
