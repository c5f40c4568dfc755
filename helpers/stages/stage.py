"""A registered stage: one kernel (or one chooser) of an operation, as data.

Each field is checked when the registry loads (helpers/stages/validate.py): a mistake in an
entry fails the import with the stage and the problem named, before anything runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Callable

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


@dataclass(frozen=True)
class Stage:
    op: str
    number: int                      # the chapter that teaches it (its place in the chapter for
                                     # ops taught in one chapter); the kernel file starts with it
    name: str
    kernel: str                      # file under kernels/, written out in full ("" for a chooser)
    title: str                       # one line: what this stage does
    family: ModuleType | None = None  # its launcher: a module of helpers/launch/ (the module itself)
    launch: str = ""                 # which launch of the family: a key of its LAUNCHES (its grid, steps)
    backend: str = "opencl"          # helpers/engine/backends/: "opencl" or "cuda"
    precision: str = "fp32"          # PRECISIONS; a reduced one is part of the stage's name
    defines: dict = field(default_factory=dict)   # default JIT parameters (-D options)
    tune: dict = field(default_factory=dict)      # define -> candidate values for the search
    # the family's functions, themselves (e.g. jit=direct.fast_3x3), None where the stage has none:
    jit: Callable | None = None      # (problem, defines) -> derived defines
    requires: Callable | None = None  # (problem, defines) -> None or the unmet need
    fallback: str | None = None      # stage name to run when ``requires`` fails; None: refuse
    generate: Callable | None = None  # (stage, defines) -> generated kernel text (stages 07-08)
    source: Callable | None = None   # never in the registry: a test's planted fault or a kernel
                                     # exercise sets (defines) -> the kernel text on a copy
                                     # (dataclasses.replace); it replaces the file and ``generate``
    fast: dict = field(default_factory=dict)  # the build defines that select the fast path (as the
                                     # kernel's #if reads them); empty: the stage has one path
    entry: str = ""                  # kernel function name of a one-kernel stage (default: the op)
    choose: bool = False             # stage auto: the running layer times the other stages and
                                     # runs the fastest within the workspace budget (helpers/chooser.py)
    epilogue: bool = False           # conv_forward: adds the bias and applies the activation
                                     # (helpers/ops/conv_forward.py: stage_requires)
    any_shape: bool = False          # conv ops: runs every shape of helpers/ops/shape.py (groups,
                                     # dilation, a stride per axis, a padding per side, 1-4 spatial
                                     # axes); the others run plain 2-D ones (ops/problem.py: shape_requires)
    arch: str = ""                   # CUDA: the one GPU architecture the kernel is built for
                                     # (sm_90a: Hopper's wgmma); empty: the device's own
    variants: tuple = ()             # define sets the tests also run over the grid (with guards),
                                     # beside the defaults: a switch's other setting, parameters
                                     # that change the code's shape (tests/test_stages.py)
    ptx: tuple = ()                  # a tensor-core stage: instructions its PTX must hold, the
                                     # fast path that must not silently vanish (tests/test_cuda.py)
    branches: tuple = ()             # fast paths the kernel decides for itself, per work-item: the
                                     # bool each is taken by (``const bool inside = ...;``); the
                                     # tests probe that each is taken on the grid (tests/test_stages.py)

    @property
    def tensor_cores(self) -> bool:
        """A CUDA stage in a reduced precision runs its products on tensor cores (chapter 13)."""
        return self.backend == "cuda" and self.precision != "fp32"

    @property
    def family_name(self) -> str:
        """The launcher module's name in helpers/launch/ ("direct"), "" for a choosing stage."""
        return self.family.__name__.rsplit(".", 1)[-1] if self.family is not None else ""

    @property
    def key(self) -> str:
        return f"{self.number:02d}_{self.name}"
