"""A kernel exercise's gap: a stage's kernel with marked lines that the learner fills with OpenCL C,
and its check. The gaps themselves (which lines, which shapes, which hints) are the table GAPS of
helpers/chapters/kernel_exercises.py; ``kernel_gap(name)`` there returns one.

The learner's code is spliced into the real kernel file in place of the gap's lines and run as a
temporary copy of the stage (``dataclasses.replace``, passed to plan_stage; the registry is not
touched) over a few labelled shapes, with guard regions (NaN before and after every input, canaries
around every output), in a process of its own (a kernel that faults takes that process down, not the
notebook). The verdict names the first shape that fails and
what went wrong (does not compile, reads outside a tensor, writes outside one, wrong values)
without printing the answer. In the student edition the teacher's code is replaced by nbgrader's
stub (``raise NotImplementedError()``); ``check`` then says the exercise is not answered yet.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pyopencl as cl

from ..engine.build import KernelBuildError
from ..engine.kernels import kernel_source
from ..engine.child import ChildDied, in_child
from ..engine.devices import FAULT_HINT, fault_report, faulted, get_context, selector_of
from ..engine.check import MismatchError
from ..runner import GuardViolation, check_plan, plan_stage
from ..stages import get_stage
from .answers import region_secrets
from .exercises.verdict import _verdict
from .listing import Source, inlined


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
    inline: tuple = ()      # headers of kernels/common that hold the stage's kernel (one text with its
    #                         CUDA twin): the gap's kernel is the file with them inlined, in OpenCL C

    def _lines(self):
        src = inlined(kernel_source(get_stage(self.op, self.stage).kernel), self.inline, opencl=True).splitlines()
        starts = [i for i, ln in enumerate(src) if self.first in ln]
        if len(starts) != 1:
            raise RuntimeError(f"gap start {self.first!r} found {len(starts)} times in the kernel")
        end = next(i for i in range(starts[0], len(src)) if self.last in src[i])
        return src, starts[0], end

    @property
    def name(self) -> str:
        """Its key in GAPS (how a child process finds it again)."""
        from .kernel_exercises import GAPS
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
        from .kernel_exercises import secret_lines
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


def _check_in_child(name: str, code: str, selector: str) -> bool:
    """What a child process runs for Gap.check: the gap's cases on the device ``selector`` names."""
    from .kernel_exercises import kernel_gap
    return kernel_gap(name)._check_here(code, get_context(selector))
