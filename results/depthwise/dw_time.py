"""Depthwise dgrad/wgrad: the course's stages (checked against a float64 reference computed by
torch, then timed by profiling events) beside PyTorch's own fp32 (TF32 off), per layer."""
import json, os, sys, time
import numpy as np
import torch
import helpers
from helpers.runner import check_plan
from helpers.engine.timing import time_plan
from helpers.engine.backends.opencl import DeviceTensor

OUT = os.environ.get("OUT", "results/depthwise")     # where the JSON and the log go
SMALL = os.environ.get("SMALL") == "1"
DEV = os.environ.get("COURSE_DEVICE", "nvidia")
PHASE = os.environ.get("PHASE", "all")
N = 2 if SMALL else 64
cuda = torch.cuda.is_available()
if cuda:
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
tdev = "cuda" if cuda else "cpu"
MB = [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (192, 28, 2), (384, 14, 1),
      (576, 14, 1), (576, 14, 2), (960, 7, 1)]
LAYERS = [(f"mbv2_dw{c}@{s}" + (f"/s{st}" if st > 1 else ""), c, s, 3, st, 1) for c, s, st in MB] + \
         [(f"convnext_dw{c}@{s}", c, s, 7, 1, 3) for c, s in ((96, 56), (192, 28), (384, 14), (768, 7))]
if SMALL:
    LAYERS = [(n, min(c, 8), min(s, 20), k, st, p) for n, c, s, k, st, p in LAYERS[::3]]
MAIN = {("conv_dgrad", "dw_tiles"): [{"TX": 32, "TY": 8}],
        ("conv_dgrad", "dw_regs"): [{"TX": 8, "TY": 8, "XPW": 4}],
        ("conv_wgrad", "dw_tiles"): [{"TX": 32, "TY": 8, "SPLIT_TARGET": 2048}],
        ("conv_wgrad", "dw_regs"): [{"TX": 8, "TY": 8, "XPW": 4, "SPLIT_TARGET": 2048}],
        ("conv_dgrad", "any_shape"): [{"WG": 256}], ("conv_wgrad", "any_shape"): [{"WG": 64}]}
EXTRA = {("conv_dgrad", "dw_regs"): [dict(TX=a, TY=b, XPW=x) for a, b, x in ((16, 8, 4), (8, 16, 4), (8, 8, 8))],
         ("conv_wgrad", "dw_regs"): [dict(TX=a, TY=b, XPW=x, SPLIT_TARGET=t) for a, b, x, t in
                                     ((8, 8, 4, 8192), (16, 8, 4, 4096), (8, 8, 8, 4096))]}
if os.environ.get("CONFIGS"):          # a JSON file of {"op/stage": [defines, ...]} replacing both
    MAIN = {tuple(k.split("/")): v for k, v in json.load(open(os.environ["CONFIGS"])).items()}
    EXTRA = {}

ctx = helpers.get_context(DEV)
records = []
log = open(os.path.join(OUT, "dw_log.txt"), "a")


def say(*a):
    print(*a, flush=True)
    print(*a, file=log, flush=True)


def save():
    with open(os.path.join(OUT, "dw_times.json"), "w") as f:
        json.dump({"device": ctx.devices[0].name, "torch": torch.__version__,
                   "cudnn": str(torch.backends.cudnn.version()), "batch": N, "records": records}, f, indent=1)


def torch_time(fn):
    if not cuda:
        return None
    from helpers.ops.vendor import time_cuda
    return time_cuda(fn, 5, 20, 256 * 2**20)


states = {}


def layer_state(layer):
    name, c, s, k, st, p = layer
    if name in states:
        return states[name]
    state = states[name] = {}
    g = torch.Generator(device=tdev).manual_seed(0)
    x = torch.randn(N, c, s, s, device=tdev, generator=g)
    w = torch.randn(c, 1, k, k, device=tdev, generator=g) / k
    o = (s + 2 * p - k) // st + 1
    dy = torch.randn(N, c, o, o, device=tdev, generator=g)
    geo = dict(stride=st, padding=p, groups=c)
    gi = torch.nn.grad.conv2d_input
    gw = torch.nn.grad.conv2d_weight
    exp = {"conv_dgrad": ({"grad_input": gi(x.shape, w.double(), dy.double(), **geo).cpu().numpy()},
                          {"grad_input": gi(x.shape, w.double().abs(), dy.double().abs(), **geo).cpu().numpy()}),
           "conv_wgrad": ({"grad_weight": gw(x.double(), w.shape, dy.double(), **geo).cpu().numpy()},
                          {"grad_weight": gw(x.double().abs(), w.shape, dy.double().abs(), **geo).cpu().numpy()})}
    vendor = {"conv_dgrad": torch_time(lambda: gi(x.shape, w, dy, **geo)),
              "conv_wgrad": torch_time(lambda: gw(x, w.shape, dy, **geo))}
    xn, wn, dyn = (t.cpu().numpy() for t in (x, w, dy))
    dev = {k2: DeviceTensor.from_array(ctx, a, name=k2) for k2, a in (("x", xn), ("w", wn), ("dy", dyn))}
    state.update(name=name, exp=exp, vendor=vendor, dev=dev, geo=geo, shape=xn.shape, wshape=wn.shape,
                 bytes=4 * (xn.size + dyn.size))
    for op in vendor:
        v = vendor[op]
        records.append({"layer": name, "op": op, "stage": "pytorch", "defines": {},
                        "median_ms": v and v["median_ms"], "events_median_ms": v and v["events_median_ms"],
                        "q1_ms": v and v["q1_ms"], "q3_ms": v and v["q3_ms"], "kernels": v and v["kernel_names"]})
        say(name, op, "pytorch", v and round(v["median_ms"], 4), v and round(v["events_median_ms"], 4),
            v and v["kernel_names"])
    return state


def run(layer, op, stage, d):
    st = layer_state(layer)
    dv = st["dev"]
    if op == "conv_dgrad":
        args = dict(grad_output=dv["dy"], weight=dv["w"], input_shape=st["shape"])
    else:
        args = dict(input=dv["x"], grad_output=dv["dy"], weight_shape=st["wshape"])
    rec = {"layer": layer[0], "op": op, "stage": stage, "defines": d}
    try:
        plan = helpers.plan_stage(op, stage, ctx=ctx, defines=d, **args, **st["geo"])
        plan.enqueue()
        plan.queue.finish()
        res = check_plan(plan, expected=st["exp"][op])
        t = time_plan(plan, warmup=3, repeats=5 if stage == "any_shape" else 20)
        rec.update(ran=plan.stage.key, path=plan.path, worst_ratio=float(res.worst_ratio), **t.summary())
        rec["GBps"] = st["bytes"] / (t.median_ms * 1e-3) / 1e9
        v = st["vendor"][op]
        if v:
            rec["vs_pytorch"] = v["median_ms"] / t.median_ms
            rec["vs_pytorch_events"] = v["events_median_ms"] / t.median_ms
        del plan
    except Exception as e:
        rec["error"] = f"{type(e).__name__}: {e}"[:600]
    records.append(rec)
    say(layer[0], op, stage, d, rec.get("path"), round(rec.get("median_ms", -1), 4), round(rec.get("vs_pytorch", 0), 2),
        round(rec.get("GBps", 0)), rec.get("error", ""))
    save()


t0 = time.time()
FIRST = {k: v for k, v in MAIN.items() if k[1] == "dw_regs"}
for group in (FIRST, {k: v for k, v in MAIN.items() if k not in FIRST}):
    for layer in LAYERS:
        for (op, stage), ds in group.items():
            for d in ds:
                run(layer, op, stage, d)
    say("group done", time.time() - t0)
for layer in LAYERS:
    for (op, stage), ds in EXTRA.items():
        for d in ds:
            run(layer, op, stage, d)
say("extra done", time.time() - t0)
