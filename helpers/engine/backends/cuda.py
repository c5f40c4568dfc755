"""The CUDA backend: CuPy's RawModule with NVRTC on an NVIDIA GPU.

The same services as the OpenCL path (helpers/engine/build.py, devices.py, timing.py): build a
kernel file with -D defines and the kernels/common include path, allocate and upload tensors
(optionally inside guard zones), launch on a grid of blocks, time with CUDA events after
overwriting a buffer larger than the L2 cache, read back.
"""
from __future__ import annotations

import functools

import numpy as np

from ..build import KERNELS, kernel_source
from ..tensor import DTYPES, GUARD_BYTES, check_dtype, from_storage, to_storage
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
            "compute_capability": dev.compute_capability}


def options(defines: dict) -> tuple:
    return (f"-I{KERNELS / 'common'}",
            *(f"-D{k}={int(v) if isinstance(v, bool) else v}" for k, v in sorted(defines.items())))


@functools.lru_cache(maxsize=256)
def _module(text: str, opts: tuple):
    import cupy
    mod = cupy.RawModule(code=text, options=opts, backend="nvrtc")
    mod.compile()
    return mod


def build(relpath: str, defines: dict, source: str | None = None):
    """A compiled module of kernels/<relpath> (cached per source text and options)."""
    text = source if source is not None else kernel_source(relpath)
    return _module(text, options(defines))


class Tensor:
    """A device array of ``dtype`` (float32, float16 or bfloat16, as helpers/engine/tensor.py
    stores them: a host array is converted once, on upload) and ``shape``, optionally between
    guard zones (as the OpenCL path: NaN around inputs, canaries around outputs, outputs
    pre-filled with NaN)."""

    def __init__(self, name: str, shape: tuple, host: np.ndarray | None, guard: bool, is_input: bool,
                 dtype: str = "float32"):
        import cupy
        self.name, self.shape, self.is_input, self.guard = name, tuple(shape), is_input, guard
        self.dtype = check_dtype(str(np.dtype(dtype)) if dtype != "bfloat16" else dtype)
        self.storage, canary = DTYPES[self.dtype]
        self.size = int(np.prod(shape))
        self.nbytes = self.size * self.storage.itemsize
        self.pad = GUARD_BYTES // self.storage.itemsize if guard else 0
        body = to_storage(host, self.dtype).ravel() if host is not None else None
        if not guard:
            self.whole = None
            self.array = cupy.asarray(body) if body is not None else cupy.empty(self.size, dtype=self.storage)
            return
        nan = to_storage(np.float32(np.nan), self.dtype)
        whole = np.empty(self.size + 2 * self.pad, dtype=self.storage)
        fill = nan if is_input else canary.view(self.storage)
        whole[:self.pad] = fill
        whole[self.pad + self.size:] = fill
        whole[self.pad:self.pad + self.size] = body if body is not None else nan
        self.initial = whole
        self.whole = cupy.asarray(whole)
        self.array = self.whole[self.pad:self.pad + self.size]   # a view: the kernel gets its address

    def read(self) -> np.ndarray:
        """float32 (float32 and bfloat16 tensors) or float16, in the tensor's shape."""
        import cupy
        return from_storage(cupy.asnumpy(self.array), self.dtype).reshape(self.shape)

    def changed_guards(self) -> str | None:
        """None when the guard zones (and an input's contents) are as uploaded, else what changed."""
        if self.whole is None:
            return None
        import cupy
        bits = np.dtype(f"uint{8 * self.storage.itemsize}")
        whole = cupy.asnumpy(self.whole).view(bits)
        initial = self.initial.view(bits)
        zones = [("before", slice(0, self.pad)), ("after", slice(self.pad + self.size, None))]
        if self.is_input:
            zones.append(("inside the input", slice(self.pad, self.pad + self.size)))
        for where, zone in zones:
            changed = np.flatnonzero(whole[zone] != initial[zone])
            if changed.size:
                first = changed[0] + (zone.start or 0) - self.pad
                return (f"{self.name}: {changed.size} value(s) changed {where} the tensor "
                        f"(first at element offset {first})")
        return None


def launch(kernel, global_size: tuple, local_size: tuple, args: tuple) -> None:
    """One launch with the OpenCL geometry: grid = global size / block, per dimension."""
    grid = tuple(int(g) // int(l) for g, l in zip(global_size, local_size))
    kernel(grid, tuple(int(l) for l in local_size), args)


def synchronize() -> None:
    import cupy
    cupy.cuda.Device().synchronize()


def default_flush_bytes() -> int:
    """4x the L2 cache, at least 128 MiB (as the OpenCL path on GPUs)."""
    return int(max(4 * device()["l2_bytes"], 128 * 2**20))


_flush: dict = {}


def time_launches(enqueue, *, warmup: int = 3, repeats: int = 20, flush_bytes: int | None = None) -> list:
    """Milliseconds of ``enqueue()`` per repetition, by CUDA events around it, after warm-up; the
    L2 cache is overwritten before each repetition."""
    import cupy
    if flush_bytes is None:
        flush_bytes = default_flush_bytes()
    if flush_bytes and flush_bytes not in _flush:
        _flush[flush_bytes] = cupy.empty(flush_bytes // 4, dtype=cupy.uint32)
    for _ in range(warmup):
        enqueue()
    synchronize()
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(repeats):
        if flush_bytes:
            _flush[flush_bytes].fill(0)
        start.record()
        enqueue()
        end.record()
        end.synchronize()
        times.append(float(cupy.cuda.get_elapsed_time(start, end)))
    return times
