"""Shared fixtures: every test that runs kernels runs on every available OpenCL device.

Narrow the devices with COURSE_TEST_DEVICES (comma-separated selectors, e.g. "portable" or
"nvidia"), as pyopencl's own tests do with PYOPENCL_TEST.
"""
import os

import pytest

from helpers.engine.devices import find_device, get_context, list_devices


def _test_devices():
    sel = os.environ.get("COURSE_TEST_DEVICES")
    if sel:
        return [find_device(s) for s in sel.split(",")]
    return [dev for _, dev in list_devices()]


DEVICES = _test_devices()


@pytest.fixture(params=DEVICES, ids=[d.name.strip()[:24] for d in DEVICES], scope="session")
def ctx(request):
    return get_context(request.param)


@pytest.fixture(autouse=True, scope="session")
def _choices_out_of_the_checkout(tmp_path_factory):
    """Stage auto's cache of timed choices (helpers/chooser.py) goes to a temporary file in tests."""
    if "COURSE_CHOICES" not in os.environ:
        os.environ["COURSE_CHOICES"] = str(tmp_path_factory.mktemp("choices") / "choices.json")
    yield


@pytest.fixture(autouse=True, scope="session")
def _no_personal_tuning(tmp_path_factory):
    """A learner's own tuned values (./course tune: helpers/tuning.py's user cache) never reach the
    tests: they read an empty cache of their own unless COURSE_TUNE_CACHE names one."""
    if "COURSE_TUNE_CACHE" not in os.environ:
        os.environ["COURSE_TUNE_CACHE"] = str(tmp_path_factory.mktemp("tune") / "tuned.json")
        from helpers import tuning
        tuning.reload()
    yield
