"""Choosing an OpenCL device without ever prompting.

Order of choice: the ``device`` argument, else the ``COURSE_DEVICE`` environment variable, else
``PYOPENCL_CTX``, else the first GPU found, else the first device of any kind (the CPU via PoCL).

A selector is either ``"P:D"`` (platform and device index, as printed by :func:`list_devices`),
``"P"`` (first device of platform P), or a case-insensitive substring of the platform or device
name (``"nvidia"``, ``"portable"``, ``"cpu"``, ``"gpu"``).
"""
from __future__ import annotations

import functools
import os

import pyopencl as cl

INSTALL_HINT = (
    "Install an OpenCL driver: the CPU driver PoCL comes with `pip install pocl-binary-distribution` "
    "(the course's ./course set-up installs it), or `conda install -c conda-forge pocl`; for a GPU, "
    "install the vendor's OpenCL driver (NVIDIA's driver package, AMD ROCm, Intel compute-runtime). "
    "OCL_ICD_DEBUG=7 shows what the OpenCL loader looks for."
)


class NoDeviceError(RuntimeError):
    """No OpenCL platform or no device matching the request."""


# A kernel that faults on a GPU (an address outside the memory it may use: a local-memory index
# past its tile, say) leaves its OpenCL context unusable: every later build or launch on it fails
# (NVIDIA: INVALID_COMMAND_QUEUE, then error -9999 at each build). Only learners' code can fault
# (the course's kernels are checked inside guard zones), so the two ways a learner's kernel runs,
# the kernel exercises' check and check_stage, report it (fault_report) and later builds say so.
FAULT_HINT = ("On a GPU such a fault leaves the notebook's OpenCL context unusable (later cells fail with "
              "INVALID_COMMAND_QUEUE or error -9999): restart the notebook's kernel (Kernel > Restart Kernel) "
              "and run the cells from the top before the next try.")
_FAULTED: dict = {}      # int_ptr -> context, for the contexts a kernel faulted on (kept, so no pointer is reused)


def note_fault(ctx: cl.Context) -> None:
    """Remember that a kernel faulted on ``ctx``."""
    _FAULTED[ctx.int_ptr] = ctx


def faulted(ctx) -> bool:
    """Whether a kernel faulted on this context earlier in this process."""
    return isinstance(ctx, cl.Context) and ctx.int_ptr in _FAULTED


def fault_report(ctx: cl.Context, err: Exception, hint: str = "") -> str:
    """Note that a kernel faulted on ``ctx`` (``err``: pyopencl's error at its launch, wait or
    read-back) and say what happened and what to do; ``hint``: where to look in the code."""
    note_fault(ctx)
    return (f"stopped with a fault on the device ({err}): it used an address outside the memory "
            f"it may use. {hint + ' ' if hint else ''}{FAULT_HINT}")


def _platforms() -> list:
    try:
        platforms = cl.get_platforms()
    except cl.Error as err:  # PLATFORM_NOT_FOUND_KHR: pyopencl installed, no driver
        raise NoDeviceError(f"No OpenCL platform found ({err}). {INSTALL_HINT}") from None
    if not platforms:
        raise NoDeviceError(f"No OpenCL platform found. {INSTALL_HINT}")
    return platforms


def list_devices() -> list[tuple[str, cl.Device]]:
    """All devices as ``("P:D", device)`` pairs, in the loader's order."""
    out = []
    for p, platform in enumerate(_platforms()):
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        out.extend((f"{p}:{d}", dev) for d, dev in enumerate(devices))
    return out


def _is_gpu(dev: cl.Device) -> bool:
    return bool(dev.type & cl.device_type.GPU)


def find_device(selector: str | None = None) -> cl.Device:
    """The device a selector names (see the module's docstring); never prompts."""
    if selector is None:
        selector = os.environ.get("COURSE_DEVICE") or os.environ.get("PYOPENCL_CTX") or None
    devices = list_devices()
    if not devices:
        raise NoDeviceError(f"OpenCL platforms exist but none has a device. {INSTALL_HINT}")
    if selector is None or selector.strip() == "":
        gpus = [dev for _, dev in devices if _is_gpu(dev)]
        return gpus[0] if gpus else devices[0][1]
    sel = selector.strip()
    if sel.replace(":", "").isdigit():
        p, _, d = sel.partition(":")
        key = f"{int(p)}:{int(d) if d else 0}"
        for k, dev in devices:
            if k == key:
                return dev
    else:
        low = sel.lower()
        for _, dev in devices:
            kind = "gpu" if _is_gpu(dev) else "cpu" if dev.type & cl.device_type.CPU else "other"
            if low in dev.name.lower() or low in dev.platform.name.lower() or low == kind:
                return dev
    available = "; ".join(f"{k} = {dev.platform.name} / {dev.name}" for k, dev in devices)
    raise NoDeviceError(f"No OpenCL device matches {selector!r}. Available: {available}. "
                        "Pass an index 'P:D' or part of a name, as an argument or in COURSE_DEVICE.")


@functools.lru_cache(maxsize=None)
def _context_for(dev: cl.Device) -> cl.Context:
    return cl.Context([dev])


def get_context(device=None) -> cl.Context:
    """A context for ``device``: a Context (returned as is), a Device, a selector string or None."""
    if isinstance(device, cl.Context):
        return device
    if isinstance(device, cl.Device):
        return _context_for(device)
    return _context_for(find_device(device))


@functools.lru_cache(maxsize=None)
def get_queue(ctx: cl.Context) -> cl.CommandQueue:
    """The one in-order profiling queue of a context (profiling events time every launch)."""
    return cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)


def device_info(ctx_or_dev=None) -> dict:
    """What results and figures record about a device."""
    dev = ctx_or_dev.devices[0] if isinstance(ctx_or_dev, cl.Context) else (
        ctx_or_dev if isinstance(ctx_or_dev, cl.Device) else find_device(ctx_or_dev))
    return {
        "name": dev.name.strip(),
        "vendor": dev.vendor.strip(),
        "platform": dev.platform.name.strip(),
        "driver": dev.driver_version.strip(),
        "opencl": dev.version.strip(),
        "type": "GPU" if _is_gpu(dev) else "CPU" if dev.type & cl.device_type.CPU else "other",
        "compute_units": dev.max_compute_units,
        "clock_mhz": dev.max_clock_frequency,
        "global_mem_bytes": dev.global_mem_size,
        "max_alloc_bytes": dev.max_mem_alloc_size,
        "local_mem_bytes": dev.local_mem_size,
        "max_work_group_size": dev.max_work_group_size,
        "cache_bytes": dev.global_mem_cache_size,
    }


def short_name(ctx_or_dev=None) -> str:
    """A label for figures: 'device (platform)'."""
    info = device_info(ctx_or_dev)
    return f"{info['name']} ({info['platform']})"


def main() -> None:
    """`python -m helpers`: list every OpenCL device and the one the course would choose."""
    for key, dev in list_devices():
        print(f"{key}  {dev.platform.name.strip()} / {dev.name.strip()}")
    chosen = find_device()
    print(f"chosen (COURSE_DEVICE, else PYOPENCL_CTX, else a GPU, else the first): {chosen.name.strip()}")

