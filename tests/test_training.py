"""Chapter 15: the training step on the course's stages (helpers/train), on a tiny network."""
from collections import Counter

import numpy as np
import pytest

from helpers.engine import tensor as tensors
from helpers.train import data, model, run, torch_twin
from helpers.train.course import CourseNet

TINY = model.Config(scale=1, batch=8, channels=(4, 8), epochs=1, lr=0.05)


@pytest.fixture(scope="module")
def tiny(request):
    from helpers.engine.devices import get_context
    from tests.conftest import DEVICES
    ctx = get_context(DEVICES[0])
    x, y, _, _ = data.digits(TINY.scale)
    return CourseNet(TINY, ctx), x[:TINY.batch], y[:TINY.batch]


def test_step_gradients_match_the_numpy_reference_and_pytorch(tiny):
    net, x, y = tiny
    params = model.init_params(TINY)
    loss, logits, grads = net.step(params, x, y)
    ref_loss, ref_logits, ref_grads = model.reference_step(params, x, y)
    assert abs(loss - ref_loss) <= 1e-5 * abs(ref_loss)
    assert all(line.endswith("matches") for line in model.compare_gradients(grads, ref_grads))
    if torch_twin.available():
        twin = torch_twin.TorchNet(TINY, params).gradients(x, y)
        assert all(line.endswith("matches") for line in model.compare_gradients(grads, twin))


def test_compare_gradients_catches_a_wrong_gradient(tiny):
    net, x, y = tiny
    params = model.init_params(TINY)
    _, _, grads = model.reference_step(params, x, y)
    wrong = {**grads, "w2": grads["w2"] * np.float32(1.01)}
    lines = model.compare_gradients(wrong, grads)
    assert [line.split()[0] for line in lines if line.endswith("DIFFERS")] == ["w2"]
    assert all(str(grads["w2"].shape) not in line for line in lines)       # the same text at every size
    lines = model.compare_gradients({**grads, "fc_b": grads["fc_b"][:-1]}, grads)
    assert [line.split()[0] for line in lines if line.endswith("DIFFERS")] == ["fc_b"] and "shape" in lines[-1]


def test_loss_decreases_over_a_few_steps(tiny):
    net, x, y = tiny
    net.load(model.init_params(TINY))
    losses = [net.train_step(x, y) for _ in range(6)]         # SGD on the device between them
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < 0.6 * losses[0], losses


def test_a_step_moves_only_the_counted_tensors(tiny):
    """Up: the batch's images and labels. Down: the loss. Everything between stays on the device:
    pooling and its gradient (kernels/train/pool.cl), the head and the loss (head.cl), the update
    (sgd.cl); each op's stage is the chooser's."""
    net, x, y = tiny
    net.load(model.init_params(TINY))
    before = Counter(tensors.TRANSFERS)
    net.train_step(x, y)
    moved = Counter(tensors.TRANSFERS) - before
    assert dict(moved) == {"upload": 2, "read": 1}
    timed = {op for _, op, _ in net._events}
    assert {"relu_pool", "pool_backward", "head_forward", "head_backward", "sgd"} <= timed
    ops = {(c["layer"], c["op"]) for c in net.choices}
    assert ("conv1", "conv_dgrad") not in ops and ("conv2", "conv_dgrad") in ops
    assert {c["how"] for c in net.choices if c["op"] == "conv_dgrad"} == {"auto"}


@pytest.mark.parametrize("shape", [(2, 3, 6, 10), (1, 5, 2, 2), (3, 1, 14, 4)])
def test_pooling_kernels_match_numpy_with_guards(shape):
    """kernels/train/pool.cl against model.py's NumPy pooling (the reference step's), inside guard
    zones, on shapes whose element counts are not multiples of the work-group."""
    from helpers.engine.devices import get_context, get_queue
    from helpers.engine.backends.opencl import DeviceTensor
    from helpers.train.kernels import TrainKernels
    from tests.conftest import DEVICES
    ctx = get_context(DEVICES[0])
    queue = get_queue(ctx)
    rng = np.random.default_rng(1)
    n, c, h, w = shape
    y, g = rng.standard_normal(shape).astype(np.float32), rng.standard_normal((n, c, h // 2, w // 2)).astype(np.float32)
    k = TrainKernels(ctx, queue)
    yt, gt = (DeviceTensor.from_array(ctx, v, guard=True, queue=queue) for v in (y, g))
    at = DeviceTensor(ctx, queue, "a", g.shape, guard=True)
    dyt = DeviceTensor(ctx, queue, "dy", shape, guard=True)
    k.relu_pool(yt, at).enqueue()
    k.pool_backward(gt, dyt).enqueue()
    queue.finish()
    for t in (yt, gt, at, dyt):
        assert t.check_guards() is None, t.check_guards()
    np.testing.assert_allclose(at.read(), model.relu_pool(y), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(dyt.read(), model.pool_backward(g))
    with pytest.raises(ValueError, match="even height and width"):
        k.relu_pool(DeviceTensor(ctx, queue, "odd", (1, 1, 3, 4)), DeviceTensor(ctx, queue, "o", (1, 1, 1, 2)))


def test_comparison_verdict():
    a = {"losses": [2.0, 1.0, 0.5], "accuracy": [0.9]}
    same = run.compare(a, {"losses": [2.0, 1.0000001, 0.5], "accuracy": [0.905]})
    assert same["losses_agree"] and same["accuracy_agrees"] and "DISAGREE" not in run.verdict(same)
    off = run.compare(a, {"losses": [2.0, 1.1, 0.5], "accuracy": [0.8]})
    assert not off["losses_agree"] and not off["accuracy_agrees"]
    assert run.verdict(off).count("DISAGREE") == 2


@pytest.mark.parametrize("cfg", [model.SMALL, model.FULL], ids=["small", "full"])
def test_the_loss_comparison_is_not_swamped_by_rounding(cfg):
    """The comparison with PyTorch allows a relative difference of run.LOSS_RTOL per step over the
    first run.COMPARE_STEPS steps. That is a test of the kernels only if rounding alone stays far
    below it: PyTorch in float32 and in float64, same weights and batches, must differ by less than
    a tenth of it. (A learning rate of 0.05 broke this for the full network: 2e-3 after 20 steps.)"""
    torch = pytest.importorskip("torch")
    xtr, ytr, _, _ = data.digits(cfg.scale, seed=cfg.seed)
    steps = run._steps(cfg, len(ytr))[:run.COMPARE_STEPS]
    losses = {}
    for dtype in (np.float32, np.float64):
        torch.set_default_dtype(torch.float64 if dtype == np.float64 else torch.float32)
        try:
            net = torch_twin.TorchNet(cfg, {k: v.astype(dtype) for k, v in model.init_params(cfg).items()})
            losses[dtype] = np.array([net.step(xtr[b].astype(dtype), ytr[b])[0] for _, b in steps])
        finally:
            torch.set_default_dtype(torch.float32)
    rel = np.abs(losses[np.float32] - losses[np.float64]) / np.abs(losses[np.float64])
    assert rel.max() < run.LOSS_RTOL / 10, rel


def test_batches_are_full_and_reproducible():
    first = data.batches(100, 32, 0)
    assert [len(b) for b in first] == [32, 32, 32]
    assert all((a == b).all() for a, b in zip(first, data.batches(100, 32, 0)))
    assert not (first[0] == data.batches(100, 32, 1)[0]).all()


def test_course_summary_lists_every_recorded_stage():
    from helpers.analysis.results import course_summary, load
    listed = {(r["op"], r["device"], r["stage"]) for r in course_summary()}
    runs = [r for r in load() if r.get("kind") == "bench"]
    assert runs
    for r in runs:
        for row in r["rows"]:
            assert (r["op"], r["device"]["name"].strip(), row["key"]) in listed



def test_record_command_refuses_an_unknown_device_in_one_line(capsys):
    from helpers.train.__main__ import main
    assert main(["--device", "no-such-device", "--out", "-"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-device" in err[0]
