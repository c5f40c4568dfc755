"""The training step on the device (helpers/train/course.py, kernels/train/*.cl): each train kernel
against its NumPy reference inside guard zones, with planted faults that must be caught; the whole
step against the NumPy reference step over several steps; what crosses to the host in a step; the
ResNet stage (helpers/train/resnet_stage.py) at its CI size against its NumPy reference step."""
from collections import Counter

import numpy as np
import pytest

from helpers.engine import tensor as tensors
from helpers.engine.kernels import kernel_source
from helpers.engine.check import MismatchError, check_close, rtol_for_sum
from helpers.engine.devices import get_context, get_queue
from helpers.engine.backends.opencl import DeviceTensor
from helpers.runner import GuardViolation
from helpers.train import data, model, resnet_stage, run
from helpers.train.course import CourseNet
from helpers.train.kernels import CLASSES, Arena, TrainKernels
from tests.conftest import DEVICES

TINY = model.Config(scale=1, batch=8, channels=(4, 8), epochs=1, lr=0.05)
# stages quick to build on the CPU, for the runs whose subject is the step, not the chooser's pick
QUICK = {"conv_forward": "direct", "batchnorm_forward": "fused", "batchnorm_backward": "fused",
         "conv_wgrad": "naive", "conv_dgrad": "naive"}


@pytest.fixture(scope="module")
def cq():
    ctx = get_context(DEVICES[0])
    return ctx, get_queue(ctx)


def guarded(cq, array=None, shape=None, name="t"):
    ctx, queue = cq
    if array is not None:
        return DeviceTensor.from_array(ctx, np.ascontiguousarray(array, np.float32), guard=True, queue=queue, name=name)
    return DeviceTensor(ctx, queue, name, shape, guard=True)


def run_and_check_guards(cq, launches, tensors_):
    for launch in launches:
        launch.enqueue()
    cq[1].finish()
    for t in tensors_:
        bad = t.check_guards()
        if bad:
            raise GuardViolation(bad)


def planted(path: str, old: str, new: str) -> dict:
    text = kernel_source(path)
    assert old in text, f"the planted fault's anchor is gone from {path}: {old!r}"
    return {path: text.replace(old, new, 1)}


# --- each kernel against NumPy, inside guard zones ------------------------------------------------

@pytest.mark.parametrize("count", [1, 7, 4099])
def test_relu_in_place_with_guards(cq, count):
    """relu's float4 body and scalar tail: element counts of 4k+1 and 4k+3."""
    x = np.random.default_rng(count).standard_normal(count).astype(np.float32)
    t = guarded(cq, shape=(count,), name="y")
    t.write(x)
    run_and_check_guards(cq, [TrainKernels(*cq).relu(t)], [t])
    np.testing.assert_array_equal(t.read(), np.maximum(x, 0))


def test_relu_planted_fault_caught_by_the_guards(cq):
    """The float4 body taken one element too far writes past the tensor: the guard zone says so."""
    fault = planted("train/pool.cl", "if (4 * i + 3 < count)", "if (4 * i + 3 <= count)")
    t = guarded(cq, shape=(7,), name="y")
    t.write(np.ones(7, np.float32))
    with pytest.raises(GuardViolation, match="after the tensor"):
        run_and_check_guards(cq, [TrainKernels(*cq, sources=fault).relu(t)], [t])


def head_reference(y, fc_w, fc_b, labels):
    """model.py's NumPy head after relu_pool: every value head.cl writes, with the magnitudes of
    their sums (the checker's tolerance scales with them)."""
    feats = model.relu_pool(y)
    n = len(labels)
    loss, logits, dfeat, dw, db = model.head(feats, labels, fc_w, fc_b)
    flat = feats.reshape(n, -1)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    dz = p.copy()
    dz[np.arange(n), labels] -= 1
    dz /= n
    abs_dz = np.abs(dz)
    return {"features": (feats, np.abs(feats)),
            "logits": (logits, np.abs(flat) @ np.abs(fc_w).T + np.abs(fc_b)),
            "dy": (model.pool_backward(dfeat), model.pool_backward((abs_dz @ np.abs(fc_w)).reshape(feats.shape))),
            "grad_w": (dw, abs_dz.T @ np.abs(flat)), "grad_b": (db, abs_dz.sum(axis=0)),
            "loss": (np.array([loss]), np.array([loss]))}


@pytest.mark.parametrize("shape", [(1, 1, 2, 2), (3, 5, 6, 10), (9, 7, 14, 4)])
def test_head_kernels_match_numpy_with_guards(cq, shape):
    """head_forward (relu_pool, linear, softmax, loss terms) and head_backward (dy through pooling's
    gradient, d fc_w, d fc_b, the mean loss) against model.head, on shapes whose feature counts are
    below, above and not a multiple of the work-group, every tensor between guard zones."""
    rng = np.random.default_rng(sum(shape))
    n, c, h, w = shape
    f = c * (h // 2) * (w // 2)
    y = rng.standard_normal(shape).astype(np.float32)
    fc_w = rng.standard_normal((CLASSES, f)).astype(np.float32) * np.float32(f ** -0.5)
    fc_b = rng.standard_normal(CLASSES).astype(np.float32)
    labels = rng.integers(0, CLASSES, n)
    ins = {"y": guarded(cq, y, name="y"), "fc_w": guarded(cq, fc_w, name="fc_w"), "fc_b": guarded(cq, fc_b, name="fc_b"),
           "labels": guarded(cq, labels.astype(np.float32), name="labels")}
    outs = {name: guarded(cq, shape=s, name=name) for name, s in (
        ("features", (n, c, h // 2, w // 2)), ("logits", (n, CLASSES)), ("terms", (n,)), ("dz", (n, CLASSES)),
        ("dy", shape), ("grad_w", (CLASSES, f)), ("grad_b", (CLASSES,)), ("loss", (1,)))}
    k = TrainKernels(*cq)
    o = outs
    launches = [k.head_forward(ins["y"], ins["fc_w"], ins["fc_b"], ins["labels"], o["features"], o["logits"],
                               o["terms"], o["dz"]),
                k.head_backward(o["dz"], ins["fc_w"], o["features"], o["terms"], o["dy"], o["grad_w"], o["grad_b"],
                                o["loss"])]
    run_and_check_guards(cq, launches, list(ins.values()) + list(outs.values()))
    for name, (expected, magnitude) in head_reference(y, fc_w, fc_b, labels).items():
        check_close(outs[name].read(), expected, magnitude=magnitude, rtol=rtol_for_sum(max(f, n) * 4), name=name)


def test_head_planted_faults_are_caught(cq):
    """A dz read from the wrong sample (head_backward's dy) fails the value check; d fc_w stored one
    place too far writes past grad_w, which the guard zone catches."""
    shape = (3, 2, 4, 4)
    rng = np.random.default_rng(3)
    y = rng.standard_normal(shape).astype(np.float32)
    fc_w, fc_b = rng.standard_normal((CLASSES, 8)).astype(np.float32), rng.standard_normal(CLASSES).astype(np.float32)
    labels = np.array([1, 7, 3])
    expected = head_reference(y, fc_w, fc_b, labels)
    for fault, caught in ((planted("train/head.cl", "g = fma(dz[n * CLASSES + j], fc_w", "g = fma(dz[j], fc_w"), MismatchError),
                          (planted("train/head.cl", "grad_w[i] = g;", "grad_w[i + 1] = g;"), GuardViolation)):
        k = TrainKernels(*cq, sources=fault)
        t = {name: guarded(cq, shape=s, name=name) for name, s in (
            ("features", (3, 2, 2, 2)), ("logits", (3, CLASSES)), ("terms", (3,)), ("dz", (3, CLASSES)), ("dy", shape),
            ("grad_w", (CLASSES, 8)), ("grad_b", (CLASSES,)), ("loss", (1,)))}
        ins = [guarded(cq, a) for a in (y, fc_w, fc_b, labels.astype(np.float32))]
        with pytest.raises(caught):
            run_and_check_guards(cq, [k.head_forward(*ins, t["features"], t["logits"], t["terms"], t["dz"]),
                                      k.head_backward(t["dz"], ins[1], t["features"], t["terms"], t["dy"], t["grad_w"],
                                                      t["grad_b"], t["loss"])], ins + list(t.values()))
            check_close(t["dy"].read(), expected["dy"][0], magnitude=expected["dy"][1], rtol=1e-4, name="dy")


def test_sgd_updates_every_parameter_of_the_arena_in_one_launch(cq):
    """kernels/train/sgd.cl against model.sgd over three steps, on parameters whose sizes leave
    gaps in the arena (the sub-buffer alignment): every value updated, the gaps still zero."""
    ctx, queue = cq
    shapes = {"w1": (3, 5, 3, 3), "gamma1": (5,), "fc_b": (10,)}
    arena = Arena(ctx, queue, shapes)
    rng = np.random.default_rng(0)
    params = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    host, velocity = {k: v.copy() for k, v in params.items()}, {}
    arena.load(params)
    update = TrainKernels(ctx, queue).sgd(arena, 0.1, 0.9)
    assert arena.size >= sum(int(np.prod(s)) for s in shapes.values())
    for _ in range(3):
        grads = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
        flat = np.zeros(arena.size, np.float32)
        for name, (off, shape) in arena.layout.items():
            flat[off:off + grads[name].size] = grads[name].ravel()
        arena.grads.write(flat)
        update.enqueue()
        model.sgd(host, grads, velocity, 0.1, 0.9)
    got = arena.read()
    for name in shapes:
        np.testing.assert_allclose(got[name], host[name], rtol=1e-6, atol=1e-6)
    whole = arena.params.read()
    used = np.zeros(arena.size, bool)
    for off, shape in arena.layout.values():
        used[off:off + int(np.prod(shape))] = True
    assert not whole[~used].any()


# --- the whole step ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def quick(cq):
    return CourseNet(TINY, cq[0], stages=QUICK)


def test_steps_match_the_numpy_reference_steps(quick):
    """Five training steps on the device (forward, backward, SGD) against the NumPy reference step
    and model.sgd from the same weights on the same batches: the loss of each step, each step's
    gradients, and the weights after each update."""
    x, y, _, _ = data.digits(TINY.scale)
    params = model.init_params(TINY)
    host, velocity = {k: v.copy() for k, v in params.items()}, {}
    quick.load(params)
    for s in range(5):
        b = slice(TINY.batch * s, TINY.batch * (s + 1))
        loss = quick.train_step(x[b], y[b])
        ref_loss, _, ref_grads = model.reference_step(host, x[b], y[b])
        assert abs(loss - ref_loss) <= 1e-5 * abs(ref_loss), (s, loss, ref_loss)
        lines = model.compare_gradients(quick.gradients(), ref_grads)
        assert all(line.endswith("matches") for line in lines), (s, lines)
        model.sgd(host, ref_grads, velocity, TINY.lr, TINY.momentum)
        got = quick.parameters()
        for name in host:        # the update against the reference's, relative to how far the weights moved
            moved = np.abs(host[name] - params[name]).max()
            assert np.abs(got[name] - host[name]).max() <= 1e-4 * moved, (s, name)


def test_a_step_moves_the_batch_in_and_the_loss_out_only(quick):
    """Two uploads (images, labels) and one read (the loss) per training step; every launch of the
    step comes back with an event, as many as the launch count says."""
    x, y, _, _ = data.digits(TINY.scale)
    quick.load(model.init_params(TINY))
    before = Counter(tensors.TRANSFERS)
    quick.train_step(x[:TINY.batch], y[:TINY.batch])
    assert dict(Counter(tensors.TRANSFERS) - before) == {"upload": 2, "read": 1}
    events = [e for _, _, evs in quick._events for e in evs]
    assert len(events) == quick.launches_per_step()
    ops = [op for _, op, _ in quick._events]
    assert ops.count("sgd") == 1 and ops.count("head_forward") == 1 and ops.count("head_backward") == 1
    assert ops.count("relu_pool") == 1 and ops.count("pool_backward") == 1    # conv2's are fused into the head


def test_a_step_that_forgets_the_update_is_caught(cq):
    """The multi-step check fails when the step leaves the weights as they were (its SGD launch
    dropped): the second step's loss no longer matches the reference's."""
    net = CourseNet(TINY, cq[0], stages=QUICK)
    net._backward = (lambda backward: lambda: [op for op in backward() if op[1] != "sgd"])(net._backward)
    x, y, _, _ = data.digits(TINY.scale)
    params = model.init_params(TINY)
    net.load(params)
    net.train_step(x[:8], y[:8])
    host = {k: v.copy() for k, v in params.items()}
    model.sgd(host, model.reference_step(host, x[:8], y[:8])[2], {}, TINY.lr, TINY.momentum)
    loss = net.train_step(x[8:16], y[8:16])
    ref_loss = model.reference_step(host, x[8:16], y[8:16])[0]
    assert abs(loss - ref_loss) > 1e-5 * abs(ref_loss)


def test_bad_labels_and_batches_are_refused_before_any_launch(quick):
    x, y, _, _ = data.digits(TINY.scale)
    with pytest.raises(ValueError, match=r"labels must lie in 0\.\.9"):
        quick.train_step(x[:8], np.full(8, 10))
    with pytest.raises(ValueError, match="integer class indices"):
        quick.train_step(x[:8], y[:8].astype(np.float32))
    with pytest.raises(ValueError, match="the batch must have shape"):
        quick.train_step(x[:7], y[:7])


def test_training_converges_as_chapter_15_runs_it():
    """Chapter 15's small run (3 epochs on the digits) reaches the accuracy PyTorch's twin reaches
    from the same weights on the same batches (0.982 on the test images after the third epoch)."""
    course = run.train_course(model.SMALL, DEVICES[0], progress=False, stages=QUICK)
    assert course["transfers_per_step"] == {"upload": 2, "read": 1}
    assert course["accuracy"][-1] >= 0.97, course["accuracy"]
    assert course["losses"][-1] < 0.3 * course["losses"][0]


# --- the ResNet stage --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stage_net(cq):
    return resnet_stage.course_net(resnet_stage.SMALL, cq[0], QUICK)


def test_resnet_stage_matches_its_numpy_reference_step(stage_net):
    """Every gradient of the five blocks and the first block's input gradient, one step, against the
    NumPy reference step; and no host transfer inside the step."""
    diffs = resnet_stage.check_course(stage_net, resnet_stage.SMALL)
    assert set(diffs) == set(model.parameter_shapes(resnet_stage.SMALL)) | {"input"}
    assert max(diffs.values()) <= resnet_stage.GRAD_RTOL, diffs
    before = Counter(tensors.TRANSFERS)
    stage_net.enqueue_step()
    stage_net.queue.finish()
    assert not Counter(tensors.TRANSFERS) - before
    ops = [op for _, op, _ in stage_net._events]
    assert ops.count("relu") == 5 and ops.count("conv_dgrad") == 5 and ops.count("sgd") == 1


def test_resnet_stage_check_catches_a_missing_relu(cq):
    """The reference check fails when a block's ReLU is left out of the forward pass."""
    net = resnet_stage.course_net(resnet_stage.SMALL, cq[0], QUICK)
    del net.blocks[1]["launches"]["relu"]
    diffs = resnet_stage.check_course(net, resnet_stage.SMALL)
    assert max(diffs.values()) > resnet_stage.GRAD_RTOL


def test_resnet_stage_record(cq):
    """measure() at the CI size: the record's device, date, timings (median and spread), the checks
    against the NumPy reference and, where PyTorch is installed, against PyTorch's step."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)          # PyTorch's CPU threads spin against the tests' other workers
    try:
        rec = resnet_stage.measure(resnet_stage.SMALL, cq[0], "cpu", warmup=1, repeats=3, stages=QUICK)
    finally:
        torch.set_num_threads(threads)
    assert rec["kind"] == "training_step" and rec["device"]["name"] and rec["date"]
    assert rec["course"]["transfers_per_step"] == {}
    assert rec["course"]["device"]["repeats"] == 3 and rec["course"]["wall"]["q1_ms"] <= rec["course"]["wall"]["q3_ms"]
    assert max(rec["reference"].values()) <= rec["grad_rtol"]
    assert resnet_stage.agrees(rec["pytorch_agreement"])
    off = {**rec["pytorch_agreement"], "course": {**rec["pytorch_agreement"]["course"], "w3": 1e-2}}
    assert not resnet_stage.agrees(off)            # a gradient a hundred times further off than allowed
    assert "wall_ratio" in rec["comparison"]
    assert "agree" in resnet_stage.summary(rec) and "DIFFER" not in resnet_stage.summary(rec)
