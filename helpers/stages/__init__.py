"""The one registry of stages: for each operation, its kernels in course order. Data only.

Notebooks, tests, the benchmark and the plots all read REGISTRY; nothing else lists stages.
Each operation's stages are declared in one module here (conv_dgrad.py, conv_forward.py,
conv_wgrad.py, batchnorm.py for both batch-norm operations, gemm.py, conv3d_dgrad.py), each
entry a ``Stage`` (stage.py) written out in full: its kernel file, backend and precision, the
kernel family that launches it (its module in helpers/launch/, the module itself), default JIT
parameters and tune candidates, and the family's functions themselves that derive defines
(``jit``), say what a problem needs (``requires``) and generate source (``generate``): "go to
definition" on an entry reaches its launcher, and its ``kernel`` names the file. When ``requires`` fails, ``fallback`` names the
stage run instead; None: run_stage refuses with an error naming the need. ``fast`` names the
build defines that select a stage's fast path, so every run reports the path it took.
Parameter sets several operations share are in params.py.

The registry is checked when it loads (validate.py): a wrong entry fails the import with the
stage and the problem named. The operations (OPS) are its keys, each with its module in
helpers/ops/ (ops.OPERATIONS); the backends are helpers/engine/backends/' PLANS, the launches
each family's LAUNCHES.

A stage's number is the chapter that teaches it (conv_dgrad) or its place in the chapter. A
number that names several stages (conv_dgrad's chapter 13: all of its tensor-core stages) is answered with the
choices: ask by name or key.
"""
from __future__ import annotations

from ..engine.backends import BACKENDS
from ..launch import local
from . import batchnorm, conv3d_dgrad, conv_dgrad, conv_forward, conv_wgrad, gemm
from .params import TILES  # noqa: F401 (chapter 11 shows the course GEMM's tiles)
from .stage import PRECISIONS, Stage  # noqa: F401
from .validate import RegistryError, validate  # noqa: F401

REGISTRY: dict[str, list[Stage]] = {
    "conv_dgrad": conv_dgrad.STAGES,
    "conv_wgrad": conv_wgrad.STAGES,
    "conv_forward": conv_forward.STAGES,
    "batchnorm_forward": batchnorm.FORWARD,
    "batchnorm_backward": batchnorm.BACKWARD,
    "gemm": gemm.STAGES,
    "conv3d_dgrad": conv3d_dgrad.STAGES,
}
validate(REGISTRY)
OPS = tuple(REGISTRY)


def stages_of(op: str) -> list[Stage]:
    """An operation's stages in course order (ValueError naming the operations for another)."""
    if op not in REGISTRY:
        raise ValueError(f"unknown op {op!r}; the course has {', '.join(sorted(REGISTRY))}")
    return REGISTRY[op]


def stage_names(op: str, backend: str | None = "opencl", upto: int | None = None) -> list[str]:
    """Names of an operation's stages in course order: its OpenCL stages (what runs on any
    device), those of another backend ("cuda"), or all (backend=None); ``upto``: only the stages
    of chapters up to that number (what a chapter has met so far)."""
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; the backends are {', '.join(BACKENDS)}")
    return [s.name for s in stages_of(op) if (backend is None or s.backend == backend)
            and (upto is None or s.number <= upto)]


def get_stage(op: str, stage) -> Stage:
    """A stage by name, by key ('02_naive') or by number. A number picks the one OpenCL stage of
    that chapter (a chapter with no OpenCL stage: its one stage); where it names several, the
    error lists them. Twins in other backends are reached by name ('naive_cuda'). A Stage itself
    (a ``dataclasses.replace``d copy: a kernel exercise, a planted fault) is returned as it is."""
    if isinstance(stage, Stage):
        if stage.op != op:
            raise ValueError(f"stage {stage.key} belongs to {stage.op}, not to {op}")
        return stage
    stages = stages_of(op)
    for s in stages:
        if stage in (s.name, s.key):
            return s
    if isinstance(stage, int) and not isinstance(stage, bool):
        numbered = [s for s in stages if s.number == stage]
        choices = [s for s in numbered if s.backend == "opencl"] or numbered
        if len(choices) == 1:
            return choices[0]
        if choices:
            raise ValueError(f"{op} stage {stage} names {len(choices)} stages: "
                             f"{', '.join(s.key for s in choices)}; ask for one by name or key")
    listing = ", ".join(f"{s.number} {s.name}" for s in stages)
    raise ValueError(f"{op} has no stage {stage!r}; its stages are: {listing}")


def twin_of(s: Stage) -> Stage | None:
    """The OpenCL stage a CUDA twin repeats (its name without '_cuda': '10_hoisted_cuda' ->
    '10_hoisted', the same algorithm, tile and layout), or None for a stage that is no twin."""
    if s.backend != "cuda" or not s.name.endswith("_cuda"):
        return None
    return get_stage(s.op, s.name.removesuffix("_cuda"))


# chapters 09-10's stages that have a CUDA twin (timed and counted side by side in chapter 10)
LOCAL_TWINNED = tuple(t.name for t in map(twin_of, REGISTRY["conv_dgrad"]) if t is not None and t.family is local)
