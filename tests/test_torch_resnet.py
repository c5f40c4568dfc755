"""helpers/train/torch_resnet.py: a small ResNet of helpers.torch's Conv2d and BatchNorm2d (the
course's stages) trained beside the same ResNet on torch.nn's layers, at the `ci` size through the
command line that records it: the first step's gradients and updated weights agree with torch.nn's
float64 step (within FIRST_STEP_RTOL of each tensor's largest value, or ROUNDING_FACTOR times torch.nn's
own float32 distance), the losses of the first COMPARE_STEPS steps agree step by step (relative
difference <= helpers/train/run.py's LOSS_RTOL), and they fall. A wrong sign planted in the weight gradient is caught. PyTorch is not one of
the course's packages: without it these tests are skipped with the reason, except under COURSE_CI=1.
"""
import json

import numpy as np
import pytest

from helpers.chapters.needs import module_missing, needed


@pytest.fixture(scope="module")
def tr():
    needed(module_missing("torch"))
    from helpers.train import torch_resnet
    return torch_resnet


@pytest.fixture(scope="module")
def rec(tr, tmp_path_factory):
    """The `ci` record, written by the command line the recorder runs at full size."""
    from helpers.train.__main__ import main
    out = tmp_path_factory.mktemp("torch_resnet") / "training_torch_resnet_ci.json"
    assert main(["--network", "torch_resnet", "--size", "ci", "--torch-device", "cpu", "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_the_record_says_where_and_what_it_ran(rec, tr):
    assert rec["kind"] == "training_torch" and rec["network"] == "torch_resnet" and rec["size"] == "ci"
    assert {"name", "driver", "platform"} <= set(rec["device"]) and rec["date"] and rec["torch"]["version"]
    assert rec["config"] == tr.SIZES["ci"].as_dict()
    steps = tr.SIZES["ci"].steps
    for key in ("course", "pytorch"):
        assert len(rec[key]["losses"]) == len(rec[key]["step_ms"]) == steps
        assert rec[key]["step_time"]["repeats"] == steps - tr.SIZES["ci"].warmup
    # every convolution and batch norm ran on the course's stages; ReLU and the head on PyTorch
    who = {r["layer"]: r["who"] for r in rec["course"]["stages"]}
    assert who["blocks.1.downsample.0"].startswith("course: conv_forward") and who["fc"] == "PyTorch"
    assert "conv_dgrad" not in who["stem.0"]          # the image needs no gradient


def test_the_course_model_agrees_with_torch_nn_and_learns(rec, tr):
    assert tr.agrees(rec["first_step"]), tr.first_step_table(rec)
    c = rec["comparison"]
    assert c["losses_agree"] and c["steps"] == tr.COMPARE_STEPS == tr.SIZES["ci"].steps, c
    assert c["accuracy_agrees"], c
    losses = np.array(rec["course"]["losses"])
    assert losses[-2:].mean() < losses[:2].mean() - 0.05, f"the loss did not fall: {losses}"
    assert "DISAGREE" not in tr.verdict(rec)


def test_a_wrong_sign_in_the_weight_gradient_is_caught(tr, monkeypatch):
    import helpers.torch as ht
    real = ht.CourseConv.course_wgrad
    monkeypatch.setattr(ht.CourseConv, "course_wgrad", lambda self, x, dy, w: -real(self, x, dy, w))
    first = tr.first_step(tr.SIZES["ci"])
    assert not tr.agrees(first)
    wrong = {k for k in first["course"] if first["course"][k] > tr.FIRST_STEP_RTOL}
    assert "grad stem.0.weight" in wrong and "grad fc.weight" not in wrong, wrong


def test_recorded_gpu_is_none_until_a_gpu_run_is_recorded(tr, tmp_path, monkeypatch):
    from helpers.analysis import results
    monkeypatch.setattr(results, "RESULTS", tmp_path)
    assert tr.recorded_gpu() is None
    cpu = {"network": "torch_resnet", "device": {"type": "CPU"}}
    (tmp_path / "training_torch_resnet_cpu.json").write_text(json.dumps(cpu))
    assert tr.recorded_gpu() is None
    (tmp_path / "training_torch_resnet_gpu.json").write_text(json.dumps({**cpu, "device": {"type": "GPU"}}))
    assert tr.recorded_gpu()["file"] == "training_torch_resnet_gpu.json"
