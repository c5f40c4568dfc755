"""`python -m helpers.train`: train the chapter-15 network on a device and record the run, time
another network's training step against PyTorch's and record that, or train a small ResNet built
from helpers.torch's modules beside the same ResNet on torch.nn's layers (deep dive 15c).

    python -m helpers.train --device nvidia --size full --out results/training_nvidia-h200.json
    python -m helpers.train --network resnet_stage --device nvidia --size full \\
        --out results/training_resnet_stage_nvidia-h200.json
    python -m helpers.train --network torch_resnet --device nvidia --size full \\
        --out results/training_torch_resnet_nvidia-h200.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..analysis import names
from ..engine.devices import NoDeviceError
from . import model, resnet_stage
from .run import record, verdict

NETWORKS = ("digits", "resnet_stage", "torch_resnet")


def torch_device_default() -> str | None:
    """cuda where PyTorch has it, else its CPU, else None (PyTorch not installed)."""
    try:
        import torch
    except ImportError:
        return None
    return "cuda" if torch.cuda.is_available() else "cpu"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.train", description=__doc__.splitlines()[0])
    ap.add_argument("--network", choices=NETWORKS, default="digits",
                    help="digits: chapter 15's network, trained; resnet_stage: one step of a ResNet stage, timed; "
                         "torch_resnet: a ResNet of helpers.torch's modules trained beside torch.nn's (needs PyTorch)")
    ap.add_argument("--device", default=None, help="OpenCL device: an index P:D or part of its name")
    ap.add_argument("--size", choices=("ci", "small", "full"), default="full", help="ci: torch_resnet only")
    ap.add_argument("--epochs", type=int, default=None, help="digits only")
    ap.add_argument("--repeats", type=int, default=20, help="resnet_stage only: timed steps")
    ap.add_argument("--torch-device", default=None, help="PyTorch's device (default: cuda when it has one)")
    ap.add_argument("--out", default=None, help="JSON path (default results/training_[<network>_]<device>.json; "
                                                "- prints only)")
    args = ap.parse_args(argv)
    if args.epochs is not None and args.epochs < 1:
        ap.error(f"--epochs must be >= 1, got {args.epochs}")
    if args.repeats < 3:
        ap.error(f"--repeats must be >= 3 to report a median and a spread, got {args.repeats}")
    if args.size == "ci" and args.network != "torch_resnet":
        ap.error("--size ci is torch_resnet's (a few steps for a CPU); the other networks take small or full")
    torch_device = args.torch_device or torch_device_default()
    if args.network == "torch_resnet" and torch_device is None:
        ap.error("--network torch_resnet needs PyTorch: python -m pip install torch")
    try:
        if args.network == "torch_resnet":
            from . import torch_resnet
            if args.device is not None:      # helpers.torch's stages run on the course's device: COURSE_DEVICE
                os.environ["COURSE_DEVICE"] = args.device
            out = torch_resnet.record(torch_resnet.SIZES[args.size], args.size, torch_device,
                                      progress=sys.stderr.isatty())
            print(torch_resnet.summary(out))
        elif args.network == "resnet_stage":
            cfg = resnet_stage.FULL if args.size == "full" else resnet_stage.SMALL
            out = resnet_stage.measure(cfg, args.device, torch_device, repeats=args.repeats)
            print(resnet_stage.summary(out))
        else:
            cfg = model.FULL if args.size == "full" else model.SMALL
            if args.epochs:
                cfg = model.Config(**{**cfg.__dict__, "epochs": args.epochs})
            out = record(cfg, args.device, torch_device or "cpu", progress=sys.stderr.isatty())
            c = out["course"]
            print(f"{c['device']['name']}: {len(c['losses'])} steps, loss {c['losses'][0]:.3f} -> {c['losses'][-1]:.3f}, "
                  f"test accuracy {c['accuracy'][-1]:.3f}, median step {sorted(c['step_ms'])[len(c['step_ms']) // 2]:.2f} ms, "
                  f"{c['launches_per_step']} launches and {sum(c['transfers_per_step'].values())} transfers per step")
            if "comparison" in out:
                print(verdict(out["comparison"]))
    except (NoDeviceError, ValueError, TypeError) as e:      # a device not found, a refused problem
        print(f"python -m helpers.train: {e}", file=sys.stderr)
        return 2
    out["size"] = args.size
    if args.out != "-":
        network = None if args.network == "digits" else args.network
        path = Path(args.out) if args.out else names.path(names.training(out["device"]["name"], network))
        path.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
