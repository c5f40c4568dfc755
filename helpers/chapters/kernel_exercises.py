"""Kernel exercises: a stage's kernel with a marked gap that the learner fills with OpenCL C.

    from helpers.chapters.kernel_exercises import kernel_gap
    gap = kernel_gap("naive_checks")
    gap.show()                       # the kernel, with the gap marked
    gap.check(my_code, ctx=nb.ctx)   # splice the code in, run it through the one checker

The learner's code is spliced into the real kernel file in place of the gap's lines and run as a
temporary copy of the stage (``dataclasses.replace``, passed to plan_stage; the registry is not touched) over a few labelled shapes, with guard regions (NaN before and after
every input, canaries around every output). The verdict names the first shape that fails and
what went wrong (does not compile, reads outside a tensor, writes outside one, wrong values)
without printing the answer. In the student edition the teacher's code is replaced by nbgrader's
stub (``raise NotImplementedError()``); ``check`` then says the exercise is not answered yet.
"""
from __future__ import annotations

import dataclasses
import functools
import re

import numpy as np
import pyopencl as cl

from ..engine.build import KernelBuildError
from ..engine.kernels import kernel_source
from ..engine.child import ChildDied, in_child
from ..engine.devices import FAULT_HINT, fault_report, faulted, get_context, selector_of
from ..engine.check import MismatchError
from ..runner import GuardViolation, check_plan, plan_stage
from ..stages import get_stage
from . import kernel_lessons
from .answers import region_secrets
from .exercises.verdict import NOT_ANSWERED, _verdict
from .listing import Source


CHILD_TIMEOUT = 900   # seconds a check may take (full sizes on a CPU are slow; an endless loop is stopped)
NOT_ANSWERED_KERNEL = ("Not answered yet: replace the two stub lines inside the string with your OpenCL C "
                       "lines, then run this cell again.")


@dataclasses.dataclass(frozen=True)
class Gap:
    op: str
    stage: str
    first: str       # text of the gap's first line (unique in the kernel file)
    last: str        # text of the gap's last line (the first match after ``first``)
    task: str        # what the gap must do, one sentence
    cases: tuple     # (label, args function) pairs; each label names what the shape exercises
    hints: dict = dataclasses.field(default_factory=dict)  # label -> where to look when it fails
    before: object = None   # code -> (ok, message): a model's check before any launch (or None)
    after: object = None    # code -> (ok, message): a model's check once the kernel is right
    diagnose: object = None  # (args, outputs) -> the mistake the wrong values show, or "" (then the hint)
    lesson: object = None   # (gap, code, ctx) -> (ok, message): once the values are right, proof that
    #                         the code does what the chapter teaches (the vector path runs, the copy
    #                         is coalesced), from the learner's code or a probe of its kernel
    conceal: tuple = ()     # texts of kernel lines outside the gap that state its answer (a header
    #                         comment): shown as "// ..." by show(), hidden like the gap's lines
    spellings: tuple = ()   # the answer as other kernels write it (a later stage's copy of the gap's
    #                         lines, shown in a diff beside it): hidden wherever it stands, like them
    other_answer: bool = False  # the exercise asks for other lines than the kernel's own (chapter 10:
    #                         a layout other than its XOR), so the gap's lines are no answer and the
    #                         chapter's listings keep them; the answer is the notebook's solution
    summary: str = ""       # the cases in a few words, said by the verdict instead of every label
    #                         (a gap checked over a whole grid: chapter 16's)

    def _lines(self):
        src = kernel_source(get_stage(self.op, self.stage).kernel).splitlines()
        starts = [i for i, ln in enumerate(src) if self.first in ln]
        if len(starts) != 1:
            raise RuntimeError(f"gap start {self.first!r} found {len(starts)} times in the kernel")
        end = next(i for i in range(starts[0], len(src)) if self.last in src[i])
        return src, starts[0], end

    @property
    def name(self) -> str:
        """Its key in GAPS (how a child process finds it again)."""
        for n, g in GAPS.items():
            if g is self:
                return n
        raise ValueError("this gap is not one of GAPS (a variant made with dataclasses.replace?): a child "
                         "process cannot rebuild it; check it with isolated=False")

    def _concealed(self, line: str) -> bool:
        return any(text in line for text in self.conceal)

    def view(self) -> str:
        """The learner's view of the kernel: the gap's lines replaced by one marked line, the
        concealed lines by `// ...`."""
        src, a, b = self._lines()
        indent = src[a][: len(src[a]) - len(src[a].lstrip())]
        keep = [(ln[: len(ln) - len(ln.lstrip())] + "// ...") if self._concealed(ln) else ln for ln in src]
        return "\n".join(keep[:a] + [f"{indent}/* ====== the gap: {self.task} ====== */"] + keep[b + 1:])

    def show(self) -> Source:
        """The stage's kernel with the gap's lines replaced by a marked gap."""
        return Source(self.view(), secrets=secret_lines())

    def secrets(self) -> dict:
        """{line key: gap name} of what the gap hides (helpers/chapters/answers.py): its lines and
        the concealed ones, less those the learner's view shows anyway and the trivial ones."""
        src, a, b = self._lines()
        hidden = (([] if self.other_answer else src[a:b + 1]) + [ln for ln in src if self._concealed(ln)]
                  + list(self.spellings))
        return region_secrets(hidden, "c", self.name, self.view().splitlines())

    def source(self, code: str, probe: str = "") -> str:
        """The kernel with ``code`` in the gap (and a lesson's ``probe`` lines right after it)."""
        src, a, b = self._lines()
        return "\n".join(src[:a] + code.strip("\n").splitlines() + probe.splitlines() + src[b + 1:]) + "\n"

    def trial(self, text: str):
        """The stage as a temporary registry entry whose kernel is ``text`` (no fallback)."""
        return dataclasses.replace(get_stage(self.op, self.stage), source=lambda jit: text, fallback=None)

    def check(self, code: str, ctx=None, isolated: bool = True) -> bool:
        """Run the kernel with ``code`` in the gap over every case, guarded; print one verdict.

        ``isolated``: in a child process (helpers/engine/child.py) on ``ctx``'s device, so that a
        kernel that faults takes the child down, not the notebook: the verdict then says how it
        stopped. ``False`` runs it here, on ``ctx`` itself."""
        if "NotImplementedError" in code or "YOUR CODE HERE" in code:
            print(NOT_ANSWERED_KERNEL)
            return False
        if self.before is not None:
            ok, message = self.before(code)
            if not ok:
                return _verdict(False, "", message)
        ctx = get_context(ctx)
        if not isolated:
            return self._check_here(code, ctx)
        try:
            return in_child(_check_in_child, self.name, code, selector_of(ctx.devices[0]), timeout=CHILD_TIMEOUT)
        except ChildDied as err:
            why = ("a loop whose end your code moved, or a barrier that some work-items never reach" if err.timed_out
                   else "it used an address outside the memory it may use: most likely a local-memory index runs "
                        "past its tile, or an index past a tensor's end")
            return _verdict(False, "", f"the kernel {err.how}: {why}. The check ran it in a process of its own, "
                            f"so this notebook and its device are unaffected: fix the code and run the cell again.")

    def _check_here(self, code: str, ctx) -> bool:
        """``check``'s cases run in this process, on ``ctx``."""
        if faulted(ctx):
            return _verdict(False, "", f"an earlier check stopped with a fault on the device. {FAULT_HINT}")
        trial = self.trial(self.source(code))
        for label, make_args in self.cases:
            hint = self.hints.get(label, "")
            args = make_args()
            try:
                plan = plan_stage(self.op, trial, ctx=ctx, guard=True, **args)
                plan.enqueue()
                plan.queue.finish()
                got = plan.outputs()
                plan.check_guards()
                if any(np.isnan(v).any() for v in got.values()):
                    return _verdict(False, "", f"{label}: NaN in the result. The guard zones around "
                                    f"each input hold NaN, so your code read outside a tensor: an index "
                                    f"runs past an end, or a bounds check is missing or lets one position "
                                    f"too many through. {hint}")
                check_plan(plan)
            except KernelBuildError as err:
                text_, _, log = str(err).partition("Compiler log:")
                where = [ln for ln in text_.splitlines()[1:] if ln.strip()][:6]
                errors = [ln.strip() for ln in log.splitlines() if "error" in ln][:3]
                return _verdict(False, "", "your code does not compile:\n" + "\n".join(where + errors))
            except GuardViolation as err:
                return _verdict(False, "", f"{label}: your code wrote outside a tensor ({err}). {hint}")
            except MismatchError:
                why = self.diagnose(args, got) if self.diagnose is not None else ""
                return _verdict(False, "", f"{label}: the kernel runs, but its values differ from the "
                                f"reference. {why or hint}".rstrip())
            except cl.Error as err:   # raised by the launch, the wait or the read-back: the kernel faulted
                where = f"Most likely a local-memory index runs past its tile. {hint}".strip()
                return _verdict(False, "", f"{label}: the kernel {fault_report(ctx, err, where)}")
        done = (f"{len(self.cases)} shapes ({self.summary or '; '.join(lbl for lbl, _ in self.cases)}) match "
                f"the reference with every guard zone intact")
        if self.lesson is not None:
            ok, message = self.lesson(self, code, ctx)
            if not ok:
                return _verdict(False, "", f"{done}, but {message}")
            done += f"; {message}"
        if self.after is not None:
            ok, message = self.after(code)
            if not ok:
                return _verdict(False, "", f"{done}, but {message}")
            done += f"; {message}"
        return _verdict(True, done, "")


def _dgrad(*shape):
    def make():
        from ..ops.conv_dgrad import random_problem_args
        return random_problem_args(*shape, seed=len(shape))
    return make


def _fwd(*shape):
    def make():
        from ..ops.conv_forward import random_problem_args
        return random_problem_args(*shape, seed=3)
    return make


def _bn(*shape, offset=0.0, scale=1.0, momentum=None):
    def make():
        from ..ops.batchnorm_forward import random_args
        return random_args(*shape, offset=offset, scale=scale, momentum=momentum, seed=5)
    return make


def _bn_variance_mistake(args, got) -> str:
    """Which known slip the wrong inv_std matches, per channel, from the case's own x and eps."""
    x = args["x"].astype(np.float64)
    count = x.size // x.shape[1]
    m2 = ((x - x.mean(axis=(0, 2, 3), keepdims=True)) ** 2).sum(axis=(0, 2, 3))
    eps = args["eps"]
    slips = {
        "Your inv_std has no eps. eps keeps a channel whose values are all equal (variance 0) from "
        "dividing by zero, and wherever the variance is small it changes the result":
            1 / np.sqrt(m2 / count),
        "Your eps is added after the square root; section 1 adds it to the variance, under the root":
            1 / (np.sqrt(m2 / count) + eps),
        "Your variance is divided by count - 1. That unbiased estimate is for the running statistics; "
        "the batch is normalized by its own, biased variance (section 1)": 1 / np.sqrt(m2 / (count - 1) + eps),
        "Your inv_std is 1 / (variance + eps): the factor is one over a standard deviation":
            1 / (m2 / count + eps),
    }
    inv = np.asarray(got["inv_std"], np.float64)
    off = lambda value: float(np.max(np.abs(inv - value) / np.abs(value)))
    miss = off(1 / np.sqrt(m2 / count + eps))          # how far the kernel is from the right factor
    says, value = min(slips.items(), key=lambda kv: off(kv[1]))
    if off(value) < min(1e-2, miss / 4):
        return says
    if "running_var_out" in got and miss < 1e-3:     # inv_std right: what does m2 hold for running_update?
        mom, before = args["momentum"], args["running_var"].astype(np.float64)
        rv = np.asarray(got["running_var_out"], np.float64)
        held = (1 - mom) * before + mom * (m2 / count) / (count - 1)
        if np.max(np.abs(rv - held) / np.abs(held)) < 1e-3:
            return ("Your inv_std is right, but m2 holds the variance (m2 / count) when running_update reads it: "
                    "running_update takes m2 as the sum of squared deviations and divides it by count - 1 itself. "
                    "Keep m2 the sum; divide by count only inside inv_std's formula")
    return ""


# (N, C, H, W, K, kernel, stride, padding, activation)
_DGRAD_CASES = (
    ("3x3, stride 1, padding 1", _dgrad(2, 5, 7, 6, 9, 3, 1, 1, "relu")),
    ("3x3, stride 1, no padding", _dgrad(1, 4, 6, 7, 5, 3, 1, 0, "none")),
    ("3x3, stride 2, padding 1", _dgrad(1, 3, 9, 8, 6, 3, 2, 1, "tanh")),
    ("5x5, stride 3, padding 2", _dgrad(1, 2, 11, 10, 3, 5, 3, 2, "none")),
    ("1x1 kernel on a 1x1 input", _dgrad(1, 3, 1, 1, 4, 1, 1, 0, "none")),
)
_STRIDE_HINT = {"3x3, stride 2, padding 1": "Stride 1 works: what if h + PAD - r is not a multiple of STRIDE?",
                "5x5, stride 3, padding 2": "Stride 1 works: what if h + PAD - r is not a multiple of STRIDE?",
                "3x3, stride 1, no padding": "Look at the last rows and columns: which oh, ow exist?"}

def _any_shape_kind(case) -> str:
    """What a case of the any-shape grid adds to chapter 02's layer: plain, dilated, grouped, both."""
    dilation, groups = case[4], case[5]
    dilated = any(v != 1 for v in (dilation if isinstance(dilation, tuple) else (dilation,)))
    return {(False, False): "plain", (True, False): "dilated", (False, True): "grouped"}.get(
        (dilated, groups > 1), "grouped and dilated")


def _any_shape_label(case, i: int) -> str:
    """A case of the grid as a learner reads it: rank, sizes, kernel, groups, dilation, stride."""
    xs, ws, stride, _, dilation, groups, _ = case
    kind = ("depthwise" if groups == xs[1] > 1 else f"{groups} groups" if groups > 1 else "1 group")
    return (f"#{i} {len(xs) - 2}-D {'x'.join(map(str, xs[2:]))}, kernel {'x'.join(map(str, ws[2:]))}, {kind}, "
            f"dilation {dilation}, stride {stride}")


def _any_shape_cases() -> tuple:
    """Every case of the any-shape grid (helpers/ops/grid_any_shape.py), with the seed the grid
    test gives it: the plain ones first, then those with dilation only, then groups only, then both.
    A kernel that ignores dilation or groups passes the cases before and fails at the first that
    has it, so the first failure names what is missing."""
    from ..ops.grid_any_shape import ANY_SHAPE, any_shape_args
    order = ("plain", "dilated", "grouped", "grouped and dilated")
    ranked = sorted(enumerate(ANY_SHAPE), key=lambda ic: order.index(_any_shape_kind(ic[1])))
    return tuple((_any_shape_label(c, i), lambda i=i, c=c: any_shape_args("conv_dgrad", c, i)) for i, c in ranked)


def _any_shape_hints(cases) -> dict:
    """Where to look, by what the first failing case adds (every case before it has passed)."""
    from ..ops.grid_any_shape import ANY_SHAPE
    says = {
        "plain": "This shape has one group and no dilation: look at the checks on each axis (chapter 02's: the "
                 "candidate negative, not a multiple of the stride, or past the last output).",
        "dilated": "The shapes without dilation pass. On an axis with dilation d, tap q sits q·d positions into "
                   "the window, not q: which output read this input through it (section 4)?",
        "grouped": "The shapes with one group pass. Input channel c belongs to one group: which output channels "
                   "of dy does it send its gradient to, and where are its weights in w, which is (C, K/G, ...)? "
                   "The group moves the index of one of the two tensors, not both.",
        "grouped and dilated": "Every shape before this one passes, each with groups or dilation alone. Here they "
                               "meet, and only the 4-D shapes dilate or stride the first axis (a, q, DA): check "
                               "that axis too, and how your indices combine the group and the tap.",
    }
    kinds = {_any_shape_label(c, i): _any_shape_kind(c) for i, c in enumerate(ANY_SHAPE)}
    return {label: says[kinds[label]] for label, _ in cases}


def _any_shape_summary() -> str:
    from collections import Counter

    from ..ops.grid_any_shape import ANY_SHAPE
    n = Counter(_any_shape_kind(c) for c in ANY_SHAPE)
    return (f"the any-shape grid, ranks 1 to 4: {n['plain']} plain, {n['dilated']} dilated, {n['grouped']} "
            f"grouped or depthwise, {n['grouped and dilated']} both")


_ANY_SHAPE_CASES = _any_shape_cases()


# Chapter 10's gap is the macro WADDR(R, cc) of 10_swizzle.cl: where weight (row R, channel cc)
# lives in a half of the slab. The bank model reads the learner's macro as integer arithmetic at
# the chapter's tile (C's / and % on non-negative numbers are Python's // and %). The exercise asks
# for a layout other than the kernel's own XOR: one that places every weight as the XOR does is
# refused before any launch, and the one accepted must need no more store passes than the XOR.
SLAB_TILE = {"TX": 32, "TY": 4, "CB": 32, "KC": 4, "XPW": 8, "CPW": 4}
SLAB_OTHER_TILES = ({**SLAB_TILE, "CB": 16}, {**SLAB_TILE, "CB": 64})   # a layout must hold for any CB
_MACRO = re.compile(r"#\s*define\s+WADDR\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)(.*)", re.S)
_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_]\w*)|(<<|>>|[-+*/%^&|()]))")


def _waddr(code: str):
    """The learner's WADDR as a Python function (row, channel, shape) -> word, or a message."""
    flat = code.replace("\\\n", " ")
    m = _MACRO.search(flat)
    if not m:
        return "write one line `#define WADDR(R, cc) ...` (the macro's name and its two arguments)"
    # the bank model judges this macro: no other directive may change what the kernel runs (a second
    # WADDR after an #undef, a WROW redefined, a define inside #if 0)
    directives = [ln.strip() for ln in flat.splitlines() if ln.strip().startswith("#")]
    if len(directives) > 1:
        return (f"write one line `#define WADDR(R, cc) ...` and no other directive ({directives[1][:24]!r}): "
                f"the bank model judges that macro, and the kernel must run the same one")
    row, ch, body = m.group(1), m.group(2), m.group(3).split("\n")[0].split("//")[0].split("/*")[0].strip()
    names = {row: "R", ch: "cc", "WROW": "CB", "CB": "CB", "ROWS": "ROWS", "KC": "KC", "TAPS": "TAPS"}
    out, pos = [], 0
    while pos < len(body):
        tok = _TOKEN.match(body, pos)
        if not tok or tok.end() == pos:
            return (f"the bank model reads WADDR as integer arithmetic (+ - * / % ^ & | << >>, parentheses, "
                    f"R, cc, CB, ROWS and numbers) and stops at {body[pos:].strip()[:12]!r}")
        num, name, op = tok.groups()
        if name and name not in names:
            return f"the bank model does not know {name!r} (it knows R, cc, CB, WROW, ROWS, KC, TAPS)"
        if num:
            out.append(num)
        elif name:
            out.append(names[name] if name in (row, ch) else f"s[{names[name]!r}]")
        else:
            out.append("//" if op == "/" else op)
        pos = tok.end()
    expr = " ".join(out)
    try:
        fn = eval(f"lambda R, cc, s: int({expr})", {})     # only the tokens above reach here
        fn(0, 0, {"CB": 32, "ROWS": 36, "KC": 4, "TAPS": 9})
    except Exception:                                       # noqa: BLE001: any malformed expression
        return "WADDR's expression does not parse as C integer arithmetic"
    return fn


def _slab_layout(code: str):
    """Before any launch: every weight in its own word inside the slab, float4s whole, and a layout
    other than the chapter's own XOR (the exercise asks for a different one)."""
    from .local import _shape, weight_word
    if not _MACRO.search(code):
        return True, ""                   # no WADDR line: the compiler says what is missing
    fn = _waddr(code)
    if isinstance(fn, str):
        return False, fn
    s = _shape(SLAB_TILE, 3, 3)
    if all(fn(r, cc, s) == weight_word("swizzle", s, r, cc) for r in range(s["ROWS"]) for cc in range(s["CB"])):
        return False, ("your WADDR puts every weight where 10_swizzle's XOR puts it: that is the chapter's own "
                       "layout, shown above. The exercise asks for a different one: read the task again")
    for tile in (SLAB_TILE, *SLAB_OTHER_TILES):
        ok, message = _slab_words(fn, _shape(tile, 3, 3))
        if not ok:
            return False, message if tile is SLAB_TILE else (
                f"at CB = {tile['CB']} (a tile the search may choose), {message}: write the layout for any CB")
    return True, ""


def _slab_words(fn, s: dict):
    """Every weight of one half of the slab (shape ``s``) in its own word, inside the slab, each
    float4 of 4 channels whole and 16-byte aligned."""
    seen = {}
    for r in range(s["ROWS"]):
        for cc in range(s["CB"]):
            a = fn(r, cc, s)
            if not 0 <= a < s["ROWS"] * s["CB"]:
                return False, (f"weight (R={r}, cc={cc}) goes to word {a}, outside the slab's ROWS x CB = "
                               f"{s['ROWS']} x {s['CB']} floats (the slab has no padding here)")
            if a in seen:
                return False, f"weights (R={seen[a][0]}, cc={seen[a][1]}) and (R={r}, cc={cc}) share word {a}"
            seen[a] = (r, cc)
            if cc % 4 == 0 and a % 4:
                return False, (f"the float4 of row {r}, channels {cc}..{cc + 3}, starts at word {a}, not a multiple "
                               f"of 4: a 16-byte read needs a 16-byte boundary")
            if cc % 4 and a != fn(r, cc - cc % 4, s) + cc % 4:
                return False, (f"channels {cc - cc % 4}..{cc - cc % 4 + 3} of row {r} are not one whole float4 "
                               f"(4 consecutive words): the kernel reads them with one 16-byte read")
    return True, ""


def _not_the_rotation(fn) -> str:
    """Where the learner's layout is not the task's rotation (row R moves its float4s R places
    along the row, wrapping round), at every width of SLAB_TILE and SLAB_OTHER_TILES; "" if it is.
    Another conflict-free layout (an XOR with another row function) is not the exercise's answer."""
    from .local import _shape
    for tile in (SLAB_TILE, *SLAB_OTHER_TILES):
        s = _shape(tile, 3, 3)
        groups = s["CB"] // 4
        backwards = all(fn(r, 4 * u, s) == r * s["CB"] + (u - r) % groups * 4
                        for r in range(s["ROWS"]) for u in range(groups))
        for r in range(s["ROWS"]):
            for u in range(groups):
                word = fn(r, 4 * u, s)
                if word == r * s["CB"] + (u + r) % groups * 4:
                    continue
                where = f"at CB = {s['CB']} ({groups} float4s a row), row {r}"
                if backwards:
                    return (f"{where}: your rotation turns the row the other way; the task moves row R's float4s "
                            f"R places along the row (towards its end), wrapping round")
                if word // s["CB"] != r:
                    return f"{where}: float4 {u} leaves its row; a rotation keeps each row's float4s in the row"
                return (f"{where}: float4 {u} goes to float4 {word % s['CB'] // 4} of the row, which is not {r} "
                        f"places along it, wrapped round at the row's end: the task asks for that rotation, "
                        f"not another layout without conflicts")
    return ""


def _slab_banks(code: str):
    """Once the kernel is right: the copy's weight stores and the weight reads in the bank model."""
    from . import local
    from .banks import passes
    fn = _waddr(code)
    if isinstance(fn, str):
        return False, fn
    mine = local.store_extra("swizzle", "weight store", SLAB_TILE, waddr=fn)
    best = local.store_extra("swizzle", "weight store", SLAB_TILE)
    read = passes(local.warp_lanes("swizzle", "weight read", SLAB_TILE, waddr=fn))
    if mine > best:
        return False, (f"the copy's weight stores take {mine} extra passes per work-group and chunk in the bank "
                       f"model at the chapter's tile; 10_padded takes "
                       f"{local.store_extra('padded', 'weight store', SLAB_TILE)}, and fewer is possible with "
                       f"no padding. Which float4 does row R's channel group go to, for 8 consecutive rows?")
    if read > 4:
        return False, f"one warp's float4 read of the weights takes {read} passes, more than the 4 quarter-warps"
    off = _not_the_rotation(fn)
    if off:
        return False, off
    return True, (f"the copy's weight stores take {mine} extra passes per work-group and chunk in the bank model, "
                  f"{'as many as' if mine == best else 'fewer than'} with 10_swizzle's XOR")


GAPS = {
    # chapter 02: the checks of the naive kernel (which output positions exist)
    "naive_checks": Gap(
        "conv_dgrad", "naive", "const int oh_s = h + PAD - r;", "if (ow >= OW) continue;",
        "for weight (r, s), find (oh, ow) and skip the offsets whose output does not exist",
        _DGRAD_CASES, _STRIDE_HINT),
    # chapter 03: the table of valid offsets, built once per work-item
    "memo_table": Gap(
        "conv_dgrad", "memoized_bounds", "const int oh_s = h + PAD - r;", "valid[r][s] = row_ok",
        "fill valid[r][s] for every (r, s): does output ((h+PAD-r)/STRIDE, (x+PAD-s)/STRIDE) exist?",
        _DGRAD_CASES, _STRIDE_HINT),
    # chapter 04: the 3x3 weights through one 8-wide load and one scalar
    "weight_load": Gap(
        "conv_dgrad", "weight_vec", "const weights3x3 wk = load_weights3x3(", "const weights3x3 wk = load_weights3x3(",
        "declare `weights3x3 wk`: the 9 weights of (c, k), fetched with one 8-wide load and one scalar",
        _DGRAD_CASES[:3], {lbl: "Which float of w is the first weight of block (c, k) in IOHW order?"
                           for lbl, _ in _DGRAD_CASES}, lesson=kernel_lessons.vector_weights),
    # chapter 05: when may a work-item read its three dy columns as one 3-wide load?
    "inside_test": Gap(
        "conv_dgrad", "input_vec", "const bool inside = x + PAD - 2 >= 0", "const bool inside = x + PAD - 2 >= 0",
        "declare `const bool inside`: true exactly where this work-item may read its window of dy with "
        "one 3-wide load per row",
        _DGRAD_CASES[:3] + (("3x3, stride 1, a 2-wide input", _dgrad(1, 2, 5, 2, 3, 3, 1, 1, "none")),),
        {"3x3, stride 1, padding 1": "Check both ends of the window: the leftmost and rightmost columns.",
         "3x3, stride 1, no padding": "Check both ends of the window: the leftmost and rightmost columns.",
         "3x3, stride 1, a 2-wide input": "Check both ends of the window: the leftmost and rightmost columns."},
        lesson=kernel_lessons.vector_path,
        conceal=("// Memory safety: the vector path runs only when", "// floats lie inside one row of dy")),
    # chapter 09: the cooperative copy of the dy patch (the tile with its halo) into local memory
    "tile_copy": Gap(
        "conv_dgrad", "local_tile", "const int kk = i / (PH * PW), py = i / PW % PH, px = i % PW;",
        "dyt[kk][py][px] = ok ?",
        "element i of the chunk's patch: find (kk, py, px), store its dy value (activation derivative "
        "applied) into dyt[kk][py][px], or 0 where that output does not exist",
        (("3x3, padding 1, tiles that do not divide the plane", _dgrad(2, 5, 7, 6, 9, 3, 1, 1, "relu")),
         ("3x3, no padding", _dgrad(1, 4, 6, 7, 5, 3, 1, 0, "none")),
         ("5x5, padding 2, K not a multiple of KC", _dgrad(1, 3, 9, 8, 11, 5, 1, 2, "tanh")),
         ("1x1 kernel on a 1x1 input", _dgrad(1, 3, 1, 1, 4, 1, 1, 0, "none"))),
        {"3x3, padding 1, tiles that do not divide the plane":
             "Patch row py is dy row oh0 + py: which rows and columns of dy exist? And is the activation "
             "derivative applied (GRAD_IN in kernels/common/course.h)?",
         "3x3, no padding": "Patch row py is dy row oh0 + py: does the bounds check cover both ends?",
         "5x5, padding 2, K not a multiple of KC": "The last chunk runs past K: which output channels exist?"},
        lesson=kernel_lessons.coalesced_copy,
        # 09_prefetch's copy of these lines, shown in chapter 09's diff beside the gap
        spellings=("oh = oh0 + py, ow = ow0 + px", "k < K && oh >= 0 && oh < OH && ow >= 0 && ow < OW",
                   "ok ? GRAD_IN(dy, y, ((n * K + k) * OH + oh) * OW + ow) : 0.0f",
                   "[i / (PH * PW)][i / PW % PH][i % PW]")),
    # chapter 10: the XOR-swizzled address of a weight in the transposed slab
    "slab_swizzle": Gap(
        "conv_dgrad", "swizzle", "#define WADDR(R, cc)", "#define WADDR(R, cc)",
        "#define WADDR(R, cc): the float of weight (row R, channel cc) in a half of the slab, rows of CB "
        "floats, no padding, each float4 of 4 channels kept whole",
        (("3x3, C=40, K=9, odd plane", _dgrad(1, 40, 9, 7, 9, 3, 1, 1, "relu")),
         ("5x5, C=33, K=5", _dgrad(1, 33, 6, 6, 5, 5, 1, 2, "none")),
         ("1x1, C=64", _dgrad(2, 64, 3, 5, 6, 1, 1, 0, "none"))),
        {lbl: "The layout passed the checks run on WADDR as arithmetic; but a C macro pastes its arguments "
              "as text (WADDR(W_R(i), W_CC(i))): is every use of R and cc in parentheses?"
         for lbl in ("3x3, C=40, K=9, odd plane", "5x5, C=33, K=5", "1x1, C=64")},
        before=_slab_layout, after=_slab_banks, other_answer=True),
    # chapter 12: the zero padding of Winograd's input tiles
    "wino_tile_padding": Gap(
        "conv_forward", "wino_naive", "const float d = (h >= 0 && h < IH", "? GRAD_IN(x, xy,",
        "declare `const float d`: the tile's input value at (h, x_), or 0 where (h, x_) lies in the padding",
        (("3x3, padding 1", _fwd(1, 3, 7, 6, 4, 3, 1, 1)), ("3x3, no padding", _fwd(2, 2, 6, 9, 3, 3, 1, 0)),
         ("3x3, padding 2, odd sizes", _fwd(1, 5, 5, 7, 2, 3, 1, 2))),
        {"3x3, no padding": "Tiles at the right and bottom edges can stick out of the input too."},
        # stages 02-05 keep the test with one more term (live &&): chapter 12's diff of 01 and 02 shows it
        spellings=("h >= 0 && h < IH && x_ >= 0 && x_ < IW",)),
    # chapter 14: the variance of the naive batch-norm kernel
    "bn_variance": Gap(
        "batchnorm_forward", "naive", "float m2 = 0.0f;", "const float inv_std =",
        "compute m2 (the sum of squared deviations from the mean) and inv_std, the factor that section 1's "
        "formula multiplies x - mean by",
        # the first two also update the running statistics, at counts 50 and 2: running_update reads m2
        # after the gap (so m2 must stay the sum of squared deviations, whatever inv_std is)
        (("N=2, C=3, 5x5, data around 0", _bn(2, 3, 5, 5, momentum=0.1)),
         ("N=1, C=2, 1x2", _bn(1, 2, 1, 2, momentum=0.5)),
         ("N=3, C=2, 4x4, data around 1000", _bn(3, 2, 4, 4, offset=1000.0)),
         ("N=2, C=3, 3x5, a spread as small as eps", _bn(2, 3, 3, 5, scale=0.003))),
        {"N=3, C=2, 4x4, data around 1000": "Right near 0, wrong near 1000: is there a difference of "
         "two large, nearly equal numbers?",
         "N=2, C=3, 3x5, a spread as small as eps": "Right where the spread is large, wrong where the variance "
         "is as small as eps: where does eps enter the formula of section 1?",
         **{lbl: "This case also updates the running statistics (a momentum is given): running_update "
                 "(kernels/common/batchnorm.h) reads m2 after your lines. What must m2 hold then?"
            for lbl in ("N=2, C=3, 5x5, data around 0", "N=1, C=2, 1x2")}},
        diagnose=_bn_variance_mistake,
        # 05_fused's copy of the last line (its count is n_i), shown in chapter 14's diffs before the exercise
        spellings=("const float inv_std = 1.0f / sqrt(m2 / n_i + eps);",)),
    # chapter 16: groups and dilation in the any-shape input gradient's loops over the taps
    "groups_dilation": Gap(
        "conv_dgrad", "any_shape", "const int CG = C / G, KG = K / G, g = c / CG;",
        "const __global float* wc = w + c * KG * taps",
        "declare KG; open the loops over the taps q, t, r, s, skipping a tap whose output does not exist; "
        "declare o, the index in dy of that output in the first output channel of c's group, and wc, the "
        "address in w of c's weight of this tap for that channel",
        _ANY_SHAPE_CASES, _any_shape_hints(_ANY_SHAPE_CASES),
        # the header's inverted formula (the dilated tap's output, on the first axis)
        conceal=("oa = (a + PA - q*DA) / SA",), summary=_any_shape_summary(),
        # the same arithmetic in the listings of chapter 16 above the exercise: the depthwise rungs'
        # dilated taps (16_dw_tiles, 16_dw_regs) and the forward implicit GEMM's offsets of a group's
        # first input and output channel (conv_forward 16_igemm_nd)
        spellings=("h + PH - r * DH - t.oh0 * SH", "x + PW - s * DW - t.ow0 * SW", "i + PW - s * DW",
                   "(n * C + g * CG) * V", "(img * K + g * KG) * OV")),
}


@functools.lru_cache(maxsize=1)
def secret_lines() -> dict:
    """Every kernel exercise's hidden lines, course-wide: {key: gap name} (what the student
    edition hides in every listing: helpers/chapters/answers.py)."""
    out = {}
    for name, gap in GAPS.items():
        for k in gap.secrets():
            out.setdefault(k, name)
    return out


def _check_in_child(name: str, code: str, selector: str) -> bool:
    """What a child process runs for Gap.check: the gap's cases on the device ``selector`` names."""
    return kernel_gap(name)._check_here(code, get_context(selector))


def kernel_gap(name: str) -> Gap:
    if name not in GAPS:
        raise ValueError(f"no kernel exercise {name!r}; there are: {', '.join(GAPS)}")
    return GAPS[name]
