"""helpers.torch: PyTorch modules on the course's stages, against torch.nn.functional.

Random layers (groups, stride, padding, dilation, bias; 1-D, 2-D and 3-D) through Conv1d/2d/3d,
and batch norm in training and evaluation: outputs and every gradient (input, weight, bias;
gamma, beta) and the running statistics against PyTorch's own ops from the same parameters; the
weight's layout per group both ways; a small model that trains, step by step beside the same
model on torch's layers. PyTorch is not one of the course's packages: without it these tests are
skipped with the reason, except under COURSE_CI=1 (CI installs it), where that fails.
"""
import os

import numpy as np
import pytest

try:
    import torch
except ImportError:
    if os.environ.get("COURSE_CI") == "1":
        pytest.fail("COURSE_CI=1 but PyTorch is not installed: pip install torch (the CPU build)",
                    pytrace=False)
    pytest.skip("PyTorch is not installed here (python -m pip install torch); helpers.torch needs it",
                allow_module_level=True)

import torch.nn.functional as F

import helpers.torch as ht
from helpers.engine.check import rtol_for_sum

FUNCTIONAL = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def random_layer(rng, rank: int) -> dict:
    """A layer of PyTorch's kind nobody picked: groups, stride, padding, dilation per axis, bias."""
    groups = int(rng.choice([1, 1, 2, 3]))
    c, k = groups * int(rng.integers(1, 4)), groups * int(rng.integers(1, 4))
    kernel = tuple(int(v) for v in rng.choice([1, 2, 3], rank))
    dilation = tuple(int(v) for v in rng.choice([1, 1, 2], rank))
    stride = tuple(int(v) for v in rng.integers(1, 3, rank))
    padding = tuple(int(rng.integers(0, d * (r - 1) + 1)) for r, d in zip(kernel, dilation))
    size = tuple(int(d * (r - 1) + 1 + rng.integers(0, 6)) for r, d in zip(kernel, dilation))
    return dict(rank=rank, n=int(rng.integers(1, 3)), c=c, k=k, size=size, kernel=kernel, stride=stride,
                padding=padding, dilation=dilation, groups=groups, bias=bool(rng.integers(0, 2)))


CASES = [random_layer(np.random.default_rng(50 + i), rank) for i, rank in enumerate((2, 2, 2, 2, 1, 3))]
# the plain 2-D layer the default stages run (im2col, igemm_phases, igemm_blocked), with a bias
CASES.append(dict(rank=2, n=2, c=3, k=5, size=(7, 6), kernel=(3, 3), stride=(1, 1), padding=(1, 1),
                  dilation=(1, 1), groups=1, bias=True))


def case_id(c) -> str:
    return (f"{c['rank']}d_n{c['n']}c{c['c']}k{c['k']}_{c['size']}_r{c['kernel']}s{c['stride']}p{c['padding']}"
            f"d{c['dilation']}g{c['groups']}{'_bias' if c['bias'] else ''}")


def close(got, want, magnitude, terms, what):
    """The course's per-element bound: |got - want| <= rtol * magnitude (check.rtol_for_sum)."""
    err = (got.detach().double() - want.detach().double()).abs()
    bound = 4 * rtol_for_sum(terms) * magnitude.detach().double() + 1e-30
    worst = float((err / bound).max())
    assert worst <= 1, f"{what}: error {float(err.max()):.3g}, {worst:.2f} times the bound"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_convolution_matches_torch_forward_and_backward(ctx, case):
    c, rank = case, case["rank"]
    torch.manual_seed(0)
    conv = ht.ConvNd(rank, c["c"], c["k"], c["kernel"], stride=c["stride"], padding=c["padding"],
                     dilation=c["dilation"], groups=c["groups"], bias=c["bias"])
    x = torch.randn(c["n"], c["c"], *c["size"], dtype=torch.float64)
    w, b = conv.weight.detach().double(), conv.bias.detach().double() if c["bias"] else None
    geometry = dict(stride=c["stride"], padding=c["padding"], dilation=c["dilation"], groups=c["groups"])

    xd, wd = x.clone().requires_grad_(), w.clone().requires_grad_()
    bd = b.clone().requires_grad_() if b is not None else None
    want = FUNCTIONAL[rank](xd, wd, bd, **geometry)
    dy = torch.randn_like(want)
    want.backward(dy)

    xf = x.float().requires_grad_()
    got = conv(xf)
    got.backward(dy.float())
    plain = rank == 2 and c["groups"] == 1 and c["dilation"] == (1, 1) and len(set(c["padding"])) == 1 \
        and len(set(c["stride"])) == 1
    assert conv.ran == ({"conv_forward": "im2col", "conv_dgrad": "igemm_phases", "conv_wgrad": "igemm_blocked"}
                        if plain else {"conv_forward": "any_shape", "conv_dgrad": "dw_regs", "conv_wgrad": "dw_regs"})

    taps = c["c"] // c["groups"] * int(np.prod(c["kernel"]))
    mag = FUNCTIONAL[rank](x.abs(), w.abs(), b.abs() if b is not None else None, **geometry)
    close(got, want, mag, taps, "output")
    mag_dx = getattr(torch.nn.grad, f"conv{rank}d_input")(x.shape, w.abs(), dy.abs(), **geometry)
    close(xf.grad, xd.grad, mag_dx, c["k"] // c["groups"] * int(np.prod(c["kernel"])), "input gradient")
    mag_dw = getattr(torch.nn.grad, f"conv{rank}d_weight")(x.abs(), w.shape, dy.abs(), **geometry)
    close(conv.weight.grad, wd.grad, mag_dw, c["n"] * int(np.prod(want.shape[2:])), "weight gradient")
    if c["bias"]:
        close(conv.bias.grad, bd.grad, dy.abs().sum(dim=(0, *range(2, dy.dim()))), dy[:, 0].numel(), "bias gradient")


@pytest.mark.parametrize("groups", [1, 2, 3])
def test_the_weight_layout_per_group(groups):
    """PyTorch's (K, C/g, R, S) and the course's (C, K/g, R, S): the course's weight[c, j] joins
    input channel c to output channel g*K/g + j of c's group g; both ways, exactly."""
    k, cg, kg = 6 * groups, 2, 6
    w = torch.arange(k * cg * 3 * 2, dtype=torch.float32).reshape(k, cg, 3, 2)
    course = ht.to_course(w, groups)
    assert course.shape == (cg * groups, kg, 3, 2)
    for c in range(cg * groups):
        g = c // cg
        for j in range(kg):
            assert torch.equal(course[c, j], w[g * kg + j, c % cg])
    assert torch.equal(ht.from_course(course, groups), w)


@pytest.mark.parametrize("mode", ["train", "train_cumulative", "eval", "no_running_stats", "no_affine"])
def test_batch_norm_matches_torch(ctx, mode):
    torch.manual_seed(1)
    kw = dict(momentum=None if mode == "train_cumulative" else 0.3,
              track_running_stats=mode != "no_running_stats", affine=mode != "no_affine")
    bn, ref = ht.BatchNorm2d(5, **kw), torch.nn.BatchNorm2d(5, **kw).double()
    if kw["affine"]:
        with torch.no_grad():
            bn.weight.uniform_(0.5, 2)
            bn.bias.uniform_(-1, 1)
    if kw["track_running_stats"]:
        with torch.no_grad():
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    ref.load_state_dict({k: v.double() if v.is_floating_point() else v for k, v in bn.state_dict().items()})
    if mode == "eval":
        bn.eval()
        ref.eval()
    for step in range(2):                                  # twice: the running statistics move
        x = (torch.randn(3, 5, 4, 7, dtype=torch.float64) * 2 + 1)
        xd, xf = x.clone().requires_grad_(), x.float().requires_grad_()
        want, got = ref(xd), bn(xf)
        dy = torch.randn_like(want)
        want.backward(dy)
        got.backward(dy.float())
        assert bn.ran["batchnorm_forward"] == "one_pass"
        tol = dict(rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(got.double(), want.detach(), **tol)
        torch.testing.assert_close(xf.grad.double(), xd.grad, **tol)
        if kw["affine"]:
            torch.testing.assert_close(bn.weight.grad.double(), ref.weight.grad, **tol)
            torch.testing.assert_close(bn.bias.grad.double(), ref.bias.grad, **tol)
            bn.weight.grad = bn.bias.grad = ref.weight.grad = ref.bias.grad = None
        if kw["track_running_stats"]:
            torch.testing.assert_close(bn.running_mean.double(), ref.running_mean, **tol)
            torch.testing.assert_close(bn.running_var.double(), ref.running_var, **tol)
            assert int(bn.num_batches_tracked) == int(ref.num_batches_tracked)


def test_a_planted_layout_fault_is_caught(ctx, monkeypatch):
    """The forward check fails when the weight reaches the stage in PyTorch's layout: a grouped
    layer whose per-group transpose is left out."""
    c = dict(CASES[0], groups=2, c=4, k=6, bias=False, dilation=(1, 1))
    monkeypatch.setattr(ht, "to_course", lambda w, groups: w.transpose(0, 1).reshape(c["c"], c["k"] // 2, *w.shape[2:])
                        .contiguous())
    with pytest.raises(AssertionError, match="output"):
        test_convolution_matches_torch_forward_and_backward(ctx, c)


def test_stages_are_named_or_refused_when_the_module_is_made(monkeypatch):
    conv = ht.Conv2d(2, 3, 3, stage="direct", dgrad_stage="auto", wgrad_stage="naive")
    assert conv.stages == {"conv_forward": "direct", "conv_dgrad": "auto", "conv_wgrad": "naive"}
    assert all(ht.has_auto(op) for op in ht.DEFAULT_STAGES)         # every op the modules run has auto
    assert ht.Conv2d(2, 3, 3, stage="auto", dgrad_stage="auto", wgrad_stage="auto").stages == dict.fromkeys(
        ("conv_forward", "conv_dgrad", "conv_wgrad"), "auto")
    assert ht.BatchNorm2d(3, stage="auto")
    # an op without auto (as the weight gradient once was) is refused by name when the module is made
    monkeypatch.setitem(ht.REGISTRY, "conv_wgrad", [s for s in ht.REGISTRY["conv_wgrad"] if not s.choose])
    with pytest.raises(ValueError, match="conv_wgrad has no stage 'auto'"):
        ht.Conv2d(2, 3, 3, wgrad_stage="auto")
    with pytest.raises(ValueError, match="has no stage 'nope'"):
        ht.BatchNorm2d(3, stage="nope")
    with pytest.raises(ValueError, match="zeros only"):
        ht.Conv2d(2, 3, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="rank 4"):
        ht.ConvNd(4, 2, 3, 3)


def test_named_stages_run(ctx):
    """Named stages, and the fused bias of a stage with an epilogue (direct), against PyTorch."""
    torch.manual_seed(2)
    conv = ht.Conv2d(3, 4, 3, stride=2, padding=1, stage="direct", dgrad_stage="naive", wgrad_stage="naive")
    x = torch.randn(2, 3, 9, 7, requires_grad=True)
    y = conv(x)
    y.sum().backward()
    assert conv.ran == {"conv_forward": "direct", "conv_dgrad": "naive", "conv_wgrad": "naive"}
    xr = x.detach().clone().requires_grad_()
    wr, br = conv.weight.detach().clone().requires_grad_(), conv.bias.detach().clone().requires_grad_()
    yr = F.conv2d(xr, wr, br, stride=2, padding=1)
    yr.sum().backward()
    for got, want in ((y, yr), (x.grad, xr.grad), (conv.weight.grad, wr.grad), (conv.bias.grad, br.grad)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


class Net(torch.nn.Module):
    """conv -> batch norm -> ReLU, a strided conv -> batch norm -> ReLU, mean pooling, a linear head."""

    def __init__(self, conv, bn):
        super().__init__()
        self.body = torch.nn.Sequential(conv(1, 4, 3, padding=1, bias=False), bn(4), torch.nn.ReLU(),
                                        conv(4, 8, 3, stride=2, padding=1, bias=False), bn(8), torch.nn.ReLU())
        self.head = torch.nn.Linear(8, 10)

    def forward(self, x):
        return self.head(self.body(x).mean(dim=(2, 3)))


def test_a_model_of_these_modules_trains_beside_torch(ctx):
    """Six SGD steps on scikit-learn's digits from the same weights and batches: the losses agree
    with torch's layers step by step, and they fall."""
    from helpers.train.data import digits
    x, y, _, _ = digits(scale=1, seed=0)
    torch.manual_seed(3)
    ours = Net(ht.Conv2d, ht.BatchNorm2d)
    theirs = Net(torch.nn.Conv2d, torch.nn.BatchNorm2d)
    theirs.load_state_dict(ours.state_dict())
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (ours, theirs)]
    losses = {0: [], 1: []}
    for step in range(6):
        xb, yb = torch.from_numpy(x[step * 32:(step + 1) * 32]), torch.from_numpy(y[step * 32:(step + 1) * 32])
        for i, (model, opt) in enumerate(zip((ours, theirs), opts)):
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            losses[i].append(loss.item())
    ours_l, theirs_l = np.array(losses[0]), np.array(losses[1])
    assert np.abs(ours_l - theirs_l).max() <= 1e-4 * np.abs(theirs_l).max(), (ours_l, theirs_l)
    assert ours_l[-2:].mean() < ours_l[:2].mean(), f"the loss did not fall: {ours_l}"
    # the running statistics followed the same batches
    torch.testing.assert_close(ours.body[1].running_var, theirs.body[1].running_var, rtol=1e-4, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs PyTorch with CUDA and an NVIDIA GPU (CUDA "
                                                          "stages take torch's CUDA tensors where they lie)")
def test_cuda_stages_take_torch_cuda_tensors_without_copies(cuda_ctx, monkeypatch):
    """A CUDA stage reads the very memory of PyTorch's tensor (the borrowed buffer's address is the
    tensor's) and returns a CUDA tensor; the forward and input gradient match PyTorch's."""
    seen = []
    real = ht.Borrowed.__init__

    def spy(self, name, array, dtype):
        real(self, name, array, dtype)
        seen.append((name, self.buffer.data.ptr))
    monkeypatch.setattr(ht.Borrowed, "__init__", spy)
    torch.manual_seed(4)
    conv = ht.Conv2d(8, 16, 3, padding=1, bias=False, stage="tc_tf32_nhwc", dgrad_stage="naive_cuda",
                     wgrad_stage="igemm").cuda()
    x = torch.randn(2, 8, 12, 10, device="cuda", requires_grad=True)
    y = conv(x)
    assert y.device.type == "cuda"
    assert ("input", x.data_ptr()) in seen, seen
    dy = torch.randn_like(y)
    y.backward(dy)
    xr = x.detach().clone().requires_grad_()
    yr = F.conv2d(xr, conv.weight.detach(), padding=1)
    yr.backward(dy)
    torch.testing.assert_close(y, yr, rtol=2e-3, atol=2e-3)           # TF32 forward
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-4)
