"""Chapter 13's exercise checks (tensor cores)."""
from __future__ import annotations

import numpy as np

from .verdict import _verdict, exercise


@exercise(closes=("engine.fragments:fragment_owner", "engine.fragments:owner", "engine.fragments:fragment",
                  "engine.fragments:_place", "chapters.pictures_gemm:draw_c_owners"))
def check_c_fragment(answer_fn) -> bool:
    """Chapter 13: (lane) -> the four (row, col) elements of the 16x8 accumulator C of
    mma.sync.m16n8k8 that the lane holds in c0, c1, c2, c3, in that order (row = position m,
    0-15; col = channel n, 0-7), checked for all 32 lanes against the layout in tc.cuh."""
    from ...engine.fragments import fragment_owner
    want = {lane: [None] * 4 for lane in range(32)}
    for row in range(16):
        for col in range(8):
            lane, reg = fragment_owner("C", row, col)
            want[lane][reg] = (row, col)
    for lane in range(32):
        got = [tuple(int(v) for v in e) for e in answer_fn(lane)]
        if got == want[lane]:
            continue
        if len(got) != 4:
            return _verdict(False, "", f"lane {lane}: {len(got)} elements; each lane holds 4 of C's 128 (c0..c3)")
        if sorted(got) == sorted(want[lane]):
            bad = "right elements in the wrong registers: c0 and c1 are neighbours in one row, c2 and c3 the same columns further down"
        elif sorted((c, r) for r, c in got) == sorted(want[lane]):
            bad = "rows and columns swapped: a row of C is a position (16 of them), a column a channel (8)"
        elif [c for _, c in got] == [c for _, c in want[lane]]:
            bad = "the columns are right, a row is not: which group of 4 lanes shares a row, and how far below are c2, c3?"
        elif [r for r, _ in got] == [r for r, _ in want[lane]]:
            bad = "the rows are right, a column is not: the 4 lanes of a group split the 8 columns between them, 2 each"
        else:
            bad = "with g = lane / 4 and t = lane % 4, which row and which pair of columns does the lane own?"
        return _verdict(False, "", f"lane {lane}: {bad}")
    return _verdict(True, "every lane holds 2 adjacent columns of one row, and the same 2 columns 8 rows below", "")


def _tf32_errors(a, b) -> np.ndarray:
    """The relative error of each product a*b of float32 operands both rounded to TF32."""
    from ...engine.tensor import to_tf32
    exact = a.astype(np.float64) * b
    return np.abs(to_tf32(a).astype(np.float64) * to_tf32(b) - exact) / np.abs(exact)


@exercise(closes=("chapters.exercises.ch13:_tf32_errors",))
def check_tf32_products(answer_fn, count: int = 10_000) -> bool:
    """Chapter 13: (a, b) float32 arrays -> the relative error of each product a*b when both
    operands are rounded to TF32 first (to_tf32), against the exact product. Checked on `count`
    random products; when right, prints the largest error beside 2^-10."""
    from ...engine.tensor import to_tf32
    rng = np.random.default_rng(13)
    a, b = rng.standard_normal((2, count)).astype(np.float32)
    exact = a.astype(np.float64) * b
    want = _tf32_errors(a, b)
    got = np.asarray(answer_fn(a.copy(), b.copy()), dtype=np.float64)
    if got.shape != want.shape:
        return _verdict(False, "", f"{got.shape} values for {count} products: one relative error per product")
    # within 2^-22 of each error: the exact product may be taken in float32 (it is rounded by at most
    # 2^-24 there; the product of two TF32 values is exact in float32), nothing coarser
    if np.abs(got - want).max() <= 2.0**-22:
        worst = float(want.max())
        return _verdict(True, f"the largest relative error of {count:,} products is {worst:.3e}; "
                        f"2^-10 = {2.0**-10:.3e} ({worst / 2.0**-10:.1%} of it)", "")
    rounded = to_tf32(a).astype(np.float64) * to_tf32(b)
    if np.abs(got - np.abs(rounded - exact) / np.abs(rounded)).max() <= 2.0**-22:
        bad = "each error is divided by the rounded product; a relative error is relative to the exact one"
    elif float(np.abs(got).max()) <= 2.0**-11 * (1 + 1e-3):
        bad = "no error is above 2^-11, one rounding's worth: are both operands rounded (and not the product)?"
    elif (got < 0).any():
        bad = "some errors are negative: the size of the difference, |rounded - exact|"
    else:
        bad = ("not the relative error of the rounded operands' product: |rounded - exact| / |exact| per product, "
               "with the exact product computed from the unrounded a and b")
    return _verdict(False, "", bad)


@exercise(closes=("chapters.tensor_core_layouts:dy_offset", "chapters.tensor_core_layouts:layout_table"))
def check_nhwc_offsets(answer_fn) -> bool:
    """Chapter 13, step 5: (n, h, w, r, s, k, dims) -> the offset in dy' stored channel-last
    (N, OH, OW, K) of the value that position (n, h, w) of dx reads for tap (r, s) and channel k,
    or None where the tap misses dy. ``dims``: N, K, OH, OW, stride, pad. Checked on every
    position, tap and channel of four 3x3 layers (strides 1 and 2, pads 0 to 2, two of them not
    square) against the definition:
    dy's position (oh, ow) reaches dx at (oh * stride - pad + r, ow * stride - pad + s)."""
    # (N, K, H, W, stride, pad): square and not (OH != OW catches the two swapped), pads 1, 0 and 2
    for n_, k_, hh, ww, stride, pad in ((2, 8, 5, 5, 1, 1), (1, 4, 7, 7, 2, 1), (2, 4, 6, 9, 1, 0),
                                        (1, 4, 9, 6, 2, 2)):
        oh_n, ow_n = (hh + 2 * pad - 3) // stride + 1, (ww + 2 * pad - 3) // stride + 1
        dims = {"N": n_, "K": k_, "OH": oh_n, "OW": ow_n, "stride": stride, "pad": pad}
        reads = {}                        # (n, h, w, r, s, k) -> offset of the value it reads
        for n, oh, ow, r, s, k in np.ndindex(n_, oh_n, ow_n, 3, 3, k_):
            h, w = oh * stride - pad + r, ow * stride - pad + s
            if 0 <= h < hh and 0 <= w < ww:
                reads[(n, h, w, r, s, k)] = ((n * oh_n + oh) * ow_n + ow) * k_ + k
        for n, h, w, r, s, k in np.ndindex(n_, hh, ww, 3, 3, k_):
            got, want = answer_fn(n, h, w, r, s, k, dict(dims)), reads.get((n, h, w, r, s, k))
            if got == want:
                continue
            where = (f"{hh}x{ww} input, stride {stride}, pad {pad}, position (n, h, w) = ({n}, {h}, {w}), "
                     f"tap (r, s) = ({r}, {s}), k = {k}")
            pix = want // k_ if want is not None else 0
            if want is None:
                bad = "no position of dy reaches dx there through this tap: return None (the copy is zero-filled)"
            elif got is None:
                bad = "this tap does reach dy there: which (oh, ow)? (h + pad - r must be a multiple of the stride)"
            elif int(got) == ((n * k_ + k) * oh_n + pix % (oh_n * ow_n) // ow_n) * ow_n + pix % ow_n:
                bad = "that is where the value lies in NCHW; the copy is channel-last, (N, OH, OW, K)"
            elif int(got) == ((n * ow_n + pix % (oh_n * ow_n) // ow_n) * oh_n + pix % ow_n) * k_ + k:
                bad = "OH and OW are swapped: a row of dy' holds OW pixels, an image OH rows of them"
            elif int(got) // k_ == want // k_:
                bad = "the right pixel of dy, the wrong channel: k is the innermost index of the copy"
            elif int(got) % k_ == k:
                bad = "the right channel, the wrong pixel: oh = (h + pad - r) / stride, ow = (w + pad - s) / stride"
            else:
                bad = "not the offset of the value this tap reads: which pixel (oh, ow) of image n, then which channel?"
            return _verdict(False, "", f"{where}: {bad}")
    return _verdict(True, "every position, tap and channel of both layers reads the right value of the "
                    "channel-last copy, and nothing where the tap misses", "")


def _box_start(i0: int, ph: int, r: int, stride: int, pad: int):
    """The definition: the row oh of dy with oh * stride - pad + r = i0 * stride + ph, or None."""
    return next((oh for oh in range(-10, 30) if oh * stride - pad + r == i0 * stride + ph), None)


@exercise(closes=("chapters.tensor_core_layouts:tma_boxes", "chapters.exercises.ch13:_box_start"))
def check_box_starts(answer_fn) -> bool:
    """Chapter 13, step 8: (i0, ph, r, stride, pad) -> the row of dy' where the TMA box of tap r
    starts for a block whose patch starts at row i0 of phase ph (the rows h = i * stride + ph of
    dx), or None where tap r reaches no row of that phase. Checked for strides 1 to 3, pads 0 to 2,
    taps 0 to 4, every phase and three first rows, against the definition: row oh of dy reaches
    row oh * stride - pad + r of dx through tap r (a box may start outside dy: zeros arrive there)."""
    for stride in range(1, 4):
        for pad, r, ph, i0 in np.ndindex(3, 5, stride, 6):
            if i0 not in (0, 1, 5):
                continue
            h = i0 * stride + ph                      # the patch's first row of dx
            want = _box_start(int(i0), int(ph), int(r), stride, int(pad))
            got = answer_fn(int(i0), int(ph), int(r), stride, int(pad))
            if got == want:
                continue
            where = f"stride {stride}, pad {pad}, tap r = {r}, phase ph = {ph}, patch from row i0 = {i0}"
            if want is None:
                bad = ("tap r reaches no row of this phase (h + pad - r is not a multiple of the stride for "
                       "h = i0 * stride + ph): return None, the block skips the tap")
            elif got is None:
                bad = "this tap does reach the phase: which row oh of dy has oh * stride - pad + r = i0 * stride + ph?"
            elif got == want - i0:
                bad = "the box starts at the block's first row: add i0"
            elif got == h + pad - r:
                bad = "that is the row at stride 1; the phase's rows lie a stride apart in dx: divide by the stride"
            else:
                bad = "not the row of dy that reaches the patch's first row: oh * stride - pad + r = i0 * stride + ph"
            return _verdict(False, "", f"{where}: {bad}")
    return _verdict(True, "every stride, pad, tap and phase: each box starts where the definition says, and the "
                    "taps that miss a phase are skipped", "")


class _Barrier:
    """An mbarrier as the ring uses it: it counts completed phases; a wait with parity p returns
    once the phase of parity p has completed, i.e. while the current phase's parity is not p."""
    def __init__(self):
        self.completed = 0

    def passes(self, parity: int) -> bool:
        return self.completed % 2 != parity

    def early(self) -> str:
        """Why a wait passed too soon, in the barrier's own terms."""
        if self.completed == 0:
            return "no phase of the barrier has completed yet, and a wait for parity 1 returns at once"
        return f"the barrier has completed {self.completed} phase{'s' if self.completed > 1 else ''}: that parity's is one of them"


def _wait_problem(barrier: _Barrier, parity, name: str, event: str, harm: str) -> str:
    """A wait on ``barrier`` with ``parity`` for the next phase it completes (``event``): what is
    wrong with it, or "" when it holds until the event and passes after it (the event happens here)."""
    if parity not in (0, 1):
        return "a parity is 0 or 1"
    if barrier.passes(parity):
        return f"that wait on the {name} barrier returns before {event} ({barrier.early()}): {harm}"
    barrier.completed += 1
    if not barrier.passes(parity):
        return f"that wait on the {name} barrier never returns: it waits for a phase the barrier completes only later"
    return ""


@exercise(closes=("chapters.exercises.ch13:_Barrier", "chapters.exercises.ch13:_wait_problem"))
def check_ring_waits(answer_fn, stages_tried=(2, 3, 4), chunks: int = 12) -> bool:
    """Chapter 13b, step 8: (i, stages) -> (slot, full_parity, empty_parity) of chunk i in a ring of
    ``stages`` slots: the slot it lands in, the parity the warpgroups wait for on that slot's *full*
    barrier before reading it, and the parity the copying thread waits for on its *empty* barrier
    before issuing it (None where the slot has held nothing yet). Checked on a model of the
    barriers: each wait must hold while the chunk it guards is not there, and pass once it is."""
    for stages in stages_tried:
        full = [_Barrier() for _ in range(stages)]
        empty = [_Barrier() for _ in range(stages)]
        for i in range(chunks):
            got = answer_fn(i, stages)
            try:
                slot, p_full, p_empty = got
            except (TypeError, ValueError):
                return _verdict(False, "", f"return three values (slot, full parity, empty parity), got {got!r}")
            where = f"{stages} slots, chunk {i}"
            if slot != i % stages:
                return _verdict(False, "", f"{where}: not the slot the chunk lands in (the ring is walked in order, "
                                "slot after slot, back to the first)")
            # the copying thread, before issuing chunk i: the slot's last chunk (i - stages) is still being read
            if i < stages:
                if p_empty is not None:
                    return _verdict(False, "", f"{where}: the slot has held nothing yet, so the copying thread has "
                                    "nothing to wait for" + (" (and with parity 0 the wait would never return: no "
                                                             "phase of the barrier has completed)" if p_empty == 0 else ""))
            elif p_empty is None:
                return _verdict(False, "", f"{where}: the slot still holds chunk {i - stages}; the copying "
                                "thread must wait until the warpgroups have read it")
            else:
                bad = _wait_problem(empty[slot], p_empty, "empty", f"chunk {i - stages} has been read",
                                    "the copy would overwrite it")
                if bad:
                    return _verdict(False, "", f"{where}: {bad}")
            # the warpgroups, before reading chunk i: its bytes have not landed, then they land
            bad = _wait_problem(full[slot], p_full, "full", "the chunk's bytes land",
                                "the warpgroups would read what the slot held before")
            if bad:
                return _verdict(False, "", f"{where}: {bad}")
    return _verdict(True, "each wait holds until its chunk has landed (full) or its slot has been read (empty), "
                    "and then passes, for rings of " + ", ".join(map(str, stages_tried)) + " slots", "")
