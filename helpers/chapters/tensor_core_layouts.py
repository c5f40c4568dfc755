"""Chapter 13's layouts, modelled on the host: the 16-bit stages' shared tiles under the bank model
(helpers/chapters/banks.py), where dy' lies in step 5's channel-last and interleaved copies, the
boxes of dy' the TMA copies for a block (step 8), and where the TMA store runs (the launch's own
decision, helpers/launch/tensor_cores.py). No GPU needed.
"""
from __future__ import annotations

from ..engine.fragments import ldmatrix_rows
from ..ops import conv_dgrad
from ..ops.layers import layer_set
from ..stages import get_stage
from .banks import passes

BK = 32          # reduction indices per shared row (kernels/conv_dgrad/13_*.cu)


def shared_offset(layout: str, row: int, chunk: int) -> int:
    """Byte offset of 16-byte chunk ``chunk`` (8 values) of shared row ``row`` of a BK = 32 tile:
    'padded' (tc_fp16: rows of 40 values), 'plain' (rows of 32, unpadded), 'swizzled'
    (tc_fp16_ldm: chunk j stored at j ^ ((row / 2) % 4))."""
    if layout == "padded":
        return row * 80 + chunk * 16
    if layout == "plain":
        return row * 64 + chunk * 16
    if layout == "swizzled":
        return row * 64 + (chunk ^ ((row >> 1) & 3)) * 16
    raise ValueError(f"layout is 'padded', 'plain' or 'swizzled', not {layout!r}")


def ldmatrix_lanes(layout: str, ks: int = 0) -> list:
    """Word addresses (4 per lane) of ldmatrix.x4 loading a 16 x 16 A tile at k-step ``ks``:
    lane l names row l % 16, chunk ks / 8 + l / 16 (what the fragment layouts ask: ldmatrix_rows).
    Served 8 lanes (one 8x8 matrix) per part."""
    return [[shared_offset(layout, row, ks // 8 + chunk) // 4 + i for i in range(4)]
            for row, chunk in ldmatrix_rows("A")]


def row_store_lanes(layout: str, chunk: int = 0) -> list:
    """Word addresses of a warp's 16-byte stores of the gathered rows: lane l writes chunk
    ``chunk`` of row l (each thread owns one position's row)."""
    return [[shared_offset(layout, lane, chunk) // 4 + i for i in range(4)] for lane in range(32)]


def bank_table() -> list[tuple]:
    """(access, layout, passes, conflict-free passes) for the 16-bit stages' shared accesses."""
    rows = []
    for access, lanes_of in (("ldmatrix.x4 of A", ldmatrix_lanes), ("16-byte row stores", row_store_lanes)):
        for layout in ("padded", "plain", "swizzled"):
            rows.append((access, layout, passes(lanes_of(layout)), 4))
    return rows


def dy_offset(layout: str, dims: dict, n: int, h: int, w: int, k: int) -> int:
    """Where dy'[n, k, h, w] lies (in values) in step 5's copies: "nhwc" (N, OH, OW, K) or
    "nchw32" (N, KR/32, OH, OW, 32), KR = K padded to a multiple of 32 (13_tc_nhwc.cu: ILV)."""
    K, OH, OW = dims["K"], dims["OH"], dims["OW"]
    if layout == "nhwc":
        return ((n * OH + h) * OW + w) * K + k
    groups = -(-K // 32)
    return (((n * groups + k // 32) * OH + h) * OW + w) * 32 + k % 32


def layout_table(K: int, OH: int, OW: int, size: int = 2) -> list[tuple]:
    """(what, channel-last, interleaved) for a layer with K channels of OH x OW: the distances (in
    bytes of ``size``-byte values) that decide what one step of the product reads, and the padding."""
    d = {"K": K, "OH": OH, "OW": OW}

    def apart(layout, a, b):           # bytes from dy'[0, a] to dy'[0, b], a and b as (h, w, k)
        return (dy_offset(layout, d, 0, *b) - dy_offset(layout, d, 0, *a)) * size

    kr = -(-K // 32) * 32
    both = ("nhwc", "nchw32")
    return [("32 channels of one pixel", *(f"{apart(l, (0, 0, 0), (0, 0, 31)) + size} B in a row" for l in both)),
            ("to the same channels one pixel on", *(f"{apart(l, (0, 0, 0), (0, 1, 0)):,} B" for l in both)),
            ("to the next 32 channels", *(f"{apart(l, (0, 0, 0), (0, 0, 32)):,} B" for l in both)),
            ("32 channels of 128 pixels in a row", f"128 runs of {32 * size} B", f"one run of {128 * 32 * size:,} B"),
            ("channels the product reduces over", f"{K}", f"{kr} ({kr - K} zeros)" if kr > K else f"{kr}")]


def tma_boxes(h0: int, w0: int, ph: int, pw: int, size: tuple, kernel: int = 3, pad: int = 1) -> list[dict]:
    """For a block whose patch starts at row h0, column w0 of dx (PH x PW positions per image;
    13_tc_nhwc.cu: TMA), the box of dy' each tap (r, s) copies: its first row and column in dy
    (h0 + pad - r, w0 + pad - s) and how many of its PH x PW positions lie outside the image of
    ``size`` (OH, OW), which the TMA fills with zeros instead of reading."""
    out = []
    for r in range(kernel):
        for s in range(kernel):
            top, left = h0 + pad - r, w0 + pad - s
            inside = (sum(0 <= top + i < size[0] for i in range(ph)) * sum(0 <= left + j < size[1] for j in range(pw)))
            out.append({"tap": (r, s), "row": top, "col": left, "zeros": ph * pw - inside})
    return out


def tma_store_layers(sets=("resnet50", "vgg16")) -> list[dict]:
    """Per layer (at its batch) and TMA stage: its patch, whether the product writes dx by the TMA
    store (TMA_STORE as the launch sets it) and, where not, why (helpers/launch/tensor_cores.py:
    tma_store_off). Decided on the host: no GPU needed."""
    from ..launch import tensor_cores as launch
    from ..runner import jit_defines, prepare
    out = []
    for set_name in sets:
        for lay in layer_set(set_name):
            p = prepare("conv_dgrad", **conv_dgrad.layer_args(lay))
            for stage in ("tc_tf32_tma", "tc_fp16_tma", "tc_bf16_tma"):
                s = get_stage("conv_dgrad", stage)
                jit = jit_defines(s, p, s.defines)
                out.append({"layer": lay["name"], "stage": stage, "precision": s.precision,
                            "patch": launch.tma_patch(p), "store": bool(jit["TMA_STORE"]),
                            "why": launch.tma_store_off(p, s.defines, 4 if jit.get("TF32") else 2)})
    return out
