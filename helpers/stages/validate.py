"""The registry's checks, run when it loads: every entry against its operation, kernel file,
kernel family, backend and its own fields, so that a mistake fails the import with one line
naming the stage and the problem, not a run that reaches the entry later.

    validate({"conv_dgrad": [Stage(...), ...], ...})     # raises RegistryError

tests/test_registry.py plants each kind of mistake in a copy of the registry and expects it here.
"""
from __future__ import annotations

import re
from contextlib import contextmanager

from ..engine.backends import BACKENDS, KERNEL_FILES
from ..engine.kernels import KERNELS
from ..launch import FAMILY, is_family
from ..ops import op_module
from .stage import PRECISIONS, Stage

DEFINE = re.compile(r"^[A-Z][A-Z0-9_]*$")
NAME = re.compile(r"^[a-z][a-z0-9_]*$")
ARCH = re.compile(r"^sm_\d+a?$")
HOOKS = ("jit", "requires", "generate")     # the family functions an entry may hold


class RegistryError(ValueError):
    """An entry of the registry is wrong (the message names the stage and what is wrong)."""


def validate(registry: dict) -> None:
    """Check every entry of ``registry`` (op -> [Stage, ...]); raise RegistryError at the first
    mistake found."""
    for op, stages in registry.items():
        check_op(op, stages)
        for s in stages:
            with naming(op, s):
                if not isinstance(s, Stage):
                    raise RegistryError("not a Stage")
                if s.op != op:
                    raise RegistryError(f"its op is {s.op!r}, but it is listed under {op!r}")
                check_stage(s)
        for what in ("name", "key"):
            seen = set()
            for s in stages:
                value = getattr(s, what)
                if value in seen:
                    with naming(op, s):
                        raise RegistryError(f"a second stage of {op} with the {what} {value!r}")
                seen.add(value)
        by_name = {s.name: s for s in stages}
        for s in stages:
            with naming(op, s):
                check_fallback(s, by_name)
                check_twin(s, by_name)


@contextmanager
def naming(op: str, s):
    """Put the entry's name (and key, once its number is known good) before a RegistryError."""
    try:
        yield
    except RegistryError as err:
        name = getattr(s, "name", s)
        number = getattr(s, "number", None)
        key = f" (stage {number:02d}_{name})" if is_int(number) else ""
        raise RegistryError(f"registry entry {op}/{name!r}{key}: {err}") from None


def check_op(op: str, stages) -> None:
    try:
        module = op_module(op)
    except ValueError as err:
        raise RegistryError(f"registry op {op!r}: {err}") from None
    missing = [f for f in ("prepare", "reference", "rtol") if not callable(getattr(module, f, None))]
    if missing:
        raise RegistryError(f"registry op {op!r}: helpers/ops/{op}.py defines no {', '.join(missing)}")
    if not (isinstance(getattr(module, "NAME", None), str) and module.NAME):
        raise RegistryError(f"registry op {op!r}: helpers/ops/{op}.py gives it no NAME (what tables call it)")
    if not stages:
        raise RegistryError(f"registry op {op!r}: no stages")


def check_stage(s: Stage) -> None:
    if not isinstance(s.number, int) or isinstance(s.number, bool) or not 0 <= s.number <= 99:
        raise RegistryError(f"number {s.number!r} is not a chapter number (an integer 0-99)")
    if not isinstance(s.name, str) or not NAME.match(s.name):
        raise RegistryError(f"name {s.name!r} is not lower_case_with_underscores")
    if not isinstance(s.title, str) or not s.title.strip():
        raise RegistryError("no title (one line: what the stage does)")
    if s.backend not in BACKENDS:
        raise RegistryError(f"backend {s.backend!r} is none of {', '.join(BACKENDS)}")
    if s.precision not in PRECISIONS:
        raise RegistryError(f"precision {s.precision!r} is none of {', '.join(PRECISIONS)}")
    if s.precision != "fp32" and s.precision not in s.name:
        raise RegistryError(f"a {s.precision} stage has its precision in its name")
    check_defines(s)
    if s.choose:
        stray = [f for f in ("kernel", "family", "launch", "fallback", "source", *HOOKS) if getattr(s, f)]
        if stray or s.defines or s.tune:
            raise RegistryError(f"a choosing stage runs no kernel of its own, but sets "
                                f"{', '.join(stray + ['defines'] * bool(s.defines) + ['tune'] * bool(s.tune))}")
        return
    check_kernel(s)
    check_family(s)
    if s.arch and (s.backend != "cuda" or not ARCH.match(s.arch)):
        raise RegistryError(f"arch {s.arch!r}: a CUDA architecture such as sm_90a, for CUDA stages only")
    if s.entry and not s.entry.isidentifier():
        raise RegistryError(f"entry {s.entry!r} is not a kernel function name")
    if s.epilogue and not hasattr(op_module(s.op), "has_epilogue"):
        raise RegistryError(f"epilogue=True, but {s.op} has no fused epilogue (helpers/ops/{s.op}.py: has_epilogue)")
    if s.any_shape and not hasattr(op_module(s.op), "stage_requires"):
        raise RegistryError(f"any_shape=True, but {s.op} takes no shape beyond its own (helpers/ops/{s.op}.py: "
                            f"stage_requires)")
    if not isinstance(s.ptx, tuple) or not all(isinstance(i, str) and i for i in s.ptx):
        raise RegistryError(f"ptx {s.ptx!r} is not a tuple of instruction strings")
    if s.tensor_cores and not s.ptx:
        raise RegistryError("a tensor-core stage declares the instructions its PTX must hold (ptx=...)")
    if s.ptx and s.backend != "cuda":
        raise RegistryError("ptx=... is for CUDA stages (their PTX is compiled by the tests)")
    if not isinstance(s.branches, tuple):
        raise RegistryError(f"branches {s.branches!r} is not a tuple of bool names")
    text = (KERNELS / s.kernel).read_text() if s.branches else ""
    for name in s.branches:
        if not (isinstance(name, str) and re.search(rf"\bbool\s+{re.escape(name)}\s*=", text)):
            raise RegistryError(f"branches: kernels/{s.kernel} declares no bool {name!r} (const bool {name} = ...;)")


def check_defines(s: Stage) -> None:
    for what, table in (("defines", s.defines), ("fast", s.fast)):
        if not isinstance(table, dict):
            raise RegistryError(f"{what} {table!r} is not a dict")
        for name, value in table.items():
            if not isinstance(name, str) or not DEFINE.match(name):
                raise RegistryError(f"{what}: {name!r} is not a JIT parameter name (UPPER_CASE)")
            if not is_int(value) or value < 0:
                raise RegistryError(f"{what}: {name}={value!r} is not an integer >= 0")
    if not isinstance(s.tune, dict):
        raise RegistryError(f"tune {s.tune!r} is not a dict")
    for name, values in s.tune.items():
        if name not in s.defines:
            raise RegistryError(f"tune: {name} is not one of its defines ({', '.join(s.defines) or 'none'}): "
                                f"a searched parameter needs a default")
        if not isinstance(values, list) or not values or not all(is_int(v) for v in values):
            raise RegistryError(f"tune: {name}={values!r} is not a non-empty list of integers")
        if len(set(values)) != len(values):
            raise RegistryError(f"tune: {name}={values} lists a candidate twice")
        switch = set(values) <= {0, 1} and s.defines[name] in (0, 1)
        if not switch and min(values) < 1:
            raise RegistryError(f"tune: {name}={values}: candidates are >= 1, or 0 and 1 for a switch "
                                f"(whose default is 0 or 1)")
    if not isinstance(s.variants, tuple):
        raise RegistryError(f"variants {s.variants!r} is not a tuple of define sets")
    for v in s.variants:
        if not isinstance(v, dict) or not v:
            raise RegistryError(f"variants: {v!r} is not a non-empty dict of defines")
        unknown = set(v) - set(s.defines)
        if unknown:
            raise RegistryError(f"variants: {v} sets {', '.join(sorted(unknown))}, not one of its defines")
        if not all(is_int(x) and x >= 0 for x in v.values()):
            raise RegistryError(f"variants: {v} holds a value that is not an integer >= 0")
        if all(s.defines[k] == x for k, x in v.items()):
            raise RegistryError(f"variants: {v} is its defaults (the grid runs those anyway)")


def check_kernel(s: Stage) -> None:
    want = KERNEL_FILES[s.backend]
    if not isinstance(s.kernel, str) or not s.kernel.endswith(want):
        raise RegistryError(f"kernel {s.kernel!r}: a {s.backend} stage builds a {want} file")
    if not (KERNELS / s.kernel).is_file():
        raise RegistryError(f"kernel file kernels/{s.kernel} does not exist")
    if not s.kernel.rsplit("/", 1)[-1].startswith(f"{s.number:02d}_"):
        raise RegistryError(f"kernel file {s.kernel} does not start with its number {s.number:02d}_")


def check_family(s: Stage) -> None:
    if not is_family(s.family):
        raise RegistryError(f"family {getattr(s.family, '__name__', s.family)!r} is not a launcher module of "
                            f"helpers/launch/ (a module with {', '.join(FAMILY)}: the module itself, e.g. family=direct)")
    path = f"helpers/launch/{s.family_name}.py"
    if s.launch not in s.family.LAUNCHES:
        raise RegistryError(f"launch {s.launch!r} is none of the {s.family_name} family's: "
                            f"{', '.join(s.family.LAUNCHES)}")
    for hook in HOOKS:
        fn = getattr(s, hook)
        if fn is None:
            continue
        if not callable(fn):
            raise RegistryError(f"{hook}={fn!r} is not a function: an entry holds a function of {path} "
                                f"itself (e.g. {hook}={s.family_name}.<function>)")
        if not any(v is fn for v in vars(s.family).values()):
            raise RegistryError(f"{hook}={getattr(fn, '__qualname__', fn)!r} is not a function of {path}")
    if s.source is not None:
        raise RegistryError("source= is set only on a copy (a planted fault, a kernel exercise), never in the registry")


def check_fallback(s: Stage, by_name: dict) -> None:
    if s.fallback is None:
        return
    target = by_name.get(s.fallback)
    if target is None:
        raise RegistryError(f"fallback {s.fallback!r} is no stage of {s.op}")
    if not s.requires:
        raise RegistryError(f"fallback {s.fallback!r} without requires=: nothing would ever send a problem there")
    if target.choose or target.backend != s.backend:
        raise RegistryError(f"fallback {s.fallback!r} runs on {target.backend if not target.choose else 'no kernel'}; "
                            f"a {s.backend} stage falls back to a {s.backend} stage")
    seen = [s.name]
    while target is not None:
        if target.name in seen:
            raise RegistryError(f"fallback cycle: {' -> '.join(seen + [target.name])}")
        seen.append(target.name)
        target = by_name.get(target.fallback) if target.fallback else None


def check_twin(s: Stage, by_name: dict) -> None:
    """A CUDA stage is chapter 13's (tensor cores) or the twin of an OpenCL stage, named
    <name>_cuda: the same number, family, launch, defines and tune lists, the same file name."""
    if s.backend != "cuda" or s.tensor_cores:
        return
    twin = by_name.get(s.name.removesuffix("_cuda")) if s.name.endswith("_cuda") else None
    if twin is None or twin.backend != "opencl":
        raise RegistryError("a CUDA stage on fp32 is the twin of an OpenCL stage, named <name>_cuda "
                            "after it (or a tensor-core stage in tf32, fp16 or bf16)")
    for f in ("number", "family", "launch", "defines", "tune"):
        if getattr(s, f) != getattr(twin, f):
            shown = (lambda t: t.family_name) if f == "family" else (lambda t: getattr(t, f))
            raise RegistryError(f"its {f} {shown(s)!r} differs from its OpenCL stage "
                                f"{twin.key}'s {shown(twin)!r}")
    if s.kernel.rsplit(".", 1)[0] != twin.kernel.rsplit(".", 1)[0]:
        raise RegistryError(f"kernel {s.kernel} is not {twin.kernel}'s file name with .cu")


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
