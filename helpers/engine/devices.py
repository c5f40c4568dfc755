"""Choosing an OpenCL device without ever prompting.

Order of choice: the ``device`` argument, else the ``COURSE_DEVICE`` environment variable, else
``PYOPENCL_CTX``, else the first GPU found, else the first device of any kind (the CPU via PoCL).

A selector is either ``"P:D"`` (platform and device index, as printed by :func:`list_devices`),
``"P"`` (first device of platform P), a kind (``"gpu"``, ``"cpu"``), a vendor (``"nvidia"``,
``"amd"``, ``"intel"``, ``"apple"``: that vendor's GPUs, matched on the vendor the driver reports,
never on a device's name, so ``amd`` does not pick an AMD processor run through PoCL), or a
case-insensitive substring of the platform or device name (``"portable"``, ``"pthread"``, ``"H200"``).
"""
from __future__ import annotations

import functools
import sys
import os
import re

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


# the errors a launch is refused with before any kernel runs: its arguments or its grid are wrong,
# no memory was touched, and the context stays usable
LAUNCH_ERRORS = ("INVALID_KERNEL_ARGS", "INVALID_ARG_VALUE", "INVALID_ARG_SIZE", "INVALID_ARG_INDEX",
                 "INVALID_WORK_GROUP_SIZE", "INVALID_WORK_ITEM_SIZE", "INVALID_GLOBAL_WORK_SIZE",
                 "INVALID_GLOBAL_OFFSET", "INVALID_WORK_DIMENSION", "INVALID_KERNEL", "INVALID_VALUE")


def launch_refused(err: Exception) -> str | None:
    """The OpenCL error's name when ``err`` is a launch the driver refused (wrong arguments or grid),
    not a kernel that ran and faulted; else None."""
    text = f"{getattr(err, 'what', '')} {getattr(err, 'code', '')} {err}"
    return next((name for name in LAUNCH_ERRORS if re.search(rf"\b{name}\b", text)), None)


def fault_report(ctx: cl.Context, err: Exception, hint: str = "") -> str:
    """Say what went wrong at a launch, wait or read-back (``err``: pyopencl's error) and what to do;
    ``hint``: where to look in the code. A launch the driver refused (its arguments, its grid) is
    named as such; anything else is a kernel that faulted, noted on ``ctx``."""
    refused = launch_refused(err)
    if refused:
        return (f"was not launched: the driver refused its arguments or its grid ({refused}: {err}). No memory "
                f"was touched; check the work-group and global sizes and the kernel's arguments against the "
                f"device's limits (python -m helpers lists the device).")
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


def selector_of(dev: cl.Device) -> str:
    """The ``"P:D"`` index of a device (what another process passes to get_context for it)."""
    for index, d in list_devices():
        if d == dev:
            return index
    raise NoDeviceError(f"{dev.name.strip()} is not among the devices this process lists")


def is_gpu(dev: cl.Device) -> bool:
    """Whether an OpenCL device is a GPU (the one place the course classifies a device's kind)."""
    return bool(dev.type & cl.device_type.GPU)


def _kind(dev: cl.Device) -> str:
    return "gpu" if is_gpu(dev) else "cpu" if dev.type & cl.device_type.CPU else "other"


# The vendor words a selector may be, and how each vendor's drivers spell it (device or platform
# vendor): "AuthenticAMD" is an AMD processor (PoCL), not an AMD GPU, so only GPUs are matched.
VENDORS = {"nvidia": ("nvidia",), "amd": ("advanced micro devices", "amd"), "intel": ("intel",),
           "apple": ("apple",)}
INDEX = re.compile(r"^(\d+)(?::(\d+))?$")


def vendor_of(dev: cl.Device) -> str | None:
    """The GPU vendor word of a device ('nvidia', 'amd', ...), None for CPUs and unknown vendors."""
    if not is_gpu(dev):
        return None
    words = f"{dev.vendor} {dev.platform.vendor}".lower()
    return next((v for v, spellings in VENDORS.items() if any(s in words for s in spellings)), None)


def find_device(selector: str | None = None) -> cl.Device:
    """The device a selector names (see the module's docstring); never prompts."""
    if selector is None:
        selector = os.environ.get("COURSE_DEVICE") or os.environ.get("PYOPENCL_CTX") or None
    devices = list_devices()
    if not devices:
        raise NoDeviceError(f"OpenCL platforms exist but none has a device. {INSTALL_HINT}")
    if selector is None or selector.strip() == "":
        gpus = [dev for _, dev in devices if is_gpu(dev)]
        return gpus[0] if gpus else devices[0][1]
    sel = selector.strip()
    low = sel.lower()
    available = "; ".join(f"{k} = {dev.platform.name.strip()} / {dev.name.strip()}" for k, dev in devices)
    index = INDEX.match(sel)
    if index:
        key = f"{int(index[1])}:{int(index[2] or 0)}"
        found = [dev for k, dev in devices if k == key]
    elif re.fullmatch(r"[\d:\s]+", sel):
        raise NoDeviceError(f"{selector!r} is not a device index: write 'P:D' (platform, then device, e.g. "
                            f"0:1) or 'P'. Available: {available}.")
    elif low in VENDORS:
        found = [dev for _, dev in devices if vendor_of(dev) == low]
        if not found:
            raise NoDeviceError(f"No {low.upper() if low != 'apple' else 'Apple'} GPU here: {sel!r} names a "
                                f"vendor's GPU (matched on the vendor its driver reports). Available: {available}. "
                                "Pass 'cpu', an index 'P:D' or part of a name instead.")
    else:
        found = [dev for _, dev in devices
                 if low in dev.name.lower() or low in dev.platform.name.lower() or low == _kind(dev)]
    if found:
        return found[0]
    raise NoDeviceError(f"No OpenCL device matches {selector!r}. Available: {available}. "
                        "Pass an index 'P:D', a kind (gpu, cpu), a vendor (nvidia, amd, intel, apple) or part "
                        "of a name, as an argument or in COURSE_DEVICE.")


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


def architecture(vendor: str | None, kind: str, name: str, nv_cc: tuple | None = None) -> str:
    """A device's architecture as tuned values are shared by it: NVIDIA's compute capability
    ('sm_90', from the OpenCL driver or CUDA), AMD's gfx name ('gfx1100'), else the device's name
    (a CPU model, an Intel or Apple GPU)."""
    if vendor == "nvidia" and nv_cc:
        return f"sm_{nv_cc[0]}{nv_cc[1]}"
    gfx = re.match(r"gfx\w+", name.strip())
    if vendor == "amd" and gfx:
        return gfx.group(0)
    return f"{kind}:{name.strip()}"


def describe(dev: cl.Device) -> dict:
    """What tuned values are matched by (helpers/tuned_values.py): the device's name, its kind, its GPU
    vendor word (None for CPUs) and architecture."""
    vendor, kind = vendor_of(dev), _kind(dev)
    try:
        cc = (dev.compute_capability_major_nv, dev.compute_capability_minor_nv) if vendor == "nvidia" else None
    except cl.Error:                       # a driver without cl_nv_device_attribute_query
        cc = None
    return {"name": dev.name.strip(), "type": kind.upper(), "vendor": vendor or dev.vendor.strip().lower(),
            "arch": architecture(vendor, kind, dev.name, cc)}


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
        "type": "GPU" if is_gpu(dev) else "CPU" if dev.type & cl.device_type.CPU else "other",
        "compute_units": dev.max_compute_units,
        "clock_mhz": dev.max_clock_frequency,
        "global_mem_bytes": dev.global_mem_size,
        "max_alloc_bytes": dev.max_mem_alloc_size,
        "local_mem_bytes": dev.local_mem_size,
        "max_work_group_size": dev.max_work_group_size,
        "cache_bytes": dev.global_mem_cache_size,
        "describe": describe(dev),
    }


def short_name(ctx_or_dev=None) -> str:
    """A label for figures: 'device (platform)'."""
    info = device_info(ctx_or_dev)
    return f"{info['name']} ({info['platform']})"


def why_chosen() -> str:
    """Which setting chose the device: what `python -m helpers` prints beside its choice."""
    for var in ("COURSE_DEVICE", "PYOPENCL_CTX"):
        if os.environ.get(var, "").strip():
            return f"{var}={os.environ[var].strip()!r}"
    return "no COURSE_DEVICE or PYOPENCL_CTX: the first GPU, else the first device"


USAGE = """usage: python -m helpers

Lists every OpenCL device (as P:D, platform / name, kind and vendor) and the one the course
would choose, with why. Choose another with COURSE_DEVICE (an index P:D, 'gpu' or 'cpu', a
vendor: nvidia, amd, intel, apple, or part of a device's name) or a device= argument.
The commands: ./course help (or python -m helpers.bench --help, python -m helpers.tune --help)."""


def main(argv=None) -> int:
    """`python -m helpers`: list every OpenCL device and the one the course would choose; a
    mistake (no driver, a selector that matches nothing) is one line on stderr, exit status 2."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if argv:
        print(f"error: python -m helpers takes no arguments (got {' '.join(argv)}); it lists the devices. "
              f"Choose one with COURSE_DEVICE; see --help", file=sys.stderr)
        return 2
    try:
        devices = list_devices()
        for key, dev in devices:
            kind = _kind(dev).upper()
            print(f"{key}  {dev.platform.name.strip()} / {dev.name.strip()}  ({kind}, {dev.vendor.strip()})")
        chosen = find_device()
    except NoDeviceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    key = next(k for k, dev in devices if dev == chosen)
    print(f"chosen: {key} {chosen.name.strip()} (by {why_chosen()})")
    return 0

