"""Device tensors: dtype, shape, layout, optional guard zones; one interface on both backends.

    t = DeviceTensor.from_array(ctx, x, dtype="float16")    # OpenCL (backends/opencl.py): one upload
    t = CudaTensor.from_array(x, dtype="float16")           # CUDA (backends/cuda.py): the same
    first = plan_stage(op, stage, ctx=ctx, grad_output=t, ...)
    second = plan_stage(op2, stage2, ctx=ctx, x=first.tensor("grad_input"), ...)   # no copy

A device tensor stays on the device between launches: a Plan holds one per tensor, hands it out
(``plan.tensor(name)``) and takes one wherever an array is accepted, so stages chain without a
host round trip; a stage takes tensors of its own backend only. Every host transfer of a tensor
(the upload when it is made, ``write``, ``read``, the guard check) goes through one method that
counts it in TRANSFERS (what the chaining tests read). ``Tensor`` holds all of this once; each
backend's class says only how it allocates and copies.

dtypes: float32; float16 (OpenCL's ``half``: stored in 16 bits, read and written with
vload_half / vstore_half, which every device has without cl_khr_fp16; arithmetic stays float);
bfloat16 (NumPy has none: stored as 16-bit words, the upper half of a float32, converted here
with round-to-nearest-even; a kernel reads one with a 16-bit shift). ``layout`` is a field:
"NCHW", "NHWC" or an interleaved layout such as "NC/32HW32" (channels in blocks of 32, the
block innermost; storage rounds C up to the block), checked where a stage needs a layout.
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np

CANARY = np.uint32(0xDEADBEEF)   # a float32 no kernel computes by chance (-6.26e18)
GUARD_BYTES = 4096
# name -> (NumPy storage dtype, canary bit pattern of an output's guard zones)
DTYPES = {"float32": (np.dtype(np.float32), CANARY),
          "float16": (np.dtype(np.float16), np.uint16(0xDEAD)),     # -427.25 as a half
          "bfloat16": (np.dtype(np.uint16), np.uint16(0xDEAD))}     # -6.2e18 as a bfloat16
# a registered stage's precision -> the dtype its tensors are stored in (tf32 stores float32)
STORAGE = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}
LAYOUTS = ("NCHW", "NHWC")
INTERLEAVED = re.compile(r"^NC/(\d+)HW(\d+)$")   # "NC/32HW32": C in blocks of 32, innermost
TRANSFERS = Counter()   # "upload" and "read": host <-> device copies made through a Tensor


def to_bfloat16(x) -> np.ndarray:
    """float32 -> bfloat16 bits (uint16), rounding to nearest, ties to even; NaN stays NaN."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, (bits >> np.uint32(16)) | np.uint32(0x40), rounded).astype(np.uint16)


def from_bfloat16(bits) -> np.ndarray:
    """bfloat16 bits (uint16) -> float32 (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_tf32(x) -> np.ndarray:
    """float32 rounded to TF32 (10 mantissa bits, kept in a float32), to nearest with ties away
    from zero: what a tensor-core stage's cvt.rna.tf32.f32 does to its operands (chapter 13)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    rounded = ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isfinite(x), rounded, x)


def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise ValueError(f"unknown tensor dtype {dtype!r}; the dtypes are {', '.join(DTYPES)}")
    return dtype


def check_layout(layout: str) -> str:
    if layout not in LAYOUTS and not INTERLEAVED.match(str(layout)):
        raise ValueError(f"unknown layout {layout!r}; use NCHW, NHWC or an interleaved layout "
                         f"such as 'NC/32HW32'")
    return layout


# float16's largest finite value; anything from 65520 up rounds to infinity when stored
HALF_MAX, HALF_OVERFLOW = 65504.0, 65520.0


def check_host(name: str, value, dtype: str | None = None, who: str = "") -> np.ndarray:
    """The one rule for a NumPy array that becomes a tensor (run_stage's arguments, from_array):
    a float32 or float16 array; stored as float16, no finite value beyond float16's range."""
    who = f"{who}: " if who else ""
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{who}{name} must be a NumPy array of float32 (or float16), got {type(value).__name__}; "
                        f"convert with np.asarray({name}, dtype=np.float32)")
    if value.dtype not in (np.float32, np.float16):
        raise TypeError(f"{who}{name} must be float32 (or float16), got {value.dtype}; "
                        f"convert with {name}.astype(np.float32)")
    if dtype == "float16" and value.dtype != np.float16 and value.size:
        finite = np.abs(value[np.isfinite(value)])
        if finite.size and finite.max() >= HALF_OVERFLOW:
            raise ValueError(f"{who}{name} holds values up to {finite.max():.4g}, beyond float16's largest finite "
                             f"value {HALF_MAX:g}: stored in float16 they would become infinite. Scale the data "
                             f"down or run a float32 stage")
    return value


def to_storage(x: np.ndarray, dtype: str) -> np.ndarray:
    """A host array in the bits a tensor of ``dtype`` stores."""
    return to_bfloat16(x) if dtype == "bfloat16" else np.ascontiguousarray(x, dtype=DTYPES[dtype][0])


def from_storage(bits: np.ndarray, dtype: str) -> np.ndarray:
    """What a tensor of ``dtype`` stores, as NumPy: float32, float16, or float32 for bfloat16."""
    return from_bfloat16(bits) if dtype == "bfloat16" else bits


def storage_count(shape: tuple, layout: str) -> int:
    """Elements a tensor stores: its shape's product, with C rounded up to an interleaved block."""
    m = INTERLEAVED.match(layout)
    if m and len(shape) >= 2:
        block = int(m.group(1))
        shape = (shape[0], -(-shape[1] // block) * block) + tuple(shape[2:])
    return int(np.prod(shape))


def default_dtype(array: np.ndarray) -> str:
    """The dtype a tensor made from ``array`` gets unless told: float16 for float16, else float32."""
    return "float16" if array.dtype == np.float16 else "float32"


class Tensor:
    """What a device tensor is on either backend (DeviceTensor in backends/opencl.py; CudaTensor in
    backends/cuda.py): dtype, shape, layout, optional guard zones (NaN around and, for outputs, in
    it; canaries around outputs), counted transfers. A backend supplies where the values live:
    ``_allocate(count)`` (a buffer of ``count`` stored elements), ``_view(parent, offset, count)``
    (the tensor's part of a guarded buffer) and ``_transfer(dest, src)`` (one copy between a
    device buffer and a host array, either way)."""
    backend = ""            # "opencl" or "cuda": the stages that can read it (Stage.backend)
    backend_label = ""      # the backend as messages name it ("OpenCL", "CUDA")

    def _lay_out(self, name: str, shape: tuple, host: np.ndarray | None, guard: bool, is_input: bool,
                 dtype: str, layout: str, align: int = 1) -> None:
        """Allocate (inside guard zones of at least ``align`` bytes when ``guard``) and upload."""
        self.name, self.shape, self.is_input, self.guard = name, tuple(int(d) for d in shape), is_input, guard
        self.dtype, self.layout = check_dtype(dtype), check_layout(layout)
        self.storage, canary = DTYPES[dtype]
        self.size = storage_count(self.shape, layout)
        self.nbytes = self.storage.itemsize * self.size
        nan = to_storage(np.float32(np.nan), dtype)
        if host is not None:
            check_host(name, host, dtype)
        body = (to_storage(host, dtype).ravel() if host is not None
                else np.full(self.size, nan, dtype=self.storage) if guard else None)
        if body is not None and body.size != self.size:
            raise ValueError(f"{name}: {body.size} values for a {layout} tensor of shape {self.shape}")
        if not guard:
            self.parent, self.pad = None, 0
            self.buffer = self._allocate(self.size)
            if body is not None:
                self._copy(self.buffer, body, "upload")
            return
        self.pad = max(GUARD_BYTES, align) // self.storage.itemsize     # elements in each guard zone
        whole = np.empty(self.size + 2 * self.pad, dtype=self.storage)
        fill = nan if is_input else canary.view(self.storage)
        whole[:self.pad] = fill
        whole[self.pad + self.size:] = fill
        whole[self.pad:self.pad + self.size] = body
        self.initial = whole
        # Allocate, then upload: NVIDIA's OpenCL driver was seen to keep a sub-buffer's out-of-range
        # writes out of a parent created with COPY_HOST_PTR, which would hide what guards look for.
        self.parent = self._allocate(whole.size)
        self._copy(self.parent, whole, "upload")
        self.buffer = self._view(self.parent, self.pad, self.size)

    def _copy(self, dest, src, kind: str) -> None:
        TRANSFERS[kind] += 1
        self._transfer(dest, src)

    def write(self, array: np.ndarray) -> None:
        """Overwrite the tensor's values from the host (one counted upload; same element count);
        with guards, an input's contents are then checked against these values."""
        body = to_storage(array, self.dtype).ravel()
        if body.size != self.size:
            raise ValueError(f"{self.name}: {body.size} values for a tensor of shape {self.shape}")
        self._copy(self.buffer, body, "upload")
        if self.parent is not None:
            self.initial[self.pad:self.pad + self.size] = body

    def read(self) -> np.ndarray:
        """The tensor's values on the host (after the work queued before): float32, or float16 for
        a float16 tensor; stored layout, logical shape for NCHW and NHWC."""
        out = np.empty(self.size, dtype=self.storage)
        self._copy(out, self.buffer, "read")
        out = from_storage(out, self.dtype)
        return out.reshape(self.shape) if self.size == int(np.prod(self.shape)) else out

    def check_guards(self) -> str | None:
        """None when the guard zones (and an input's contents) are as uploaded, else what changed."""
        if self.parent is None:
            return None
        whole = np.empty_like(self.initial)
        self._copy(whole, self.parent, "read")
        bits = np.dtype(f"u{self.storage.itemsize}")
        zones = [slice(0, self.pad), slice(self.pad + self.size, None)]
        if self.is_input:
            zones.append(slice(self.pad, self.pad + self.size))  # inputs are read-only
        for zone in zones:
            changed = np.flatnonzero(whole[zone].view(bits) != self.initial[zone].view(bits))
            if changed.size:
                where = "inside the input tensor" if zone.start == self.pad and zone.stop is not None else (
                    "before the tensor" if zone.start == 0 else "after the tensor")
                first = changed[0] + (zone.start or 0) - self.pad
                return (f"{self.name}: {changed.size} value(s) changed {where} "
                        f"(first at element offset {first})")
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.dtype}, {self.shape}, {self.layout})"
