"""Checked outputs state correctness only: every cell marked `# NBVAL_CHECK_OUTPUT` prints text
that is the same on any machine, with any compiler version and at either size (COURSE_SIZE).

nbval compares those cells' committed outputs with a new run. The committed outputs come from a
CPU through PoCL at the small size; the same notebooks run under nbval on a GPU at full size. A
checked cell that prints what the compiler chose (PTX register numbers), what machine ran it (the
device that `start()` names), or what the size switch chose (a configuration, a shape of the small
run) fails there. Three rules, read from the committed notebooks without running them:

1. no checked output holds PTX register names (`%r241`): NVRTC numbers registers differently from
   one version to the next;
2. no checked output names the device the notebook ran on (its first cell prints it): another
   machine prints another name;
3. no checked cell reads the size switch (`nb.full`, `nb.layers`, `nb.size`, `nb.repeats`,
   COURSE_SIZE) or times anything on this device, directly or through a name assigned from such an
   expression in an earlier statement of the notebook, unless it is listed in SIZE_FREE with the
   reason its output is the same at both sizes.

Recorded results (results/) are the same on every machine, so a checked cell may print them.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CHECK = "NBVAL_CHECK_OUTPUT"
REGISTER = re.compile(r"%(?:rd|r|fd|f|hh|h|p|b)\d+\b")
DEVICE_LINE = re.compile(r"^Device: (.+?) \(", re.M)
SIZE_OR_TIME = re.compile(r"\bnb\.(?:full|layers|size|repeats)\b|COURSE_SIZE|\bbench\.run\(|\bstep_times\(|"
                          r"\bswitch_times\(|\btime_plan\(|\btime_steps\(|\btime_events\(")
# (notebook, a line of the cell) -> why the cell's output does not depend on the size
SIZE_FREE = {
    ("15_training", "print(run.verdict(comparison)"):
        "the verdict words only: agree or DISAGREE over the first 20 steps, which both sizes have",
    ("15_training", "a quarter held out for testing"):
        "the label range, the pixel range and the held-out quarter of the 1,797 digits: the size only upsamples them",
    ("15_training", "model.compare_gradients(grads, ref_grads)"):
        "a verdict per gradient, named without its shape, and the host transfers of a step, which the network's "
        "layers fix at either size",
    ("15c_torch_resnet", "print(torch_resnet.verdict(here))"):
        "the verdict words and the tolerances only: agree or DISAGREE for the first step and the first 10 steps "
        "(torch_resnet.COMPARE_STEPS), which every size has",
}


def _text(cell) -> str:
    out = ""
    for o in cell.get("outputs", []):
        data = o.get("data", {})
        out += o.get("text", "") + data.get("text/plain", "") + data.get("text/markdown", "")
    return out


def checked_cells(nb):
    return [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and CHECK in c.source]


def register_names(nb) -> list[tuple[int, str]]:
    return [(i, m.group()) for i, c in checked_cells(nb) for m in [REGISTER.search(_text(c))] if m]


def device_named(nb) -> list[int]:
    first = next((_text(c) for c in nb.cells if c.cell_type == "code" and DEVICE_LINE.search(_text(c))), "")
    m = DEVICE_LINE.search(first)
    if not m:
        return []
    return [i for i, c in checked_cells(nb) if m.group(1) in _text(c)]


def _bound(expr) -> set:
    """Names that a comprehension or a lambda inside ``expr`` binds for itself."""
    out = set()
    for n in ast.walk(expr):
        if isinstance(n, ast.comprehension):
            out |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
        elif isinstance(n, ast.Lambda):
            out |= {a.arg for a in n.args.args}
    return out


def size_reads(nb, stem: str = "") -> list[tuple[int, str]]:
    """Checked cells' statements that read the size switch or a time, or a name assigned from them.

    The notebook's code cells are walked in order, statement by statement: an assignment (or a for
    loop's target) takes the taint of its value, so a name reused for something else is clean again."""
    tainted, found = set(), []

    def dirty(expr, src):
        if expr is None:
            return False
        local = _bound(expr)
        return bool(SIZE_OR_TIME.search(ast.get_source_segment(src, expr) or "")) or any(
            isinstance(n, ast.Name) and n.id in tainted and n.id not in local for n in ast.walk(expr))

    def bind(target, on):
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                (tainted.add if on else tainted.discard)(n.id)

    def visit(stmts, src, checked, index):
        for st in stmts:
            head = {ast.Expr: "value", ast.Assign: "value", ast.AugAssign: "value", ast.AnnAssign: "value",
                    ast.For: "iter", ast.If: "test", ast.While: "test", ast.Return: "value"}.get(type(st))
            expr = getattr(st, head) if head else None
            if checked and dirty(expr, src):
                found.append((index, (ast.get_source_segment(src, expr) or "").splitlines()[0]))
            if isinstance(st, ast.Assign):
                d = dirty(st.value, src)
                for t in st.targets:
                    bind(t, d)
            elif isinstance(st, (ast.AugAssign, ast.AnnAssign)):
                if dirty(st.value, src):
                    bind(st.target, True)
            elif isinstance(st, ast.For):
                bind(st.target, dirty(st.iter, src))
            for block in ("body", "orelse", "finalbody"):
                if isinstance(st, (ast.For, ast.If, ast.While, ast.With, ast.Try)):
                    visit(getattr(st, block, []), src, checked, index)
            for h in getattr(st, "handlers", []):
                visit(h.body, src, checked, index)

    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:          # IPython magics: no statement to follow
            continue
        allowed = any(s == stem and line in cell.source for s, line in SIZE_FREE)
        visit(tree.body, cell.source, CHECK in cell.source and not allowed, i)
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_checked_outputs_hold_no_register_names(path):
    found = register_names(nbformat.read(path, as_version=4))
    assert not found, (f"{path.name}: checked cells print PTX register names, which differ with the NVRTC version "
                       f"(cell, name): {found}; print what the PTX holds (instruction names, True/False) or mark "
                       f"the cell NBVAL_IGNORE_OUTPUT")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_checked_outputs_do_not_name_the_machine(path):
    found = device_named(nbformat.read(path, as_version=4))
    assert not found, f"{path.name}: checked cells {found} print the name of the device the notebook ran on"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_checked_cells_do_not_read_the_size_or_a_time(path):
    found = size_reads(nbformat.read(path, as_version=4), path.stem)
    assert not found, (f"{path.name}: checked cells read the size switch or a time measured here, so their output "
                       f"differs at COURSE_SIZE=full or on another machine (cell, statement): {found}; print a "
                       f"verdict that holds at both sizes in an unmarked cell, or list the cell in SIZE_FREE with "
                       f"the reason")


def _notebook(*cells):
    nb = nbformat.v4.new_notebook()
    for source, text in cells:
        cell = nbformat.v4.new_code_cell(source)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        nb.cells.append(cell)
    return nb


def test_the_ptx_cell_that_failed_on_the_gpu_is_caught():
    """Chapter 13 printed `bar.sync 1, %r241;` in a checked cell; NVRTC of another version wrote %r239."""
    nb = _notebook(("# NBVAL_CHECK_OUTPUT\nprint(line)", "bar.sync 1, %r241;\nfence.proxy.async.shared::cta;\n"))
    assert register_names(nb) == [(0, "%r241")]
    nb.cells[0].outputs[0].text = "bar.sync 1: True\n"
    assert register_names(nb) == []


def test_the_configuration_cell_that_failed_at_full_size_is_caught():
    """Chapter 15 printed its configuration, chosen by nb.full, in a checked cell; at full size it differed."""
    nb = _notebook(("cfg = model.FULL if nb.full else model.SMALL", ""),
                   ("# NBVAL_CHECK_OUTPUT\nx = data.digits(cfg.scale)\nprint(x.shape)", "(1348, 1, 16, 16)\n"))
    assert [i for i, _ in size_reads(nb)] == [1, 1]
    nb.cells[1].source = "# NBVAL_CHECK_OUTPUT\ncfg = model.SMALL\nx = data.digits(cfg.scale)\nprint(x.shape)"
    assert size_reads(nb) == []          # the name was bound again to a fixed value: clean


def test_a_timing_or_the_device_in_a_checked_cell_is_caught():
    nb = _notebook(("nb = start()", "Device: pthread-Some CPU (Portable Computing Language, CPU, driver 3)\n"),
                   ("t = step_times(plan)", ""),
                   ("# NBVAL_CHECK_OUTPUT\nfor k, v in t.items():\n    print(k)", "bn_forward_train\n"),
                   ("# NBVAL_CHECK_OUTPUT\nprint(label)", "timed on pthread-Some CPU\n"))
    assert [i for i, _ in size_reads(nb)] == [2, 2]       # the loop and the print in it
    assert device_named(nb) == [3]
    # a comprehension's own variable of the same name is not the tainted one
    nb.cells[2].source = "# NBVAL_CHECK_OUTPUT\nprint([t for t in range(3)])"
    assert size_reads(nb) == []
