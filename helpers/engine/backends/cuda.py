"""The CUDA backend: CuPy's RawModule with NVRTC on an NVIDIA GPU.

The same services as the OpenCL backend (backends/opencl.py with engine/build.py, devices.py,
timing.py): build a kernel file with the -D options of engine/kernels.py, device tensors
(CudaTensor: DeviceTensor's interface, guard zones included), plans (CudaPlan: ClPlan's),
launch on a grid of blocks, time with CUDA events after overwriting a buffer larger than the L2
cache. Nothing here or in what it imports needs pyopencl; CuPy is imported where a GPU is used.
"""
from __future__ import annotations

import functools

import numpy as np

from ..kernels import kernel_source, options
from ..plan import DeviceLimitError, Plan, PlanSpec, Step
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
    dev = device()
    # CuPy's compute capability ("90") is the architecture, as devices.architecture names an
    # NVIDIA GPU's from its OpenCL driver (sm_90); that module needs pyopencl, this one does not
    return {"name": dev["name"], "type": "GPU", "vendor": "nvidia", "arch": f"sm_{dev['compute_capability']}"}


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
    return _module(text, tuple(options(defines)), arch)


class CudaTensor(Tensor):
    """A tensor on the current CUDA device (CuPy's), with DeviceTensor's interface and guard zones
    (helpers/engine/tensor.py): ``buffer`` is a flat CuPy array of the stored values, a view into
    the guarded allocation when there are guards (a kernel gets its address)."""
    backend, backend_label = "cuda", "CUDA"

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


class CudaPlan(Plan):
    """A CUDA stage bound to a problem on CuPy's current device: the same contract as ClPlan
    (enqueue, tensor, bind, outputs, check_guards, result, queue.finish); launches go to CuPy's
    current stream, in order, so plans chain as on one OpenCL queue. CuPy raises its own errors
    for a kernel that faulted (``faults`` is empty: they pass through check_stage as they are)."""
    backend, label, tensor_class = "cuda", "CUDA", CudaTensor

    class _Queue:
        finish = staticmethod(synchronize)

    @staticmethod
    def context(ctx, inputs: dict) -> None:
        """CUDA stages run on CuPy's current device (CUDA_VISIBLE_DEVICES picks it): no context."""
        return None

    @staticmethod
    def describe(ctx) -> dict:
        """The device as tuned values are matched (helpers/tuned_values.py)."""
        return describe()

    def __init__(self, spec: PlanSpec, ctx, guard: bool):
        self.queue = self._Queue()
        super().__init__(spec, ctx, guard)
        s, p = self.stage, self.problem
        dev = device()
        item = 2 if self.dtype != "float32" else 4
        need = sum(item * a.size for n, a in p.inputs.items() if n not in p.aliases and not isinstance(a, Tensor))
        need += sum(item * int(np.prod(shape)) for shape in p.outputs.values())
        need += sum(w.nbytes for w in self.workspace.values())
        if need > dev["total_memory"]:
            raise ValueError(f"the tensors need {need / 2**30:.2f} GiB, more than the "
                             f"{dev['total_memory'] / 2**30:.2f} GiB of {dev['name']}; use a smaller batch")
        if s.arch and f"sm_{dev['compute_capability']}a" != s.arch:
            raise DeviceLimitError(f"stage {s.key} is built for {s.arch} (its instructions exist on no other "
                                   f"GPU), but {dev['name']} is sm_{dev['compute_capability']}; run a stage "
                                   f"built for any GPU instead (chapter 13's tc_*_nhwc: the same product on mma.sync)")
        self.module = build(s.kernel, self.jit_defines, source=self.source, arch=s.arch)
        self._make_tensors()
        self._bound = [self._bind(step, dev) for step in self.steps]

    def _new(self, name: str, shape: tuple, host, is_input: bool, dtype: str) -> CudaTensor:
        return CudaTensor(name, shape, host, self.guard, is_input, dtype)

    def _check_device(self, name: str, t: CudaTensor) -> None:
        if t.device != device()["id"]:
            raise ValueError(f"{name}: the device tensor lives on CUDA device {t.device}, the stage "
                             f"runs on device {device()['id']}")

    def _bind(self, step: Step, dev: dict) -> tuple:
        k = self.module.get_function(step.kernel)
        threads = int(np.prod(step.local_size))
        limit = min(k.max_threads_per_block, dev["max_threads_per_block"])
        if threads > limit:
            raise DeviceLimitError(f"stage {self.stage.key}: blocks of {threads} threads, but kernel {step.kernel} "
                                   f"allows at most {limit} on {dev['name']}; lower WG")
        self._check_grid(step, "block")
        if step.shared:
            if step.shared > dev["max_shared_per_block"]:
                raise DeviceLimitError(f"stage {self.stage.key}: {step.shared:,} bytes of shared memory per block, "
                                       f"but {dev['name']} allows {dev['max_shared_per_block']:,}; lower STAGES")
            k.max_dynamic_shared_size_bytes = step.shared    # beyond 48 KiB a kernel must opt in
        return k, step.global_size, step.local_size, self._values(step, tensor_map), step.shared

    def _rebind(self, names: set, t: CudaTensor) -> None:
        """A launch's arguments are a tuple of this plan's: rebuilt from the tensors now bound."""
        self._bound = [(k, g, l, self._values(step, tensor_map), sh)
                       for (k, g, l, _, sh), step in zip(self._bound, self.steps)]

    def enqueue(self) -> list:
        """Launch every kernel of the stage once (asynchronously)."""
        for k, g, l, args, shared in self._bound:
            launch(k, g, l, args, shared)
        return []

    def _launches(self) -> list:
        return [functools.partial(launch, k, g, l, args, shared) for k, g, l, args, shared in self._bound]

    def time(self, **kwargs) -> list:
        """Milliseconds per repetition, by CUDA events (time_launches); use time_plan, which
        checks the plan first."""
        return time_launches(self._launches(), **kwargs)

    def time_steps(self, **kwargs) -> list:
        """Milliseconds per repetition of each launch alone (a list per step); use
        engine/timing.py: time_steps, which checks the plan first."""
        return time_launches(self._launches(), each=True, **kwargs)
