"""Two things side by side from results/: a stage with a `-D` switch off and on (two tagged runs
of one session, `python -m helpers.bench ... --defines NAME=0 --tag name0`, then `=1` and `name1`;
results/README.md lists them), and two stages of one run beside the vendor library. Chapters 10
(ROWCOPY), 12 (PREFETCH) and 12a (F(2x2) against F(4x4)) print them.

    print("\\n".join(pair_table("conv_forward", "winograd6", "PREFETCH")))
    print("\\n".join(stage_pair_table("conv_dgrad", "vgg16", "winograd", "winograd4", tag="wino4")))
"""
from __future__ import annotations

from .results import device_label, find
from .summary import geomean, vendor_name


def recorded_pairs(op: str, layer_set: str, name: str, device_type: str | None = "GPU",
                   activation: str | None = None, tags: tuple | None = None) -> list[tuple[dict, dict]]:
    """(run with NAME=0, run with NAME=1) for each device on which both are recorded (with
    ``activation``, only runs made with that activation). ``tags``: the two runs' tags, where they
    are not name0 and name1 (a switch timed on top of another, or two switched together)."""
    def runs(tag):
        return {r["device"]["name"]: r for r in find(op, layer_set, device_type, tag=tag)
                if activation is None or r["settings"].get("activation", "none") == activation}
    off, on = (runs(t) for t in (tags or (f"{name.lower()}0", f"{name.lower()}1")))
    return [(off[dev], on[dev]) for dev in off if dev in on]


def stage_pair_rows(op: str, layer_set: str, stage: str, tags: tuple) -> tuple[dict, dict]:
    """The rows of ``stage`` on the layers where it ran itself, by layer, in the two tagged runs of
    a pair (``tags``: the run with the switch off, then on; one device)."""
    off, on = ({r["layer"]: r for run in find(op, layer_set, tag=tag) for r in run["rows"]
                if r["stage"] == stage and r["ran"] == r["key"]} for tag in tags)
    return off, on


def pair_rows(off: dict, on: dict, name: str, switches: tuple | None = None, set_by: tuple = ()) -> list[dict]:
    """Per (layer, stage) of the pair: both medians, their ratio t(0) / t(1) (above 1: the switch
    on is faster), whether the two interquartile ranges are apart (do not overlap), the kernel
    that ran and the path. A row whose stage ran itself must have been built with the switch
    (each of ``switches``, default the one ``name``) at 0 and at 1, and every other JIT
    parameter alike (a fallback stage has no such switch), or at 0 in both: the stage's own rule
    kept it off on that layer (``kept_off``: the same code either way, as a fallback). ``set_by``: the
    parameters from which the launch derives the switch (stage 04's LOAD_LOCAL_W sets its kernel's
    LOAD_LOCAL), which differ with it."""
    switches = switches or (name,)
    times = {(r["layer"], r["key"]): r for r in on["rows"]}
    rows = []
    for r0 in off["rows"]:
        r1 = times[(r0["layer"], r0["key"])]
        kept_off = False
        if r0["ran"] == r0["key"]:
            kept_off = all((r0["defines"].get(sw), r1["defines"].get(sw)) == (0, 0) for sw in switches)
            for sw in switches:
                if (r0["defines"].get(sw), r1["defines"].get(sw)) != (0, 1) and not kept_off:
                    raise ValueError(f"{off['file']}, {on['file']}: {r0['key']} on {r0['layer']} was built with "
                                     f"{sw}={r0['defines'].get(sw)} and {r1['defines'].get(sw)}, not 0 and 1")
            other = {k for k in {*r0["defines"], *r1["defines"]} - set(switches) - set(set_by)
                     if r0["defines"].get(k) != r1["defines"].get(k)}
            if other:
                raise ValueError(f"{off['file']}, {on['file']}: {r0['key']} on {r0['layer']} differs in "
                                 f"{', '.join(sorted(other))} besides {', '.join(switches)}")
        rows.append({"layer": r0["layer"], "key": r0["key"], "ran": r0["ran"], "path": r0["path"], "kept_off": kept_off,
                     "shape": r0["shape"], "defines": r0["defines"], "ms0": r0["median_ms"], "ms1": r1["median_ms"],
                     "pct_copy": (r0.get("pct_copy"), r1.get("pct_copy")),
                     "ratio": r0["median_ms"] / r1["median_ms"],
                     "apart": r0["q3_ms"] < r1["q1_ms"] or r1["q3_ms"] < r0["q1_ms"]})
    return rows


def pair_table(op: str, layer_set: str, name: str, show: tuple = (), tags: tuple | None = None,
               switches: tuple | None = None, set_by: tuple = ()) -> list[str]:
    """The recorded pairs as text: each layer and stage (with the defines named in ``show``), the
    two medians, t(0) / t(1) and whether the interquartile ranges are apart; per stage, the geometric mean and range over the layers where the
    stage ran itself (a fallback runs another stage, the same code either way). ``tags`` and
    ``switches`` and ``set_by`` as in recorded_pairs and pair_rows (``name`` then only labels the columns)."""
    pairs = recorded_pairs(op, layer_set, name, tags=tags)
    if not pairs:
        return [f"No pair of runs with {name}=0 and {name}=1 of {op} over '{layer_set}' is recorded in results/ yet."]
    out = []
    for off, on in pairs:
        rows = pair_rows(off, on, name, switches, set_by)
        out.append(f"{device_label(off)}: {op} over '{layer_set}', {off['file']} and {on['file']}")
        ran = {id(r): r["ran"] + (" (fallback)" if r["path"] == "fallback" else " (kept off)" if r["kept_off"] else "")
               for r in rows}
        wide = max(len("ran"), *map(len, ran.values())) + 2
        key_w = max(18, *(len(r["key"]) + 2 for r in rows))
        lay_w = max(14, *(len(r["layer"]) + 2 for r in rows))
        col = max(14, len(name) + 4)
        out.append(f"  {'layer':<{lay_w}}{'stage':<{key_w}}{'ran':<{wide}}" + "".join(f"{k:>4}" for k in show)
                   + f"{name + '=0':>{col}}{name + '=1':>{col}}{'t(0)/t(1)':>11}  IQRs apart")
        for r in rows:
            out.append(f"  {r['layer']:<{lay_w}}{r['key']:<{key_w}}{ran[id(r)]:<{wide}}"
                       + "".join(f"{r['defines'].get(k, '-') if r['ran'] == r['key'] else '-':>4}" for k in show)
                       + f"{r['ms0']:{col - 3}.4f} ms{r['ms1']:{col - 3}.4f} ms{r['ratio']:11.2f}  {'yes' if r['apart'] else 'no'}")
        for key in dict.fromkeys(r["key"] for r in rows):
            own = [r["ratio"] for r in rows if r["key"] == key and r["ran"] == key and not r["kept_off"]]
            if own:
                out.append(f"  {key}: t({name}=0) / t({name}=1) geometric mean {geomean(own):.2f} over the "
                           f"{len(own)} layers it ran itself (from {min(own):.2f} to {max(own):.2f})")
            kept = [r["layer"] for r in rows if r["key"] == key and r["kept_off"]]
            if kept:
                out.append(f"  {key}: {name} kept off by the stage's own rule on {', '.join(kept)} (the same "
                           f"code in both runs)")
    return out


def _short(defines: dict) -> str:
    """A stage's JIT parameters without those every stage derives from the layer."""
    return " ".join(f"{k}={v}" for k, v in defines.items() if k not in ("KH", "KW", "STRIDE", "ACT"))


def stage_pair_table(op: str, layer_set: str, a: str, b: str, tag: str | None = None) -> list[str]:
    """Stages ``a`` and ``b`` (names or keys) of each recorded GPU run of an op over a layer set:
    per layer both medians, t(a) / t(b) (above 1: b is faster) and each stage's speed against the
    vendor library timed in the same run (above 1: the stage is faster); which kernel ran for each
    stage, the JIT parameters it ran with, and the geometric means and wins over the layers."""
    runs = [r for r in find(op, layer_set, tag=tag)
            if {a, b} <= {x["stage"] for x in r["rows"]} | {x["key"] for x in r["rows"]}]
    if not runs:
        return [f"{op} over '{layer_set}': no recorded GPU run of {a} and {b}" + (f" (tag {tag})" if tag else "")
                + " in results/ yet"]
    out = []
    for run in runs:
        rows = {(x["layer"], s): x for x in run["rows"] for s in (x["stage"], x["key"])}
        layers = [lay for lay in dict.fromkeys(x["layer"] for x in run["rows"]) if (lay, a) in rows and (lay, b) in rows]
        vendor = {v["layer"]: v["median_ms"] for v in run.get("vendor") or []}
        ka, kb = rows[(layers[0], a)]["key"], rows[(layers[0], b)]["key"]
        vname = vendor_name(run) + (" fp32" if run.get("vendor") else "")
        out += [f"{device_label(run)}: {op} over '{layer_set}', {run['file']}",
                f"  `{run['settings'].get('command', '(command not recorded)')}`",
                f"  a = {ka}, b = {kb}; x vendor = the vendor's time / the stage's (above 1: the stage is faster)",
                f"  {'layer':<14}{'a':>18}{'b':>18}{'t(a)/t(b)':>11}{vname:>14}{'a x vendor':>12}{'b x vendor':>12}"]
        for lay in layers:
            ra, rb = rows[(lay, a)], rows[(lay, b)]
            out.append(f"  {lay:<14}{ra['median_ms']:15.4f} ms{rb['median_ms']:15.4f} ms"
                       f"{ra['median_ms'] / rb['median_ms']:11.2f}"
                       + (f"{vendor[lay]:11.4f} ms{ra['x_vendor']:12.2f}{rb['x_vendor']:12.2f}" if lay in vendor else ""))
        for s, k in ((a, ka), (b, kb)):
            ran = [rows[(lay, s)]["ran"] for lay in layers]
            own = sum(r == k for r in ran)
            others = ", ".join(f"{x} on {ran.count(x)}" for x in dict.fromkeys(ran) if x != k)
            params = dict.fromkeys(_short(rows[(lay, s)]["defines"]) for lay in layers if rows[(lay, s)]["ran"] == k)
            out.append(f"  {k}: ran itself on {own} of {len(layers)} layers" + (f" ({others})" if others else "")
                       + f"; JIT parameters {' | '.join(params)}")
        wins = sum(rows[(lay, b)]["median_ms"] < rows[(lay, a)]["median_ms"] for lay in layers)
        line = (f"  geometric means: t(a)/t(b) {geomean(rows[(lay, a)]['median_ms'] / rows[(lay, b)]['median_ms'] for lay in layers):.2f}; "
                f"{kb} faster than {ka} on {wins} of {len(layers)} layers")
        if vendor:
            line += "; x vendor: " + ", ".join(
                f"{k} {geomean(rows[(lay, s)]['x_vendor'] for lay in layers):.2f} (faster on "
                f"{sum(rows[(lay, s)]['x_vendor'] > 1 for lay in layers)} of {len(layers)})" for s, k in ((a, ka), (b, kb)))
        out.append(line)
    return out
