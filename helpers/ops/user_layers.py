"""A learner's own layers for the benchmark: a JSON file of layers, or one layer written inline.

    ./course bench --layers my_layers.json           # [{"n": 32, "c": 96, "h": 35, "w": 35, "k": 96}, ...]
    ./course bench --layer "n=32,c=96,h=35,w=35,k=96,kernel=3,stride=1,padding=1"

A convolution layer takes the keys of the named sets (helpers/ops/layers.py): n, c, k and h, w (or
``size``, one extent per spatial axis), and optionally kernel (default 3), stride (1), padding
(kernel // 2, which keeps the size at stride 1), dilation (1), groups (1) and name. kernel,
stride, padding and dilation are an integer or one per axis (inline: ``kernel=1x7``). A
batch-norm layer takes n, c, h, w. Every layer becomes a layer of any shape (layers.nd_layer),
which all three convolutions take; a mistake names the layer and the key, before any work.
"""
from __future__ import annotations

import json
from pathlib import Path

from .layers import bn_layer, nd_layer

CONV_KEYS = {"name", "n", "c", "k", "h", "w", "size", "kernel", "stride", "padding", "dilation", "groups"}
BN_KEYS = {"name", "n", "c", "h", "w"}


def _ints(where: str, key: str, value, rank: int | None = None, low: int = 1) -> tuple:
    vals = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    if not vals or not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        raise ValueError(f"{where}: {key} must be an integer{' or one per axis' if rank else ''}, got {value!r}")
    if any(v < low for v in vals):
        raise ValueError(f"{where}: {key} must be >= {low}, got {value!r}")
    if rank is not None and len(vals) not in (1, rank):
        raise ValueError(f"{where}: {key} has {len(vals)} entries; give one, or one per spatial axis ({rank})")
    return vals


def _label(lay: dict, kind: str) -> str:
    size = "x".join(map(str, lay["size"] if kind == "conv" else (lay["h"], lay["w"])))
    if kind == "bn":
        return f"n{lay['n']} c{lay['c']} {size}"
    kernel, stride = "x".join(map(str, lay["kernel"])), lay["stride"]
    stride = stride if isinstance(stride, int) else "x".join(map(str, stride))
    return f"n{lay['n']} c{lay['c']} {size} k{lay['k']} {kernel} s{stride}" + \
        (f" g{lay['groups']}" if lay["groups"] != 1 else "")


def layer_from(entry, where: str, kind: str = "conv") -> dict:
    """One layer (a dict of the keys above) checked and made a set's layer: kind 'conv' (any
    shape) or 'bn'."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: a layer is an object of keys (n, c, k, h, w, ...), got {type(entry).__name__}")
    allowed = CONV_KEYS if kind == "conv" else BN_KEYS
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown key {', '.join(unknown)}; a {'convolution' if kind == 'conv' else 'batch-norm'} "
                         f"layer takes {', '.join(sorted(allowed))}")
    need = ("n", "c", "k") if kind == "conv" else ("n", "c", "h", "w")
    missing = [k for k in need if k not in entry]
    if kind == "conv" and "size" not in entry and not {"h", "w"} <= set(entry):
        missing.append("h and w (or size)")
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    n, c = _ints(where, "n", entry["n"])[0], _ints(where, "c", entry["c"])[0]
    if kind == "bn":
        h, w = _ints(where, "h", entry["h"])[0], _ints(where, "w", entry["w"])[0]
        lay = bn_layer("", n, c, h) | {"w": w}
        lay["name"] = str(entry.get("name") or _label(lay, "bn"))
        return lay
    size = _ints(where, "size", entry["size"]) if "size" in entry else \
        (_ints(where, "h", entry["h"])[0], _ints(where, "w", entry["w"])[0])
    rank = len(size)
    if not 1 <= rank <= 4:
        raise ValueError(f"{where}: size has {rank} axes; a convolution has 1 to 4")
    kernel = _ints(where, "kernel", entry.get("kernel", 3), rank)
    kernel = kernel * rank if len(kernel) == 1 else kernel
    stride = _ints(where, "stride", entry.get("stride", 1), rank)
    dilation = _ints(where, "dilation", entry.get("dilation", 1), rank)
    padding = _ints(where, "padding", entry.get("padding", tuple(r // 2 for r in kernel)), rank, low=0)
    groups = _ints(where, "groups", entry.get("groups", 1))[0]
    k = _ints(where, "k", entry["k"])[0]
    one = lambda v: v[0] if len(v) == 1 else v
    lay = nd_layer("", n, c, size, k, kernel, one(stride), one(padding), one(dilation), groups)
    lay["name"] = str(entry.get("name") or _label(lay, "conv"))
    return lay


def parse_inline(text: str) -> dict:
    """'n=32,c=96,h=35,w=35,k=96,kernel=1x7' -> {'n': 32, ..., 'kernel': (1, 7)}."""
    entry = {}
    for part in text.split(","):
        key, eq, value = (x.strip() for x in part.partition("="))
        if not eq or not key or not value:
            raise ValueError(f"--layer {text!r}: write KEY=VALUE pairs separated by commas, e.g. "
                             f"n=32,c=96,h=35,w=35,k=96,kernel=3,stride=1,padding=1 (got {part!r})")
        if key == "name":
            entry[key] = value
            continue
        try:
            nums = tuple(int(v) for v in value.split("x"))
        except ValueError:
            raise ValueError(f"--layer {key}={value}: an integer, or one per axis joined by x (e.g. kernel=1x7)") from None
        entry[key] = nums[0] if len(nums) == 1 else nums
    return entry


def user_layers(layers: str | None, layer: str | None, kind: str = "conv") -> tuple[str, list] | None:
    """(name, layers) for ``--layers FILE.json`` or ``--layer TEXT``; None when neither names them
    (a named set, helpers/ops/layers.py). The name is the file's stem, or 'layer'."""
    if layer is not None:
        if layers is not None:
            raise ValueError("--layer and --layers: give one (a layer inline, or a set or a file of layers)")
        return "layer", [layer_from(parse_inline(layer), "--layer", kind)]
    if layers is None or not layers.endswith(".json"):
        return None
    path = Path(layers)
    if not path.is_file():
        raise ValueError(f"--layers {layers}: no such file (a JSON list of layers, or a named set)")
    try:
        entries = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"--layers {layers}: not JSON ({err})") from None
    if not isinstance(entries, list) or not entries:
        raise ValueError(f"--layers {layers}: a JSON list of one or more layers, e.g. "
                         f'[{{"n": 32, "c": 96, "h": 35, "w": 35, "k": 96}}]')
    out = [layer_from(e, f"--layers {layers}, layer {i + 1}", kind) for i, e in enumerate(entries)]
    names = [lay["name"] for lay in out]
    if len(set(names)) != len(names):
        raise ValueError(f"--layers {layers}: two layers are named {sorted(n for n in names if names.count(n) > 1)[0]!r}")
    return path.stem, out
