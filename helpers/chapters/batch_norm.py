"""Chapter 14 (batch normalization): what NVIDIA's compiler says of stage 06's forward kernel.

    python -m helpers.chapters.batch_norm registers --device nvidia    # records results/engine/registers_one_pass_<device>.json

The forward kernel of stage 06 holds a channel's units in registers; with HOLD_OFFSETS = 1 it also
holds each unit's offset. The registers a work-item needs decide how many work-groups share a
compute unit, and the launch's rule (helpers/launch/batchnorm.py: one_pass_items) rests on the
counts this records: for ITEMS 7, 13 and 25 units, with the offsets held and without.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys

from ..analysis.results import RESULTS
from ..bench import slug
from ..engine.build import build_log
from ..engine.devices import device_info, get_context
from ..stages import get_stage

ITEMS = (7, 13, 25)


def registers(log: str) -> dict:
    """{kernel: registers per work-item} from a build log of NVIDIA's compiler (-cl-nv-verbose:
    "Compiling entry function 'name'", then "Used N registers")."""
    out, name = {}, None
    for line in log.splitlines():
        m = re.search(r"entry function '(\w+)'", line)
        if m:
            name = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            out[name] = int(m.group(1))
    return out


def one_pass_registers(ctx, items=ITEMS, wg: int = 256) -> list[dict]:
    """Registers of stage 06's forward kernel (float4 units, two-pass statistics) per ITEMS and
    HOLD_OFFSETS, built with -cl-nv-verbose (NVIDIA's OpenCL only)."""
    s = get_stage("batchnorm_forward", "one_pass")
    rows = []
    for n in items:
        for hold in (1, 0):
            log = build_log(ctx, s.kernel, {**s.defines, "WG": wg, "ITEMS": n, "VEC4": 1, "HOLD_OFFSETS": hold,
                                            "UPDATE_RUNNING": 1}, ["-cl-nv-verbose"])
            regs = registers(log).get("bn_forward_train")
            if regs is None:
                raise RuntimeError("the compiler's log names no register count: -cl-nv-verbose is NVIDIA's "
                                   "option, and a cached build prints nothing (run with CUDA_CACHE_DISABLE=1)")
            rows.append({"WG": wg, "ITEMS": n, "HOLD_OFFSETS": hold, "registers": regs,
                         "groups_per_unit": min(2048 // wg, 65536 // (wg * regs))})
    return rows


def recorded(device: str = "nvidia-h200") -> dict | None:
    path = RESULTS / "engine" / f"registers_one_pass_{device}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.chapters.batch_norm", description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["registers"])
    ap.add_argument("--device", default="nvidia")
    a = ap.parse_args(argv)
    ctx = get_context(a.device)
    info = device_info(ctx)
    rows = one_pass_registers(ctx)
    path = RESULTS / "engine" / f"registers_one_pass_{slug(info['name'])}.json"
    path.write_text(json.dumps({"command": "CUDA_CACHE_DISABLE=1 python -m helpers.chapters.batch_norm registers "
                                           f"--device {a.device}",
                                "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                                "device": info, "rows": rows}, indent=1) + "\n")
    for r in rows:
        print(r)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
