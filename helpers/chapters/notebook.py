"""What every chapter's first cell calls, and how chapters show kernel sources.

    from helpers.chapters.notebook import start, show_source, show_diff
    nb = start()          # picks the device, prints it, says whether sizes are small or full
    nb.layers             # layer set to time: 'small' on a CPU by default, 'resnet50' with COURSE_SIZE=full

One switch selects full sizes: the environment variable COURSE_SIZE=full (for a GPU).

The student edition's notebooks call ``start(edition="student")`` (helpers/tools/editions.py
writes it so): from then on every listing and diff (``Source``) shows the kernel exercises' answer
lines as one marker line each (helpers/chapters/answers.py), so a listing above an exercise never
gives its answer away. A chapter author writes nothing per listing for this.
"""
from __future__ import annotations

import difflib
import functools
import os
import re
from dataclasses import dataclass

from ..engine.kernels import kernel_source
from ..engine.devices import device_info, get_context, short_name
from ..stages import get_stage
from . import listing
from .kernel_exercises import secret_lines
from .listing import EDITION, _highlight  # noqa: F401 (EDITION: set by start(); _highlight: the editions writer's)


@dataclass
class Session:
    ctx: object
    full: bool
    device: str

    @property
    def layers(self) -> str:
        return "resnet50" if self.full else "small"

    @property
    def repeats(self) -> int:
        return 20 if self.full else 5


SIZES = ("small", "full")


def full_size() -> bool:
    """COURSE_SIZE: 'small' (the default: CPU-friendly sizes) or 'full' (the full layer sets, for a GPU)."""
    size = os.environ.get("COURSE_SIZE", "small").strip().lower() or "small"
    if size not in SIZES:
        raise ValueError(f"COURSE_SIZE={os.environ['COURSE_SIZE']!r}: the sizes are 'small' (the default, for a "
                         f"CPU) and 'full' (the full layer sets, for a GPU); set one of them or unset it")
    return size == "full"


def start(device=None, edition: str = "teacher") -> Session:
    """Choose the device (argument, COURSE_DEVICE, PYOPENCL_CTX, else a GPU, else the CPU) and say
    which machine the outputs below come from; ``edition="student"`` hides answers in listings."""
    import datetime

    import matplotlib
    if edition not in ("teacher", "student"):
        raise ValueError(f"edition must be 'teacher' or 'student', not {edition!r}")
    EDITION["name"] = edition
    matplotlib.rcParams.update({"figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3})
    full = full_size()
    ctx = get_context(device)
    info = device_info(ctx)
    print(f"Device: {info['name']} ({info['platform']}, {info['type']}, driver {info['driver']}, "
          f"{info['compute_units']} compute units)")
    print(f"The outputs below are this run's, on this device, {datetime.date.today().isoformat()}; "
          f"the recorded GPU runs name their own device.")
    print(f"Sizes: {'full (COURSE_SIZE=full)' if full else 'small (set COURSE_SIZE=full on a GPU for full sizes)'}")
    if edition == "student":
        print("Student edition: listings hide the kernel exercises' answers.")
    return Session(ctx, full, short_name(ctx))


class Source(listing.Source):
    """A listing whose student-edition view hides every kernel exercise's answer (what chapters
    show: show_source, show_diff, generated code)."""

    def __init__(self, text: str, language: str = "c"):
        super().__init__(text, language, secret_lines())


def _path(op_or_path: str, stage=None) -> str:
    return get_stage(op_or_path, stage).kernel if stage is not None else op_or_path


def show_source(op_or_path: str, stage=None, *, function=None, lines: tuple | None = None,
                switches: dict | None = None, hide: dict | None = None, inline: tuple = ()) -> Source:
    """A stage's kernel file (or any file under kernels/), highlighted (CUDA for .cu files).

    A chapter shows what its text explains, not always the whole file: ``function`` (a name or a
    tuple of names) keeps only those functions, kernels and macros, each with the comment lines
    right above it, in the file's order; ``lines=(first, last)`` keeps those lines (1-based, both
    included); ``switches`` resolves those -D switches' `#if` blocks in what is shown (as
    ``show_diff`` does); ``hide`` masks lines (``hidden``); ``inline``: headers of kernels/common whose
    code replaces their `#include` line (as ``show_diff``'s: a stage whose kernel is one text with its
    CUDA twin, 03_memoized_bounds, reads as the OpenCL C it teaches). A shortened listing opens with a
    comment line that names the whole file, its length and what was kept, so the reader knows where
    the rest lives."""
    path = _path(op_or_path, stage)
    full = listing.inlined(kernel_source(path), inline, opencl=path.endswith(".cl"))
    text, note = full, ""
    if function is not None or lines is not None:
        text, what = _excerpt(text, f"kernels/{path}", function, lines)
        note = f"// excerpt of kernels/{path} ({len(full.splitlines())} lines): {what}"
    if switches:
        text = resolve_switches(text, switches)
        if note:
            note += " with " + ", ".join(f"{k}={v}" for k, v in switches.items())
    return Source(hidden(note + "\n" + text if note else text, hide), "cuda" if path.endswith(".cu") else "c")


HIDDEN = "/* ... hidden: {names} ... */"


def hidden(text: str, hide: dict | None) -> str:
    """``text`` with each line that holds a key of ``hide`` (white space ignored) replaced by a
    marker that names the key's value, in both editions: a listing or diff that shows a line an
    exercise asks for, of this chapter or a later one, which no gap of the kernel names (13b's box
    row, a bounds test that chapter 12 asks for). ``{"+ (ph + PAD - r) / S": "the box's row (exercise
    1)"}``; runs of masked lines become one marker."""
    from .answers import hide as hide_lines
    if not hide:
        return text
    masked = hide_lines(text, {re.sub(r"\s+", "", key): why for key, why in hide.items()}, HIDDEN)
    missing = [key for key in hide if re.sub(r"\s+", "", key) not in re.sub(r"\s+", "", text)]
    if missing:
        raise ValueError(f"hide: no line holds {missing} (the kernel changed: update the call)")
    return masked


def _span(lines: list[str], name: str) -> tuple[int, int]:
    """0-based (first, last) lines of the function, kernel or macro ``name``: from its definition
    (a line at column 0 that names it and is no directive or comment, with the `__kernel` or
    attribute lines before it) to its closing brace, or a `#define` with its continuation lines;
    the comment lines right above it included."""
    define = re.compile(rf"^#\s*define\s+{re.escape(name)}\b")
    head = re.compile(rf"^(?![\s#/]).*\b{re.escape(name)}\s*\(")
    for i, ln in enumerate(lines):
        if define.match(ln):
            end = i
            while lines[end].rstrip().endswith("\\") and end + 1 < len(lines):
                end += 1
            break
        if head.match(ln):
            depth, opened = 0, False
            for end in range(i, len(lines)):
                code = lines[end].split("//", 1)[0]
                depth += code.count("{") - code.count("}")
                opened = opened or "{" in code
                if opened and depth <= 0:
                    break
            while i > 0 and re.match(r"^(__kernel|__attribute__|__global__|template)\b", lines[i - 1]):
                i -= 1
            break
    else:
        raise ValueError(f"no function, kernel or macro named {name!r}")
    while i > 0 and lines[i - 1].lstrip().startswith("//"):
        i -= 1
    return i, end


def _excerpt(text: str, where: str, function, lines) -> tuple[str, str]:
    """The lines of a kernel file that show_source keeps, and a few words that say which."""
    all_lines = text.splitlines()
    n = len(all_lines)
    if function is not None and lines is not None:
        raise ValueError("show_source: give function= or lines=, not both")
    if lines is not None:
        first, last = lines
        if not 1 <= first <= last <= n:
            raise ValueError(f"{where} has {n} lines: lines=(first, last) needs 1 <= first <= last <= {n}, "
                             f"not {tuple(lines)!r}")
        return "\n".join(all_lines[first - 1:last]) + "\n", f"lines {first}-{last}"
    names = (function,) if isinstance(function, str) else tuple(function)
    try:
        spans = sorted(_span(all_lines, name) for name in names)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    merged = [list(spans[0])]
    for a, b in spans[1:]:                         # touching or overlapping parts: one block
        if a <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return "\n\n".join("\n".join(all_lines[a:b + 1]) for a, b in merged) + "\n", ", ".join(names)


def show_diff(op: str, old, new, switches: dict | None = None, new_switches: dict | None = None,
              inline: tuple = (), hide: dict | None = None) -> Source:
    """The unified diff between two stages' kernel files: the lesson of a chapter.

    Where a stage's diff holds several ideas, its switches (`#if NAME` blocks of a -D parameter)
    let the chapter show them one at a time: ``switches`` fixes those parameters in both files
    (their `#if` blocks resolved, their `#ifndef` defaults dropped); ``new_switches`` sets them
    differently in the new file. ``show_diff(op, s, s, {"PREFETCH": 0}, {"PREFETCH": 1})`` is
    what PREFETCH=1 changes in stage s. ``inline``: headers of kernels/common whose code replaces
    their `#include` line in both files, where one stage keeps in a shared header what the other
    writes out (11_igemm_phases' kernel is in phase_gemm.h, 11_igemm_delta's in its own file); in an
    OpenCL file, a header's words that course.h spells for both languages (dgrad_slab.h's) are
    shown in OpenCL C, as the stage before it writes them. ``hide``: lines masked in both editions
    (``hidden``)."""
    a, b = _path(op, old), _path(op, new)
    before, after = (listing.inlined(kernel_source(x), inline, opencl=x.endswith(".cl")) for x in (a, b))
    if switches or new_switches:
        fixed = {**(switches or {}), **(new_switches or {})}
        before, after = resolve_switches(before, switches or {}), resolve_switches(after, fixed)
        a += "".join(f" {k}={v}" for k, v in (switches or {}).items())
        b += "".join(f" {k}={v}" for k, v in fixed.items())
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), fromfile=a, tofile=b, lineterm="", n=2)
    return Source(hidden("\n".join(lines), hide), "diff")


_IF = re.compile(r"^#\s*if\s+(!?)\s*(\w+)\s*$")
_IFDEF = re.compile(r"^#\s*(ifn?def|if)\b")


def resolve_switches(text: str, switches: dict) -> str:
    """Kernel text with the `#if NAME` / `#if !NAME` blocks of the given switches resolved and
    their `#ifndef NAME` / `#define NAME` / `#endif` defaults dropped; other directives kept."""
    out, stack, lines, i = [], [], text.splitlines(), 0
    while i < len(lines):
        ln = lines[i]
        m = re.match(r"^#\s*ifndef\s+(\w+)\s*$", ln)
        if m and m.group(1) in switches and i + 2 < len(lines) and lines[i + 2].strip() == "#endif":
            i += 3
            continue
        m = _IF.match(ln)
        if m and m.group(2) in switches:
            stack.append(["mine", bool(switches[m.group(2)]) != bool(m.group(1))])
        elif _IFDEF.match(ln):
            stack.append(["other", True])
            if all(keep for _, keep in stack):
                out.append(ln)
        elif re.match(r"^#\s*else\b", ln) and stack and stack[-1][0] == "mine":
            stack[-1][1] = not stack[-1][1]
        elif re.match(r"^#\s*endif\b", ln) and stack:
            kind, _ = stack.pop()
            if kind == "other" and all(keep for _, keep in stack):
                out.append(ln)
        elif all(keep for _, keep in stack):
            out.append(ln)
        i += 1
    return "\n".join(out) + "\n"


def step_times(plan, repeats: int = 10, warmup: int = 2) -> dict:
    """Median and interquartile range (ms) of each kernel of a multi-kernel stage, from its own
    events (OpenCL profiling events, or CUDA events around each launch): which of a stage's
    kernels a change sped up. The plan is checked against the reference first (the one checker,
    as before every timing), and the last-level cache is flushed before each repetition, as the
    engine's timings do (a kernel that profits from what the one before it left in the cache,
    REVERSE's lesson, still does). Keys: kernel names, with " (2)", " (3)" ... where a stage
    launches one kernel more than once."""
    from ..engine.timing import time_steps
    per = time_steps(plan, warmup=warmup, repeats=max(3, repeats))
    names = [name for name, _ in per]
    keys = [n if names[:i].count(n) == 0 else f"{n} ({names[:i].count(n) + 1})" for i, n in enumerate(names)]
    return {key: {"median_ms": t.median_ms, "q1_ms": t.q1_ms, "q3_ms": t.q3_ms} for key, (_, t) in zip(keys, per)}


def switch_times(op: str, stage, name: str, ctx, values=(0, 1), repeats: int = 10, **args) -> dict:
    """One switch of a stage (a -D parameter such as REVERSE), each setting checked against the
    reference and timed kernel by kernel on the same problem (step_times):
    {value: {kernel: {"median_ms", "q1_ms", "q3_ms"}}}. The lesson of a switch, measured alone."""
    from ..runner import plan_stage
    return {v: step_times(plan_stage(op, stage, ctx=ctx, defines={name: v}, **args), repeats=repeats)
            for v in values}


def times_line(times: dict) -> str:
    """step_times' result on one line: each kernel's median and interquartile range."""
    return ", ".join(f"{k} median {v['median_ms']:.3f} ms (IQR {v['q1_ms']:.3f}-{v['q3_ms']:.3f})"
                     for k, v in times.items())


__all__ = ["Session", "Source", "show_diff", "show_source", "start", "step_times", "switch_times", "times_line",
           "get_context"]
