"""The CUDA backend: CuPy's RawModule with NVRTC on an NVIDIA GPU.

The same services as the OpenCL path (helpers/engine/build.py, devices.py, timing.py): build a
kernel file with -D defines and the kernels/common include path, device tensors (CudaTensor:
DeviceTensor's interface, guard zones included), launch on a grid of blocks, time with CUDA
events after overwriting a buffer larger than the L2 cache.
"""
from __future__ import annotations

import functools

import numpy as np

from ..build import KERNELS, kernel_source
from ..tensor import Tensor, check_host, default_dtype
from . import require


@functools.lru_cache(maxsize=None)
def device():
    """The current CUDA device (CuPy's; CUDA_VISIBLE_DEVICES picks it) and its facts."""
    require("cuda", "this CUDA stage cannot run")
    import cupy
    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {"id": dev.id, "name": name, "total_memory": int(props["totalGlobalMem"]),
            "l2_bytes": int(props["l2CacheSize"]), "max_threads_per_block": int(props["maxThreadsPerBlock"]),
            "compute_capability": dev.compute_capability,
            "max_shared_per_block": int(props.get("sharedMemPerBlockOptin", props["sharedMemPerBlock"]))}


def describe() -> dict:
    """The current CUDA device as tuned values are matched (helpers/engine/devices.py: describe)."""
    from ..devices import architecture
    dev = device()
    cc = str(dev["compute_capability"])
    return {"name": dev["name"], "type": "GPU", "vendor": "nvidia",
            "arch": architecture("nvidia", "gpu", dev["name"], (cc[:-1], cc[-1]))}


def options(defines: dict) -> tuple:
    return (f"-I{KERNELS / 'common'}",
            *(f"-D{k}={int(v) if isinstance(v, bool) else v}" for k, v in sorted(defines.items())))


@functools.lru_cache(maxsize=256)
def _module(text: str, opts: tuple, arch: str = ""):
    import cupy
    if not arch:
        mod = cupy.RawModule(code=text, options=opts, backend="nvrtc")
        mod.compile()
        return mod
    # CuPy builds for the device's own architecture (sm_90 on Hopper), which has no wgmma: the
    # kernel is compiled here for ``arch`` (sm_90a) with NVRTC, and the module loaded from its PTX.
    import hashlib
    import os
    import tempfile
    from pathlib import Path
    from cupy.cuda import nvrtc
    prog = nvrtc.createProgram(text, "kernel.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(prog, (*opts, f"--gpu-architecture={arch}", "-default-device"))
        except nvrtc.NVRTCError as e:
            raise RuntimeError(f"NVRTC cannot build the kernel for {arch}: {nvrtc.getProgramLog(prog)}") from e
        ptx = nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    data = ptx if isinstance(ptx, bytes) else ptx.encode()
    path = Path(tempfile.gettempdir()) / "course-ptx" / f"{hashlib.sha256(data).hexdigest()[:24]}.ptx"
    if not path.exists():                       # one file per distinct PTX, shared by processes
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return cupy.RawModule(path=str(path))


def build(relpath: str, defines: dict, source: str | None = None, arch: str = ""):
    """A compiled module of kernels/<relpath> (cached per source text and options); ``arch``: a
    target other than the device's own (a stage's Stage.arch)."""
    text = source if source is not None else kernel_source(relpath)
    return _module(text, options(defines), arch)


class CudaTensor(Tensor):
    """A tensor on the current CUDA device (CuPy's), with DeviceTensor's interface and guard zones
    (helpers/engine/tensor.py): ``buffer`` is a flat CuPy array of the stored values, a view into
    the guarded allocation when there are guards (a kernel gets its address)."""
    backend = "cuda"

    def __init__(self, name: str, shape: tuple, host: np.ndarray | None = None, guard: bool = False,
                 is_input: bool = False, dtype: str = "float32", layout: str = "NCHW"):
        self.device = device()["id"]
        self._lay_out(name, shape, host, guard, is_input, dtype, layout)

    @classmethod
    def from_array(cls, array: np.ndarray, dtype: str | None = None, layout: str = "NCHW",
                   guard: bool = False, name: str = "tensor") -> "CudaTensor":
        """Upload ``array`` (a float32 or float16 NumPy array, converted to ``dtype``; default: its
        own): the rule of run_stage's arguments (engine/tensor.py: check_host)."""
        check_host("array", array, dtype, "CudaTensor.from_array")
        return cls(name, array.shape, array, guard, True, dtype or default_dtype(array), layout)

    def _allocate(self, count: int):
        import cupy
        return cupy.empty(count, dtype=self.storage)

    def _view(self, parent, offset: int, count: int):
        return parent[offset:offset + count]

    def _transfer(self, dest, src) -> None:
        if isinstance(dest, np.ndarray):
            src.get(out=dest)        # waits for the kernels queued before on the stream
        else:
            dest.set(src)


# cuTensorMapEncodeTiled's element types by storage size (the bits are copied, not converted):
# float32 (fp32 and tf32 tensors), 16-bit (fp16 and bf16 bits in float16 storage: zero fill is
# zero in both)
_MAP_TYPES = {4: 7, 2: 1}           # CU_TENSOR_MAP_DATA_TYPE_FLOAT32, _UINT16
_SWIZZLE_128B, _L2_256B = 3, 3      # CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B


@functools.lru_cache(maxsize=None)
def _driver():
    import ctypes
    lib = ctypes.CDLL("libcuda.so.1")           # loaded by CuPy already; the driver API's own entry
    lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
    return lib


def tensor_map(t: "CudaTensor", dims: tuple, box: tuple, swizzle: bool = True):
    """A tensor map of ``t`` (a contiguous array of extents ``dims``, innermost first) for the
    Tensor Memory Accelerator (kernels/common/tc.cuh: tensor_copy_3d, tensor_copy_4d,
    tensor_store_4d): boxes of ``box`` elements, in shared memory with the 128-byte swizzle (or
    densely: ``swizzle`` False), elements outside the extents read as zeros and never written.
    Returns the map (128 bytes) copied to the device, where the kernel reads it through its address."""
    import ctypes
    import cupy
    item, ptr = t.buffer.itemsize, t.buffer.data.ptr
    if int(np.prod(dims)) > t.buffer.size:
        raise RuntimeError(f"registry bug: a tensor map of extents {dims} is larger than {t.name} ({t.buffer.size} values)")
    strides = [int(np.prod(dims[:i + 1])) * item for i in range(len(dims) - 1)]
    if (ptr % 16 or any(s % 16 for s in strides) or box[0] * item % 16 or (swizzle and box[0] * item > 128)
            or max(box) > 256):
        raise ValueError(f"{t.name}: a tensor map needs an address and strides that are multiples of 16 bytes "
                         f"(got {ptr % 16} and {strides}), rows of a multiple of 16 bytes (at most 128 with the "
                         f"swizzle) and boxes of at most 256 (got {box}); the stage's requires should have "
                         f"refused this problem")
    u64, u32 = ctypes.c_uint64 * len(dims), ctypes.c_uint32 * len(dims)
    encoded = (ctypes.c_uint64 * 16)()
    err = _driver().cuTensorMapEncodeTiled(
        ctypes.byref(encoded), _MAP_TYPES[item], len(dims), ctypes.c_void_p(ptr), u64(*dims),
        (ctypes.c_uint64 * max(1, len(strides)))(*strides), u32(*box), u32(*[1] * len(dims)),
        0, _SWIZZLE_128B if swizzle else 0, _L2_256B, 0)
    if err:
        name = ctypes.c_char_p()
        known = _driver().cuGetErrorName(err, ctypes.byref(name)) == 0 and name.value
        raise RuntimeError(f"cuTensorMapEncodeTiled refused the map of {t.name} (extents {dims}, box {box}): "
                           f"{name.value.decode() if known else f'CUresult {err}'}")
    return cupy.asarray(np.frombuffer(bytes(encoded), dtype=np.uint8))


def launch(kernel, global_size: tuple, local_size: tuple, args: tuple, shared: int = 0) -> None:
    """One launch with the OpenCL geometry: grid = global size / block, per dimension; ``shared``
    bytes of dynamic shared memory per block."""
    grid = tuple(int(g) // int(l) for g, l in zip(global_size, local_size))
    kernel(grid, tuple(int(l) for l in local_size), args, shared_mem=int(shared))


def synchronize() -> None:
    import cupy
    cupy.cuda.Device().synchronize()


def default_flush_bytes() -> int:
    """4x the L2 cache, at least 128 MiB (as the OpenCL path on GPUs)."""
    return int(max(4 * device()["l2_bytes"], 128 * 2**20))


_flush: dict = {}


def flush_cache(flush_bytes: int | None) -> None:
    """Overwrite a buffer of ``flush_bytes`` (default: default_flush_bytes) on the stream."""
    import cupy
    if flush_bytes is None:
        flush_bytes = default_flush_bytes()
    if flush_bytes and flush_bytes not in _flush:
        _flush[flush_bytes] = cupy.empty(flush_bytes // 4, dtype=cupy.uint32)
    if flush_bytes:
        _flush[flush_bytes].fill(0)


def time_launches(launches: list, *, warmup: int = 3, repeats: int = 20, flush_bytes: int | None = None,
                  each: bool = False) -> list:
    """Milliseconds per repetition of the ``launches`` (functions that launch one kernel each) in
    order, by CUDA events, after warm-up; the L2 cache is overwritten before each repetition.
    ``each``: one list of times per launch (events around each), else one list for all of them."""
    import cupy
    for _ in range(warmup):
        for launch_one in launches:
            launch_one()
    synchronize()
    events = [cupy.cuda.Event() for _ in range(len(launches) + 1)]
    times = [[] for _ in launches] if each else []
    for _ in range(repeats):
        flush_cache(flush_bytes)
        events[0].record()
        for i, launch_one in enumerate(launches):
            launch_one()
            if each:
                events[i + 1].record()
        events[-1].record()
        events[-1].synchronize()
        if each:
            for i, t in enumerate(times):
                t.append(float(cupy.cuda.get_elapsed_time(events[i], events[i + 1])))
        else:
            times.append(float(cupy.cuda.get_elapsed_time(events[0], events[-1])))
    return times
