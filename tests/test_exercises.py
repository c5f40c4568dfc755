"""Every exercise check accepts a right answer, rejects the typical wrong ones (off-by-one, swapped
order, a missing check) with a message that does not print the expected answer, and says "not
answered yet" for the student edition's stub."""
import numpy as np
import pyopencl as cl
import pytest

from helpers.chapters import exercises as ex
from helpers.chapters.direct import valid_table
from helpers.chapters.kernel_exercises import GAPS, kernel_gap
from helpers.engine.backends.opencl import ClPlan
from helpers.ops.reference import output_size


@pytest.fixture
def own_ctx(ctx):
    """A context of the test's own for learners' wrong kernels: on a GPU a kernel that faults (a
    local-memory index past its tile, say) leaves its context unusable, and the session's must survive."""
    return cl.Context(ctx.devices)


def stub(*args):
    raise NotImplementedError()


def _run(check, fn, capsys):
    ok = check(fn)
    return ok, capsys.readouterr().out


def _names_each_mistake(check, wrong: dict, capsys, hidden: str | None = None):
    """Each wrong answer is refused with "Not yet" and the words that name its mistake (and
    without ``hidden``, the expected answer); the student edition's stub is "Not answered yet"."""
    for says, answer in wrong.items():
        capsys.readouterr()
        ok, out = _run(check, answer, capsys)
        assert not ok and says in out and "Not yet" in out, (says, out)
        assert hidden is None or hidden not in out
    capsys.readouterr()
    ok, out = _run(check, stub, capsys)
    assert not ok and "Not answered yet" in out


def _f23(d, g):
    m1, m4 = (d[0] - d[2]) * g[0], (d[1] - d[3]) * g[2]
    m2 = (d[1] + d[2]) * ((g[0] + g[1] + g[2]) / 2)
    m3 = (d[2] - d[1]) * ((g[0] - g[1] + g[2]) / 2)
    return [m1 + m2 + m3, m2 - m3 - m4]


RIGHT = {
    "check_output_size": lambda s, k, st, p: (s + 2 * p - k) // st + 1,
    "check_touched_outputs": lambda h, k, s, p, n: [o for o in range(n) if 0 <= h + p - o * s < k],
    "check_flops": lambda n, c, h, w, k, r, s, st, p: 2 * n * k * output_size(h, r, st, p) * output_size(w, s, st, p) * c * r * s,
    "check_intensity": lambda n, c, size, k, r, st, p: (
        2 * n * k * output_size(size, r, st, p) ** 2 * c * r * r
        / (4 * (n * k * output_size(size, r, st, p) ** 2 + c * k * r * r + n * c * size * size))),
    "check_valid_table": lambda h, x, k, s, p, H, W: valid_table(h, x, k, k, s, p, output_size(H, k, s, p), output_size(W, k, s, p)),
    "check_block_lines": lambda c, k, K, L: ((c * K + k) * 9 + 8) // (L // 4) - (c * K + k) * 9 // (L // 4) + 1,
    "check_vector_columns": lambda W, p: max(0, min(W - 1, W + 2 * p - 3 - p) - max(0, 2 - p) + 1),
    "check_weight_slot": lambda i, t: divmod(9 * i + t, 16),
    "check_weight_vectors": lambda a, b: list(range(9 * a // 4, (9 * b + 8) // 4 + 1)),
    "check_width_columns": lambda x0, xpw, W, st, p: [
        (x0 + p - 2 + u) // st if (x0 + p - 2 + u >= 0 and (x0 + p - 2 + u) % st == 0
                                   and (x0 + p - 2 + u) // st < (W + 2 * p - 3) // st + 1) else None
        for u in range(xpw + 2)],
    "check_chan_merge": lambda na, ma, qa, nb, mb, qb: (
        (na, ma, qa) if nb == 0 else
        (na + nb, ma + (mb - ma) * nb / (na + nb), qa + qb + (mb - ma) ** 2 * na * nb / (na + nb))),
    "check_winograd_1d": lambda d, g: _f23(d, g),
    "check_phase_taps": lambda k, s, p: list(range(p, k, s)),
    "check_tile_reuse": lambda tx, ty, cb, kh, kw: tx * ty * cb * kh * kw / ((ty + kh - 1) * (tx + kw - 1)),
    "check_stride_passes": lambda s: int(np.gcd(s, 32)),
    "check_wino_products": lambda n, c, h, w, k, m: n * -(-h // m) * -(-w // m) * (m + 2) ** 2 * c * k,
}

WRONG = {
    "check_output_size": [lambda s, k, st, p: (s + 2 * p - k) // st,          # off by one
                          lambda s, k, st, p: (s + p - k) // st + 1],         # padding once
    "check_touched_outputs": [lambda h, k, s, p, n: [o for o in range(n) if 0 <= h + p - o * s <= k],  # one too many
                              lambda h, k, s, p, n: [o for o in range(n) if 0 <= h - o * s < k]],     # padding forgotten
    "check_flops": [lambda n, c, h, w, k, r, s, st, p: n * k * output_size(h, r, st, p) * output_size(w, s, st, p) * c * r * s,
                    lambda n, c, h, w, k, r, s, st, p: 2 * n * k * h * w * c * r * s,
                    lambda n, c, h, w, k, r, s, st, p:   # the kernel's height and width swapped
                    2 * n * k * output_size(h, s, st, p) * output_size(w, r, st, p) * c * r * s],
    "check_intensity": [lambda *a: RIGHT["check_intensity"](*a) / 2, lambda *a: RIGHT["check_intensity"](*a) * 4],
    "check_valid_table": [lambda h, x, k, s, p, H, W: np.array(  # the stride forgotten
        [[0 <= h + p - r < output_size(H, k, s, p) and 0 <= x + p - c < output_size(W, k, s, p)
          for c in range(k)] for r in range(k)]),
        lambda h, x, k, s, p, H, W: RIGHT["check_valid_table"](h, x, k, s, p, H, W).T],  # r and s swapped
    "check_block_lines": [  # ten floats instead of nine
        lambda c, k, K, L: ((c * K + k) * 9 + 9) // (L // 4) - (c * K + k) * 9 // (L // 4) + 1,
        lambda c, k, K, L: ((c * K + k) * 9 + 8) // (L // 4) - (c * K + k) * 9 // (L // 4)],
    "check_vector_columns": [lambda W, p: W - 2, lambda W, p: RIGHT["check_vector_columns"](W, p) + 1],
    "check_weight_slot": [lambda i, t: divmod(9 * i + t, 16)[::-1],          # swapped order
                          lambda i, t: divmod(9 * i + t + 1, 16)],            # off by one
    "check_weight_vectors": [lambda a, b: list(range(9 * a // 4, (9 * b + 8) // 4)),   # one short
                             lambda a, b: list(range((9 * b + 8) // 4, 9 * a // 4 - 1, -1))],  # reversed
    "check_width_columns": [lambda x0, xpw, W, st, p: [x0 - 1 + u for u in range(xpw + 2)],
                            lambda x0, xpw, W, st, p: RIGHT["check_width_columns"](x0, xpw + 1, W, st, p)],
    "check_chan_merge": [lambda na, ma, qa, nb, mb, qb: (na + nb, (ma + mb) / 2, qa + qb),
                         lambda na, ma, qa, nb, mb, qb: (na + nb, ma + (mb - ma) * nb / (na + nb), qa + qb)],
    "check_phase_taps": [lambda k, s, p: list(range(k)),                       # the stride forgotten
                         lambda k, s, p: list(range(p + 1, k, s)),             # off by one
                         lambda k, s, p: list(range(p, k - 1, s)),             # the last tap dropped
                         lambda k, s, p: list(range(k - 1 - p, -1, -s))],      # counted from the far end
    "check_tile_reuse": [lambda tx, ty, cb, kh, kw: cb * kh * kw,                     # the halo forgotten
                         lambda tx, ty, cb, kh, kw: tx * ty * kh * kw / ((ty + kh - 1) * (tx + kw - 1))],  # CB
    "check_stride_passes": [lambda s: min(s, 32),                                     # every odd stride is free
                            lambda s: 1 if s % 2 else s,                              # 6 and 12 share banks
                            lambda s: 32 // s if s < 32 else 32],                     # upside down
    "check_winograd_1d": [lambda d, g: RIGHT["check_winograd_1d"](d, g)[::-1],
                          lambda d, g: [d[0] * g[0] + d[1] * g[1] + d[2] * g[2], d[1] * g[0] + d[2] * g[1] + d[3] * g[2]]],
    "check_wino_products": [lambda n, c, h, w, k, m: n * h * w // (m * m) * (m + 2) ** 2 * c * k,      # no partial tiles
                            lambda n, c, h, w, k, m: n * -(-h // m) * -(-w // m) * m * m * c * k,     # m x m points
                            lambda n, c, h, w, k, m: 2 * n * -(-h // m) * -(-w // m) * (m + 2) ** 2 * c * k],  # FLOPs
}


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_check_accepts_right_answer(name, capsys):
    ok, out = _run(getattr(ex, name), RIGHT[name], capsys)
    assert ok and out.startswith("Correct"), out


@pytest.mark.parametrize("name,i", [(n, i) for n in sorted(WRONG) for i in range(len(WRONG[n]))])
def test_check_rejects_wrong_answer_without_giving_it(name, i, capsys):
    ok, out = _run(getattr(ex, name), WRONG[name][i], capsys)
    assert not ok and out.startswith("Not yet:"), out
    assert "expected" not in out, f"the message hands over the answer: {out}"


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_unanswered_exercise_is_reported_politely(name, capsys):
    ok, out = _run(getattr(ex, name), stub, capsys)
    assert not ok and out.strip() == ex.NOT_ANSWERED


def test_block_lines_catches_ten_floats(capsys):
    ok, out = _run(ex.check_block_lines, WRONG["check_block_lines"][0], capsys)
    assert not ok and "one float too many" in out


# Kernel exercises: the teacher's lines pass; typical mistakes are caught and named.
def _right(name):
    g = kernel_gap(name)
    src, a, b = g._lines()
    return "\n".join(src[a:b + 1])


KERNEL_WRONG = {
    # the stride check dropped: stride 1 passes, stride 2 must not
    "naive_checks": (lambda c: c.replace("if (oh_s < 0 || oh_s % STRIDE != 0) continue;", "if (oh_s < 0) continue;"),
                     "stride 2"),
    # the lower bound dropped: reads before dy (the NaN guard)
    "memo_table": (lambda c: c.replace("row_ok = oh_s >= 0 && ", "row_ok = "), "NaN"),
    # off by one: the block of (c, k) starts 9 floats later
    "weight_load": (lambda c: c.replace("(c * K + k) * 9", "(c * K + k + 1) * 9"), "NaN"),
    # off by one at the right end: x + PAD <= OW reads one column past the row
    "inside_test": (lambda c: c.replace("x + PAD < OW", "x + PAD <= OW"), "Not yet"),
    # the bounds check dropped: reads outside the input (the NaN guard)
    "wino_tile_padding": (lambda c: c.replace("(h >= 0 && h < IH && x_ >= 0 && x_ < IW)", "(1)"), "NaN"),
    # the lower row bound dropped: reads before dy (the NaN guard)
    "tile_copy": (lambda c: c.replace("oh >= 0 && ", ""), "NaN"),
    # a swizzle over 4 rows, not 8: right values, but more store passes than needed
    "slab_swizzle": (lambda c: c.replace("(CB / 4 - 1)", "3"), "extra passes"),
    # E[x^2] - E[x]^2: right near 0, wrong near 1000
    "bn_variance": (lambda c: c.replace("const float d = x[(n * C + c) * HW + i] - mean;\n",
                                        "const float d = x[(n * C + c) * HW + i];\n").replace(
        "m2 / count + eps", "m2 / count - mean * mean + eps"), "around 1000"),
}


@pytest.mark.parametrize("name", sorted(GAPS))
def test_kernel_gap(name, own_ctx, capsys):
    g = kernel_gap(name)
    assert "the gap" in str(g.show())
    assert g.check(_right(name), ctx=own_ctx), capsys.readouterr().out
    capsys.readouterr()
    mutate, says = KERNEL_WRONG[name]
    wrong = mutate(_right(name))
    assert wrong != _right(name), "the mutation did not apply"
    assert not g.check(wrong, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and says in out, out
    assert not g.check("  # YOUR CODE HERE\n  raise NotImplementedError()", ctx=own_ctx)
    assert capsys.readouterr().out.startswith("Not answered yet")
    assert not g.check("    this is not C;", ctx=own_ctx)
    assert "does not compile" in capsys.readouterr().out


def test_step_flops_exercise_check(capsys):
    from helpers.chapters.exercises import check_step_flops

    def right(cfg):
        total = 0
        for i, layer in enumerate(cfg.layers()):
            n, c, h, w = layer["input"]
            _, k, r, s = layer["weight"]
            total += 2 * n * k * h * w * c * r * s * (3 if i else 2)
        return total
    assert check_step_flops(right)
    assert not check_step_flops(lambda cfg: right(cfg) // 2)
    assert "multiply-add is 2 FLOPs" in capsys.readouterr().out
    assert not check_step_flops(lambda cfg: right(cfg) + 1)

    def unanswered(cfg):
        raise NotImplementedError()
    assert not check_step_flops(unanswered)
    assert "Not answered yet" in capsys.readouterr().out


def test_tile_copy_names_a_missing_activation(own_ctx, capsys):
    wrong = _right("tile_copy").replace("GRAD_IN(dy, y, ((n * K + k) * OH + oh) * OW + ow)",
                                        "dy[((n * K + k) * OH + oh) * OW + ow]")
    assert not kernel_gap("tile_copy").check(wrong, ctx=own_ctx)
    out = capsys.readouterr().out
    assert "values differ" in out and "GRAD_IN" in out, out


@pytest.mark.parametrize("code,says", [
    ("#define WADDR(R, cc) ((R) * (WROW + 4) + (cc))", "outside the slab"),           # padding: no room here
    ("#define WADDR(R, cc) ((R) * WROW + ((cc) ^ (R)))", "multiple of 4"),            # float4s broken
    ("#define WADDR(R, cc) ((R) * WROW + (cc) % 16)", "share word"),                   # two weights, one word
    ("#define WADDR(R, cc) ((R) ? (cc) : 0)", "integer arithmetic"),                   # beyond the model
    ("#define WADDR(R, cc) ((R) * WROW + (cc))", "extra passes"),                      # right, but conflicted
])
def test_slab_swizzle_names_the_problem_before_or_after_the_kernel(code, says, own_ctx, capsys):
    assert not kernel_gap("slab_swizzle").check(code, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and says in out, out


def test_slab_swizzle_reads_other_argument_names(ctx, capsys):
    code = "#define WADDR(row, c) ((row) * CB + (((c) / 4 ^ (row) % 8) << 2) + (c) % 4)"
    assert kernel_gap("slab_swizzle").check(code, ctx=ctx), capsys.readouterr().out


def test_slab_swizzle_names_unparenthesized_macro_arguments(own_ctx, capsys):
    # right as arithmetic, wrong as a macro: WADDR(W_R(i), W_CC(i)) pastes `(i) / 4 % ROWS` for row.
    # On the CPU the values come out wrong; on the H200 the pasted index left the local tile and the
    # kernel faulted: both verdicts carry the hint
    code = "#define WADDR(row, c) (row * CB + ((c / 4 ^ row % 8) << 2) + c % 4)"
    assert not kernel_gap("slab_swizzle").check(code, ctx=own_ctx)
    assert "parentheses" in capsys.readouterr().out


def test_a_kernel_that_faults_is_named_and_the_context_is_not_reused(own_ctx, capsys, monkeypatch):
    """A fault at the launch or the wait (how a GPU reports an address outside the kernel's memory)
    is a verdict with the case's hint and the way out, not a traceback; a later check on that
    context, and a later build, say the context faulted instead of blaming the new code."""
    import helpers.runner
    from helpers.engine.build import KernelBuildError, build
    gap = kernel_gap("slab_swizzle")
    right = _right("slab_swizzle")

    def fault(self):
        raise cl.LogicError("clFinish failed: INVALID_COMMAND_QUEUE")
    with monkeypatch.context() as m:
        m.setattr(ClPlan, "enqueue", fault)
        assert not gap.check(right, ctx=own_ctx)
    out = capsys.readouterr().out
    assert out.startswith("Not yet") and "fault on the device" in out and "INVALID_COMMAND_QUEUE" in out, out
    assert "parentheses" in out and "Restart Kernel" in out, out
    assert not gap.check(right, ctx=own_ctx)          # the launch works again, but the context is marked
    assert "an earlier check stopped with a fault" in capsys.readouterr().out
    with pytest.raises(KernelBuildError, match="A kernel faulted on this context earlier"):
        build(own_ctx, "conv_dgrad/02_naive.cl", source="this is not C")


def test_a_stage_copy_runs_through_plan_stage_without_touching_the_registry(ctx):
    import dataclasses

    import helpers
    from helpers.engine.build import kernel_source
    from helpers.ops.conv_dgrad import random_problem_args
    from helpers.stages import REGISTRY, get_stage
    base = get_stage("conv_dgrad", "naive")
    trial = dataclasses.replace(base, source=lambda jit: kernel_source(base.kernel).replace("continue;", "continue; "))
    before = list(REGISTRY["conv_dgrad"])
    helpers.check_stage("conv_dgrad", trial, ctx=ctx, guard=True, **random_problem_args(1, 3, 5, 4, 2, 3, 1, 1, "none"))
    assert REGISTRY["conv_dgrad"] == before
    with pytest.raises(ValueError, match="belongs to conv_dgrad"):
        get_stage("conv_forward", base)


def test_c_fragment_check_accepts_the_layout_and_names_each_mistake(capsys):
    from helpers.chapters.exercises import check_c_fragment
    right = lambda l: [(l // 4, 2 * (l % 4)), (l // 4, 2 * (l % 4) + 1), (l // 4 + 8, 2 * (l % 4)), (l // 4 + 8, 2 * (l % 4) + 1)]
    assert check_c_fragment(right)
    wrong = {
        "wrong registers": lambda l: [right(l)[i] for i in (0, 2, 1, 3)],
        "swapped": lambda l: [(c, r) for r, c in right(l)],
        "a row is not": lambda l: [((r + 1) % 16, c) for r, c in right(l)],
        "a column is not": lambda l: [(r, (c + 2) % 8) for r, c in right(l)],
        "each lane holds 4": lambda l: right(l)[:2],
    }
    _names_each_mistake(check_c_fragment, wrong, capsys, hidden=str(right(5)))


def test_tf32_product_check_accepts_the_error_and_names_each_mistake(capsys):
    from helpers.chapters.exercises import check_tf32_products
    from helpers.engine.tensor import to_tf32

    def right(a, b):
        exact = a.astype(np.float64) * b
        return np.abs(to_tf32(a).astype(np.float64) * to_tf32(b) - exact) / np.abs(exact)
    assert check_tf32_products(right)
    assert check_tf32_products(lambda a, b: np.abs(to_tf32(a) * to_tf32(b) - a * b) / np.abs(a * b))   # float32 is fine
    wrong = {
        "both operands rounded": lambda a, b: np.abs(to_tf32(a).astype(np.float64) * b - a.astype(np.float64) * b)
        / np.abs(a.astype(np.float64) * b),
        "not the relative error": lambda a, b: np.abs(to_tf32(a).astype(np.float64) * to_tf32(b) - a.astype(np.float64) * b),
        "one relative error per product": lambda a, b: right(a, b)[:10],
    }
    _names_each_mistake(check_tf32_products, wrong, capsys)


def test_nhwc_offsets_check_accepts_the_copy_and_names_each_mistake(capsys):
    from helpers.chapters.exercises import check_nhwc_offsets

    def pixel(n, h, w, r, s, d):
        oh_s, ow_s = h + d["pad"] - r, w + d["pad"] - s
        if oh_s < 0 or ow_s < 0 or oh_s % d["stride"] or ow_s % d["stride"]:
            return None
        oh, ow = oh_s // d["stride"], ow_s // d["stride"]
        return (oh, ow) if oh < d["OH"] and ow < d["OW"] else None

    def right(n, h, w, r, s, k, d):
        p = pixel(n, h, w, r, s, d)
        return None if p is None else ((n * d["OH"] + p[0]) * d["OW"] + p[1]) * d["K"] + k
    assert check_nhwc_offsets(right)

    def nchw(n, h, w, r, s, k, d):
        p = pixel(n, h, w, r, s, d)
        return None if p is None else ((n * d["K"] + k) * d["OH"] + p[0]) * d["OW"] + p[1]

    def no_stride_test(n, h, w, r, s, k, d):
        oh, ow = (h + d["pad"] - r) // d["stride"], (w + d["pad"] - s) // d["stride"]
        ok = h + d["pad"] - r >= 0 and w + d["pad"] - s >= 0 and oh < d["OH"] and ow < d["OW"]
        return ((n * d["OH"] + oh) * d["OW"] + ow) * d["K"] + k if ok else None

    def never_none(n, h, w, r, s, k, d):
        o = right(n, h, w, r, s, k, d)
        return 0 if o is None else o
    wrong = {
        "lies in NCHW": nchw,
        "the wrong channel": lambda *a: None if right(*a) is None else right(*a) - a[5] + (a[5] + 1) % a[6]["K"],
        "return None": no_stride_test,
        "zero-filled": never_none,
        "the wrong pixel": lambda *a: None if right(*a) is None else right(*a) + a[6]["K"],
        "which (oh, ow)": lambda *a: None,
    }
    _names_each_mistake(check_nhwc_offsets, wrong, capsys)


def test_box_starts_check_accepts_the_phases_and_names_each_mistake(capsys):
    from helpers.chapters.exercises import check_box_starts

    def right(i0, ph, r, stride, pad):
        return None if (ph + pad - r) % stride else i0 + (ph + pad - r) // stride
    assert check_box_starts(right)
    wrong = {
        "add i0": lambda i0, ph, r, s, p: None if (ph + p - r) % s else (ph + p - r) // s,
        "skips the tap": lambda i0, ph, r, s, p: i0 + (ph + p - r) // s,
        "divide by the stride": lambda i0, ph, r, s, p: None if (ph + p - r) % s else i0 * s + ph + p - r,
        "does reach the phase": lambda *a: None,
        "not the row of dy": lambda i0, ph, r, s, p: None if (ph + p - r) % s else i0 + (r - ph - p) // s,
    }
    _names_each_mistake(check_box_starts, wrong, capsys)


def test_check_stage_names_a_fault_on_the_device(own_ctx, monkeypatch):
    """A learner's edited stage that faults (check_stage, the notebooks' one way to run a stage and
    check it) raises an error that says what happened and what to do, and marks the context."""
    import helpers
    import helpers.runner
    from helpers.engine.devices import faulted
    from helpers.ops.conv_dgrad import random_problem_args

    def fault(self):
        raise cl.LogicError("clFinish failed: INVALID_COMMAND_QUEUE")
    monkeypatch.setattr(ClPlan, "enqueue", fault)
    with pytest.raises(RuntimeError, match="02_naive stopped with a fault on the device.*Restart Kernel"):
        helpers.check_stage("conv_dgrad", "naive", ctx=own_ctx, **random_problem_args(1, 3, 5, 4, 2, 3, 1, 1, "none"))
    assert faulted(own_ctx)
