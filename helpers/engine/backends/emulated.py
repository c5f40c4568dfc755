"""The emulator: CUDA stages on the CPU, for the tests: a kernel file built as C++ by g++ against a stand-in
for the device, loaded with ctypes, launched on the OpenCL-style geometry of its Steps.

A machine without an NVIDIA GPU can only compile the .cu files to PTX (nvrtc.py); this runs them,
so their index arithmetic, their tiles' edges and the tensor-core fragments are checked against
the NumPy reference there too (helpers/emulated_stage.py: EmulatedPlan, tests/test_emulated.py). What
the device does is in emulator/: cuda.h (threadIdx, __shared__, __syncthreads, ... for a .cu
file), runtime.cpp (threads as fibers, barriers, launches), instructions.cpp (warp-level mma.sync
and ldmatrix, warpgroup-level wgmma through its shared-memory descriptors, cp.async groups, the
conversions' rounding) and hopper.cpp (mbarriers, the Tensor Memory Accelerator's boxes through
tensor maps made here, bulk copies, bar.sync 1), built once and shared by every kernel library;
emulated_ptx.h and emulated_hopper.h (kernels/common/tc.cuh's PTX instructions). The fragment
layouts and the 128-byte swizzle come from helpers/engine/fragments.py. Each launch runs on one of
two schedules, the two ends of what a GPU may do (Library.launch). Not modelled: timing, every
other interleaving of warps and blocks, layouts and modes the kernels do not use (they stop a
launch).

    lib = build("conv_dgrad/13_tc_fp16.cu", {"KH": 3, "KW": 3, "STRIDE": 1, "BF16": 0}, ["conv_dgrad"])
    lib.launch("conv_dgrad", (2, 1, 1), (128, 1, 1), (dy, y, w, dx, np.int32(1), ...))
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from .. import fragments
from ..kernels import COMMON, kernel_source
from ..tensor import Tensor

EMULATOR = Path(__file__).resolve().parent / "emulator"
FLAGS = ("-std=c++17", "-O1", "-fPIC", "-fno-strict-aliasing", "-w")
# fragments.tables()'s tables in the order of emulator/instructions.cpp's emu_set_fragments
TABLES = ("a_tf32", "b_tf32", "a_16", "b_16", "c", "ldm_lanes", "ldm_values", "d_wgmma", "swizzle_128b")
# CUDA's dynamic shared memory, which no macro can spell for the CPU: `extern __shared__ T name[];`
# becomes a pointer to the emulator's (emulator/emulated_hopper.h)
DYNAMIC_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([A-Za-z_][\w ]*?)\s+(\w+)\[\];")
DYNAMIC_SHARED_BYTES = 227 * 1024
SOURCES = ("runtime.cpp", "instructions.cpp", "hopper.cpp")      # the runtime library
SCHEDULES = ("lazy", "eager")


class EmulationError(RuntimeError):
    """The emulated kernel did not build, or a launch stopped (a fault, a deadlock, a bad address)."""


class Device:
    """Where an emulated stage runs, in place of a context: described as no recorded device is (no
    vendor), so no tuned values apply and a stage runs its registry's defines (helpers/runner.py:
    device_tuning)."""
    emulated = True
    description = {"name": "CPU emulation of CUDA", "type": "CPU", "vendor": None, "arch": None}


DEVICE = Device()


def compiler() -> str:
    return os.environ.get("CXX", "g++")


def missing() -> str | None:
    """None when kernels can be emulated here, else what is missing."""
    if not sys.platform.startswith("linux"):
        return (f"the CPU emulation of the CUDA stages runs on Linux (its shared memory is an ELF section), "
                f"not on {sys.platform}")
    if shutil.which(compiler()) is None:
        return f"the CPU emulation of the CUDA stages needs a C++ compiler ({compiler()}): apt-get install g++"
    return None


def _cache() -> Path:
    path = Path(tempfile.gettempdir()) / "course-emulated"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _run(args: list, what: str) -> None:
    done = subprocess.run([compiler(), *FLAGS, *args], capture_output=True, text=True)
    if done.returncode:
        log = "\n".join(done.stderr.splitlines()[:40])
        raise EmulationError(f"{what} does not build for the CPU emulation:\n{log}")


def _cached(name: str, suffix: str, key: str, make) -> Path:
    """The file ``name``-<hash of key>``suffix`` in the cache, made by ``make(path)`` if absent
    (written under another name first, so that processes building it at once do not collide)."""
    path = _cache() / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:20]}{suffix}"
    if not path.exists():
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        make(tmp)
        tmp.replace(path)
    return path


@functools.lru_cache(maxsize=None)
def _compiler_version() -> str:
    return subprocess.run([compiler(), "--version"], capture_output=True, text=True).stdout


def _runtime_key() -> str:
    parts = [p.read_text() for p in sorted(EMULATOR.iterdir())]
    return "\n".join([*parts, *FLAGS, _compiler_version()])




def _unit(relpath: str, defines: dict, kernels: tuple, source: str | None, arch: str) -> str:
    """The translation unit: the device stand-in, the defines (and sm_90a's feature macro for a
    stage built for it), the kernel file, an entry per kernel."""
    lines = ['#include "cuda.h"']
    lines += [f"#define {k} {int(v) if isinstance(v, bool) else v}" for k, v in sorted(defines.items())]
    if arch == "sm_90a":
        lines.append("#define __CUDA_ARCH_FEAT_SM90_ALL 1")
    text = source if source is not None else kernel_source(relpath)
    text = DYNAMIC_SHARED.sub(r"\1* const \2 = (\1*)emu_dynamic_shared;", text)
    lines += [f'#line 1 "kernels/{relpath}"', text, ""]
    lines += [f"EMU_ENTRY({k})" for k in kernels] + ["EMU_SHARED_SECTION"]
    return "\n".join(lines) + "\n"


class Library:
    """A built kernel file: its kernels by name, each launched on a grid of blocks."""

    def __init__(self, path: Path, relpath: str):
        self.relpath = relpath
        self.runtime = runtime_library()       # loaded first: the kernels' emu:: symbols are its
        self.lib = ctypes.CDLL(str(path))
        self.lib.emu_shared_section.restype = ctypes.c_void_p
        self.shared_bytes = ctypes.c_ulong()
        self.shared = self.lib.emu_shared_section(ctypes.byref(self.shared_bytes))

    def signature(self, kernel: str) -> list[str]:
        """The kernel's parameters: "p4" (pointer to 4-byte values), "p2", "i4" (int), "f4" (float)."""
        fn = getattr(self.lib, f"emu_signature_{kernel}")
        fn.restype = ctypes.c_char_p
        return fn().decode().rstrip(",").split(",")

    def launch(self, kernel: str, grid: tuple, block: tuple, args: tuple, schedule: str = "lazy") -> None:
        """Run ``kernel`` on ``grid`` x ``block`` threads (3 dimensions each) with ``args``: NumPy
        arrays (their address; the element size must match the parameter's) and NumPy scalars.
        ``schedule``, the two ends of what a GPU may do: "lazy" (cp.async and TMA copies land as late
        as the kernel's waits allow, so a kernel that reads a slot too early reads stale data; the
        warps of a block advance together) or "eager" (copies land when issued, and the first warp
        that can run runs ahead of the others until it must wait, so a kernel that refills a slot
        still being read, or lacks a barrier between warps, spoils it)."""
        if schedule not in SCHEDULES:
            raise ValueError(f"the schedule is 'lazy' or 'eager', not {schedule!r}")
        params = self.signature(kernel)
        if len(params) != len(args):
            raise EmulationError(f"{kernel} of kernels/{self.relpath} takes {len(params)} arguments, got {len(args)}")
        values = []
        for i, (p, a) in enumerate(zip(params, args)):
            if isinstance(a, np.ndarray) and (p == "pv" or p in ("p2", "p4") and a.itemsize == int(p[1])):
                values.append(ctypes.c_void_p(a.ctypes.data))
            elif isinstance(a, (np.int32, int)) and not isinstance(a, bool) and p == "i4":
                values.append(ctypes.c_int32(int(a)))
            elif isinstance(a, np.float32) and p == "f4":
                values.append(ctypes.c_float(float(a)))
            else:
                given = f"an array of {a.itemsize}-byte values" if isinstance(a, np.ndarray) else type(a).__name__
                raise EmulationError(f"{kernel} of kernels/{self.relpath}: argument {i} is {given}, the parameter {p}")
        argv = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
        t = fragments.tables()           # at each launch: the model as it is now
        tables = [np.ascontiguousarray(t[k], dtype=np.int32) for k in TABLES]
        self.runtime.emu_set_fragments(*(a.ctypes.data_as(ctypes.c_void_p) for a in tables))
        dims = ctypes.c_uint * 3
        err = ctypes.create_string_buffer(1024)
        fn = getattr(self.lib, f"emu_call_{kernel}")
        if self.runtime.emu_launch(fn, argv, dims(*grid), dims(*block), ctypes.c_void_p(self.shared), self.shared_bytes,
                                   int(schedule == "eager"), err, len(err)):
            raise EmulationError(f"{kernel} of kernels/{self.relpath} (emulated): {err.value.decode()}")


@functools.lru_cache(maxsize=None)
def _load(path: Path, relpath: str) -> Library:
    return Library(path, relpath)


def build(relpath: str, defines: dict, kernels, source: str | None = None, arch: str = "") -> Library:
    """kernels/<relpath> (or ``source``) with its defines, built once per text for the CPU, with an
    entry for each of ``kernels`` (the kernel names its launches use); ``arch``: a stage's own
    target (sm_90a: wgmma)."""
    if missing():
        raise EmulationError(missing())
    unit = _unit(relpath, defines, tuple(sorted(set(kernels))), source, arch)
    key = "\n".join([unit, _runtime_key(), *(p.read_text() for p in sorted(COMMON.iterdir()))])

    def make(out: Path) -> None:         # its emu:: symbols resolve to the runtime's when loaded
        src = out.with_suffix(".cpp")
        src.write_text(unit)
        try:
            _run(["-shared", f"-I{EMULATOR}", f"-I{COMMON}", str(src), "-o", str(out)], f"kernels/{relpath}")
        finally:
            src.unlink(missing_ok=True)
    return _load(_cached(Path(relpath).stem, ".so", key, make), relpath)


@functools.lru_cache(maxsize=1)
def runtime_library() -> ctypes.CDLL:
    """The runtime (emulator/runtime.cpp, instructions.cpp), built once per text, flags and compiler and loaded once,
    its symbols global: every kernel library uses it (one pool of thread stacks), and the tests
    compare its conversions with NumPy's."""
    if missing():
        raise EmulationError(missing())
    path = _cached("runtime", ".so", _runtime_key(),
                   lambda out: _run(["-shared", *(str(EMULATOR / f) for f in SOURCES), "-o", str(out)],
                                    "the emulator's runtime"))
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
    lib.emu_launch.restype = ctypes.c_int
    for name, res, arg in (("emu_cvt_rna_tf32", ctypes.c_uint32, ctypes.c_float),
                           ("emu_cvt_rn_f16", ctypes.c_uint16, ctypes.c_float),
                           ("emu_cvt_rn_bf16", ctypes.c_uint16, ctypes.c_float),
                           ("emu_f16_to_f32", ctypes.c_float, ctypes.c_uint16)):
        getattr(lib, name).restype, getattr(lib, name).argtypes = res, [arg]
    return lib


def tensor_map(t: "HostTensor", dims: tuple, box: tuple, swizzle: bool = True) -> np.ndarray:
    """The emulator's tensor map of ``t`` (cuda.tensor_map's arguments: a contiguous array of extents
    ``dims``, innermost first, read in boxes of ``box`` elements, 128-byte swizzled in shared memory
    or dense): its 128 bytes as emulator/hopper.cpp reads them, for a kernel to get their address."""
    item, rank = t.buffer.itemsize, len(dims)
    if int(np.prod(dims)) > t.buffer.size or not 1 <= rank <= 5 or len(box) != rank:
        raise RuntimeError(f"registry bug: a tensor map of extents {dims}, box {box} for {t.name} ({t.buffer.size} values)")
    strides = [item * int(np.prod(dims[:d])) for d in range(rank)]
    if (t.buffer.ctypes.data % 16 or any(s % 16 for s in strides[1:]) or box[0] * item % 16
            or (swizzle and box[0] * item > 128) or max(box) > 256):
        raise ValueError(f"{t.name}: a tensor map needs an address and strides that are multiples of 16 bytes, "
                         f"rows of a multiple of 16 bytes (at most 128 with the swizzle) and boxes of at most 256 "
                         f"(got strides {strides[1:]} and box {box}); the stage's requires should have refused this problem")
    pad = (5 - rank)
    raw = struct.pack("<Q4I5Q5Q5I", t.buffer.ctypes.data, rank, item, int(swizzle), 0, *dims, *[1] * pad,
                      *strides, *[0] * pad, *box, *[1] * pad)
    return np.frombuffer(raw.ljust(128, b"\0"), dtype=np.uint8).copy()


class HostTensor(Tensor):
    """A tensor of an emulated CUDA stage: DeviceTensor's interface (guard zones included) on host
    memory, a kernel getting the address of ``buffer`` (a NumPy view into the guarded allocation)."""
    backend, backend_label = "cuda", "CUDA (emulated on the CPU)"

    def __init__(self, name: str, shape: tuple, host: np.ndarray | None = None, guard: bool = False,
                 is_input: bool = False, dtype: str = "float32", layout: str = "NCHW"):
        self._lay_out(name, shape, host, guard, is_input, dtype, layout, align=16)

    def _allocate(self, count: int):
        return np.empty(count, dtype=self.storage)

    def _view(self, parent, offset: int, count: int):
        return parent[offset:offset + count]

    def _transfer(self, dest, src) -> None:
        np.copyto(dest, src)
