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
