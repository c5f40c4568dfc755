"""Checks that a kernel exercise's answer does what its chapter teaches, not only what it computes.

A gap's ``lesson`` runs once the learner's kernel matches the reference with its guard zones
intact: (gap, code, ctx) -> (ok, message). Right values can come the slow way (nine scalar loads
where the chapter teaches one vector load; a vector path that never runs; a copy whose neighbouring
work-items read scattered addresses), so each lesson proves its point from the learner's code:

- ``vector_weights`` (chapter 04) probes the kernel: a copy of it whose vloadN tag the values they
  return must find weights 0..7 of a block in lanes 0..7 of one vload8 and weight 8 read plainly,
  whatever the learner's lines are written like (a vload8 that never runs counts for nothing);
- ``vector_path`` (chapter 05) probes the kernel: a copy of it that writes each work-item's
  ``inside`` into dx and returns must find the 3-wide path taken by every work-item whose window
  lies inside its row, and by no other;
- ``coalesced_copy`` (chapter 09) probes the kernel: a copy of it in which every read of dy
  (``GRAD_IN``) of one work-group writes its address into dx, so the addresses each warp of 32
  consecutive work-items reads are counted in 128-byte segments against the chapter's copy.
"""
from __future__ import annotations

import numpy as np


WIDTHS = (2, 3, 4, 8, 16)      # the vloadN the weights probe tags


def _tagged_loads() -> str:
    """OpenCL C that makes every vloadN of global float data return its values plus 100*N + lane:
    a value read through lane j of a vload8 comes back 800 + j larger (the weights probe's are below
    1). Each tagging function calls the real vloadN (a builtin, or a macro in some compilers) before
    the name is taken over by a macro."""
    out = []
    for n in WIDTHS:
        tags = ", ".join(f"{100 * n + j}.0f" for j in range(n))
        out += [f"inline float{n} tagged_vload{n}(size_t i, const __global float* p) "
                f"{{ return vload{n}(i, p) + (float{n})({tags}); }}",
                f"#undef vload{n}", f"#define vload{n}(i, p) tagged_vload{n}(i, p)"]
    return "\n".join(out) + "\n"


def _runs(tags: list) -> str:
    """'weights 0-3: vload4, 4-7: vload4, 8: plain reads' from the probe's tag of each weight (a
    run ends where the kind of load changes or a vector load's lanes start again)."""
    out, start = [], 0
    for i in range(1, len(tags) + 1):
        if i == len(tags) or tags[i] // 100 != tags[start] // 100 or (tags[i] and tags[i] != tags[i - 1] + 1):
            kind = f"vload{tags[start] // 100}" if tags[start] else "plain reads"
            out.append((f"{start}" if i - 1 == start else f"{start}-{i - 1}") + f": {kind}")
            start = i
    return "weights " + ", ".join(out)


def vector_weights(gap, code, ctx):
    """Chapter 04: one 8-wide load and one scalar, as the kernel runs them. A probe copy of the
    kernel tags every vloadN's values (helpers above: lane j of a vloadN adds 100*N + j) and writes
    the 9 weights of one block that the learner's lines put into ``wk``: weights 0..7 must carry
    lanes 0..7 of one vload8 and weight 8 no tag (a plain read). What the code says does not count,
    only what runs: a vload8 that never runs, two vload4 or nine plain reads are told apart."""
    from ..ops.conv_dgrad import random_problem_args
    include = '#include "dgrad.h"'
    src = gap.source(code, "    if (k == K - 1) {   /* probe: the block (C-1, K-1) of work-item 0 */\n"
                           "        if (hw == 0 && n == 0 && c == C - 1)\n"
                           "            for (int i = 0; i < 9; i++) dx[i] = wk.s[i];\n"
                           "        return;\n    }")
    if include not in src:
        raise RuntimeError("the weights probe expects 04_weight_vec.cl's include of dgrad.h")
    args = random_problem_args(1, 2, 3, 3, 3, 3, 1, 1, "none", seed=4)
    weight = args["weight"]
    args["weight"] = ((np.arange(weight.size) + 1) / 64).astype(np.float32).reshape(weight.shape)
    got, _ = _probe(gap, src.replace(include, _tagged_loads() + include, 1), ctx, args)
    values = np.asarray(got, np.float64).reshape(-1)[:9]
    first = ((weight.shape[0] - 1) * weight.shape[1] + weight.shape[1] - 1) * 9
    tags = np.floor(values)
    if np.isnan(values).any() or not np.array_equal(np.round((values - tags) * 64) - 1, first + np.arange(9)):
        return False, ("the weights probe could not read the 9 weights your lines put into wk (it writes wk.s[0..8] "
                       "of one block): keep them in `weights3x3 wk`")
    tags = [int(t) for t in tags]
    if tags == [800 + j for j in range(8)] + [0]:
        return True, "the 9 weights come through one 8-wide load and one scalar"
    if not any(tags[:8]):
        why = ("no vector load runs: the 9 weights arrive one float at a time (a vload8 in your lines that never "
               "runs does not count)")
    elif any(t // 100 != 8 for t in tags[:8] if t):
        why = f"the weights arrive through narrower loads ({_runs(tags)}): weights 0..7 need one 8-wide load"
    elif tags[:8] != [800 + j for j in range(8)]:
        why = (f"weights 0..7 do not come from one 8-wide load of the block's first float ({_runs(tags)}; a vload8 "
               f"returns 8 consecutive floats, lane j holding float j)")
    else:
        why = "weight 8 comes from a second vector load: one plain read of the block's last float suffices"
    return False, why


def _probe(gap, text: str, ctx, args: dict) -> np.ndarray:
    """Run a probe copy of the gap's kernel (``text``) on ``args``; its one output, as an array."""
    from ..runner import plan_stage
    plan = plan_stage(gap.op, gap.trial(text), ctx=ctx, guard=True, **args)
    plan.enqueue()
    plan.queue.finish()
    (out,) = plan.outputs().values()
    return out, plan


def vector_path(gap, code, ctx):
    """Chapter 05: the work-items whose three dy columns lie inside the row take the 3-wide path."""
    from ..ops.conv_dgrad import random_problem_args
    from ..ops.reference import output_size
    from .direct import takes_vector_path
    probe = "    dx[((n * C + c) * H + h) * W + x] = inside ? 1.0f : 0.0f;   /* probe */\n    return;"
    for w, pad in ((9, 1), (7, 0), (6, 2)):
        got, _ = _probe(gap, gap.source(code, probe), ctx, random_problem_args(1, 1, 5, w, 2, 3, 1, pad, "none", seed=1))
        want = [takes_vector_path(x, output_size(w, 3, 1, pad), 3, 1, pad) for x in range(w)]
        mine = [bool(v == 1.0) for v in got[0, 0, 0]]
        if mine != want:
            n_vec, n_mine = sum(want), sum(m and v for m, v in zip(mine, want))
            extra = sum(m and not v for m, v in zip(mine, want))
            if extra:
                return False, (f"on a {w}-wide row with padding {pad} your test sends {extra} work-item(s) whose "
                               f"window leaves the row to the 3-wide path")
            return False, (f"on a {w}-wide row with padding {pad}, {n_vec} work-items may read their window with "
                           f"one 3-wide load, and your test sends {n_vec - n_mine} of them to the scalar loop "
                           f"(the vector path is this stage's lesson: which columns does the window cover?)")
    return True, "the 3-wide path runs exactly where the window lies inside the row (probed on 3 rows)"


SEGMENT = 32        # floats in a 128-byte segment: what one warp-wide memory transaction moves
WARP = 32


def _segments(address: dict, ls: int, total: int) -> int:
    """128-byte segments the warps of one work-group touch in one chunk's copy: element i is read by
    work-item i % ls on trip i // ls; a warp is 32 consecutive work-items of one trip."""
    warps = {}
    for i in range(total):
        warps.setdefault((i // ls, (i % ls) // WARP), set()).add(address[i] // SEGMENT)
    return sum(len(s) for s in warps.values())


def coalesced_copy(gap, code, ctx):
    """Chapter 09: the copy's consecutive work-items read consecutive addresses of dy."""
    from ..ops.conv_dgrad import random_problem_args
    src = gap.source(code)
    store = "dx[((n * C + c) * H + h) * W + x] = acc;"
    if store not in src or '#include "course.h"' not in src:
        raise RuntimeError("the tile-copy probe expects 09_local_tile.cl's final store and include")
    # The tile (1, 1) of image 0 and channel block 0, on a plane of at least 3 x 3 tiles: its whole
    # patch lies inside dy, so each of its elements is one read of dy.
    n_, c_, h_, w_, k_ = 1, 4, 12, 64, 8
    probe = ('#include "course.h"\n#undef GRAD_IN\n'
             '#define GRAD_IN(dy_, y_, o_) ((tx == 1 && ty == 1 && n == 0 && get_group_id(1) == 0 && k0 == 0) '
             '? (dx[i] = (float)(o_), 0.0f) : 0.0f)')
    text = src.replace('#include "course.h"', probe, 1).replace(store, ";   /* probe: no store */")
    got, plan = _probe(gap, text, ctx, random_problem_args(n_, c_, h_, w_, k_, 3, 1, 1, "none", seed=2))
    d = plan.jit_defines
    tx, ty, kc, ls = d["TX"], d["TY"], d["KC"], d["TX"] * d["TY"] * d["CB"]
    if -(-w_ // tx) < 3 or -(-h_ // ty) < 3 or kc > k_:
        raise RuntimeError(f"the tile-copy probe needs 3 x 3 tiles and KC <= K; the tile is {d}")
    ph, pw, oh0, ow0 = ty + 2, tx + 2, ty + 1 - 2, tx + 1 - 2
    total = kc * ph * pw
    flat = got.reshape(-1)[:total]
    if np.isnan(flat).any():
        return False, ("the coalescing check follows each read of dy through GRAD_IN (kernels/common/course.h), "
                       "and some patch elements were not read through it: read dy with GRAD_IN")
    mine = {i: int(v) for i, v in enumerate(flat)}
    want = {i: ((i // (ph * pw)) * h_ + oh0 + i // pw % ph) * w_ + ow0 + i % pw for i in range(total)}
    a, b = _segments(mine, ls, total), _segments(want, ls, total)
    if a > b:
        return False, (f"the copy is not coalesced: the warps of one work-group read dy in {a} segments of 128 "
                       f"bytes per chunk, where {b} suffice (consecutive work-items should read consecutive "
                       f"addresses of dy)")
    return True, f"the copy is coalesced ({a} segments of 128 bytes per work-group and chunk)"
