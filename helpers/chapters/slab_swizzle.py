"""Chapter 10's kernel exercise, judged in the bank model: the learner's macro WADDR(R, cc) of
10_swizzle.cl read as integer arithmetic (``_waddr``), checked before any launch (``_slab_layout``:
every weight in its own word, float4s whole, not the chapter's own XOR) and once the kernel is right
(``_slab_banks``: no more store passes than the XOR, and the rotation the task asks for)."""
from __future__ import annotations

import re


# Chapter 10's gap is the macro WADDR(R, cc) of 10_swizzle (its layouts' header, dgrad_slab_swizzle.h,
# inlined): where weight (row R, channel cc) lives in a half of the slab. The bank model reads the
# learner's macro as integer arithmetic at the chapter's tile (C's / and % on non-negative numbers
# are Python's // and %). The exercise asks
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
