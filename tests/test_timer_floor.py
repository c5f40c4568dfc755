"""helpers/timer_floor.py: what each timer says of an empty kernel, here and as recorded on the GPU."""
import json
import time

from helpers import timer_floor
from helpers.analysis.results import RESULTS


def test_opencl_floor_times_an_empty_kernel(ctx):
    row = timer_floor.opencl_floor(ctx, 2, repeats=5)
    assert row["repeats"] == 5 and 0 < row["min_us"] <= row["median_us"] <= row["q3_us"]


def test_recorded_floors_name_every_timer_the_course_compares():
    """The recorded floors cover the three timers (the course's OpenCL and CUDA events, PyTorch's
    CUPTI records) that chapter 14 reads its small layers against, each from 50 repeats."""
    rec = json.loads((RESULTS / "engine" / "timer_floor_nvidia-h200.json").read_text())
    # the module's name when the H200 was recorded (recorded results are not rewritten)
    assert rec["command"] in (f"python -m helpers.{name} --device nvidia" for name in ("timer_floor", "floor"))
    assert rec["device"]["name"] == "NVIDIA H200"
    timers = [r["timer"] for r in rec["rows"]]
    assert set(timers) == {"OpenCL profiling events", "CUDA events", "PyTorch profiler (CUPTI)"}
    assert all(r["repeats"] == 50 and r["min_us"] > 0 for r in rec["rows"])


def test_the_vendor_is_also_timed_by_cuda_events_and_by_its_kernels_added_up():
    """Every vendor timing carries a second number, CUDA events around each call (the timer whose
    floor matches OpenCL's profiling events), beside the CUPTI kernel records; both from the same
    repeats, neither empty; and the sum of the call's kernel durations, which leaves out the gaps
    between kernels. Needs PyTorch with CUDA (the GPU machine)."""
    import pytest
    from helpers.ops.vendor import time_cuda, torch_cuda
    torch = torch_cuda()
    if torch is None:
        pytest.skip("PyTorch with CUDA is not installed here (the recorded GPU results are in results/)")
    x = torch.zeros(1 << 20, device="cuda")
    t = time_cuda(lambda: x.add_(1.0), warmup=3, repeats=7, flush_bytes=1 << 24)
    assert len(t["times_ms"]) == len(t["events_times_ms"]) == 7
    assert 0 < t["min_ms"] <= t["median_ms"] and 0 < t["events_q1_ms"] <= t["events_median_ms"] <= t["events_q3_ms"]
    assert t["events_method"].startswith("CUDA events")
    # one kernel per call: the sum of its kernels is its first-to-last time
    assert t["kernels_median_ms"] == pytest.approx(t["median_ms"], rel=1e-6)
    # two kernels with 0.3 ms of host work between them (as autograd's): the sum leaves the gap out
    t2 = time_cuda(lambda: (x.add_(1.0), time.sleep(3e-4), x.mul_(2.0)), warmup=3, repeats=7, flush_bytes=1 << 24)
    assert t2["kernels_per_call"] == 2
    assert 0 < t2["kernels_q1_ms"] <= t2["kernels_median_ms"] <= t2["kernels_q3_ms"]
    assert t2["median_ms"] - t2["kernels_median_ms"] > 0.2
