"""`python -m helpers.train`: train the chapter-15 network on a device and record the run.

    python -m helpers.train --device nvidia --size full --out results/training_nvidia-h200.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..analysis import names
from ..engine.devices import NoDeviceError
from . import model
from .run import record, verdict



def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.train", description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="OpenCL device: an index P:D or part of its name")
    ap.add_argument("--size", choices=("small", "full"), default="full")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--torch-device", default=None, help="PyTorch's device (default: cuda when it has one)")
    ap.add_argument("--out", default=None, help="JSON path (default results/training_<device>.json; - prints only)")
    args = ap.parse_args(argv)
    cfg = model.FULL if args.size == "full" else model.SMALL
    if args.epochs:
        cfg = model.Config(**{**cfg.__dict__, "epochs": args.epochs})
    torch_device = args.torch_device
    if torch_device is None:
        try:
            import torch
            torch_device = "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            torch_device = "cpu"
    if args.epochs is not None and args.epochs < 1:
        ap.error(f"--epochs must be >= 1, got {args.epochs}")
    try:
        out = record(cfg, args.device, torch_device, progress=sys.stderr.isatty())
    except (NoDeviceError, ValueError, TypeError) as e:      # a device not found, a refused problem
        print(f"python -m helpers.train: {e}", file=sys.stderr)
        return 2
    out["size"] = args.size
    c = out["course"]
    print(f"{c['device']['name']}: {len(c['losses'])} steps, loss {c['losses'][0]:.3f} -> {c['losses'][-1]:.3f}, "
          f"test accuracy {c['accuracy'][-1]:.3f}, median step {sorted(c['step_ms'])[len(c['step_ms']) // 2]:.2f} ms")
    if "comparison" in out:
        print(verdict(out["comparison"]))
    if args.out != "-":
        path = Path(args.out) if args.out else names.path(names.training(c["device"]["name"]))
        path.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
