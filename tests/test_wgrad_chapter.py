"""Chapter 15's section on the weight gradient: its tables and picture, and the statements its prose
makes in words about the recorded runs (test_prose_numbers checks the numbers; these are the claims
without digits: "on every layer", "beats cuDNN on res64@56", which algorithm cuDNN ran). A new
recording that changes one of them fails here until the chapter's text is updated."""
import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from helpers.analysis import results  # noqa: E402
from helpers.chapters import pictures_training as pt  # noqa: E402
from helpers.ops.layers import layer, layer_set  # noqa: E402


def test_gemm_view_counts_the_readme_numbers_for_res64():
    row = next(line for line in pt.wgrad_gemm_view(layer_set("resnet50")).splitlines() if line.startswith("res64@56"))
    # 36,864 weights of 200,704 terms; the input gradient's 12.8 M outputs of 576 terms; M = 64,
    # N = 576; nine 64x64 tiles, 441 work-groups with SLICE = 4096 (kernels/conv_wgrad/README.md)
    assert row.split()[1:] == ["36,864", "200,704", "12,845,056", "576", "64", "576", "200,704", "9", "441"]


def test_gemm_view_averages_the_input_gradient_terms_of_a_strided_layer():
    row = pt.wgrad_gemm_view([layer("s2", 1, 8, 8, 16, stride=2)]).splitlines()[1]
    # 3x3 stride 2 on 8x8 -> 4x4: each input position meets K*9*16/64 = 36 terms on average
    assert row.split()[4] == "36"


def test_the_tile_picture_marks_a_6x6_patch_over_a_4x4_tile():
    from matplotlib.patches import Rectangle
    fig = pt.draw_wgrad_tile(h=8, w=8, tile=(1, 0))
    ax = fig.axes[0]
    filled = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_fill() and p.get_alpha()]
    sizes = sorted((p.get_width(), p.get_height()) for p in filled)
    assert sizes == [(4, 4), (6, 6)]
    patch = next(p for p in filled if p.get_width() == 6)
    assert (patch.get_x(), patch.get_y()) == (0, 4)      # padded rows 4..9: under dy' rows 4..7
    matplotlib.pyplot.close(fig)


def test_chapter_12_tile_picture_is_unchanged_by_the_tile_size_switch():
    import matplotlib.pyplot as plt
    from helpers.chapters.pictures_winograd import draw_tiles
    fig, ax = plt.subplots()
    draw_tiles(ax, h=7, w=7, padding=1, tile=(1, 2))
    texts = [t.get_text() for t in ax.texts]
    assert "padded input 7x7\n(grey: padding 1)" in texts
    assert any(t.startswith("output 7x7 in 2x2 tiles\n(the last ones partial") for t in texts)
    plt.close(fig)


def test_vendor_algorithm_is_read_from_the_kernel_names():
    assert pt._vendor_algorithm(["void cudnn::winograd_nonfused::winogradWgradData4x4<float>(...)"]) == "Winograd 4x4"
    assert pt._vendor_algorithm(["void fft2d_r2c_64x64<float>(float2*)"]) == "FFT"
    assert pt._vendor_algorithm(["void wgrad_alg0_engine<float, 128>(int)"]) == "direct or GEMM"


@pytest.fixture(scope="module")
def h200():
    runs = [r for r in results.find("conv_wgrad", "resnet50") if r["device"]["name"] == "NVIDIA H200"]
    if not runs:
        pytest.skip("no H200 run of conv_wgrad over resnet50 in results/")
    return runs[0]


def _rows(run, key):
    return {r["layer"]: r for r in run["rows"] if r["key"] == key}


def test_recorded_claims_of_section_1(h200):
    naive, split = _rows(h200, "01_naive"), _rows(h200, "02_split_reduction")
    wino = _rows(h200, "04_winograd")
    vendor = {v["layer"]: v for v in h200["vendor"]}
    peak = h200["roofline"]["fma_gflops"]
    deeper = ["res128@28", "res256@14", "res512@7"]
    # "Stage 02 is slower than the naive stage on every layer"
    assert all(split[k]["median_ms"] > naive[k]["median_ms"] for k in naive)
    # "Stage 04 beats cuDNN on res64@56 and trails it on the three deeper layers"
    assert wino["res64@56"]["x_vendor"] > 1 and all(wino[k]["x_vendor"] < 1 for k in deeper)
    # "the stride-2 layer runs stage 03"
    assert wino["res128@56/s2"]["ran"] == "03_igemm"
    # "cuDNN's rate passes the FMA peak" on those layers, with winograd_nonfused kernels; FFT on res64@56
    assert all(vendor[k]["gflops"] > peak for k in deeper)
    assert all(pt._vendor_algorithm(vendor[k]["kernel_names"]) == "Winograd 4x4" for k in deeper)
    assert pt._vendor_algorithm(vendor["res64@56"]["kernel_names"]) == "FFT"
    # "(the table) prints them": the helper's text carries the per-layer figures the prose quotes
    text = pt.wgrad_recorded(h200)
    assert "Winograd 4x4" in text and "winogradWgradDelta4x4" in text and "fft2d_r2c_64x64" in text


def test_recorded_claims_of_section_8():
    from helpers.train import run
    recs = [r for r in run.recorded() if r["device"].get("name") == "NVIDIA H200" and "pytorch" in r]
    if not recs:
        pytest.skip("no H200 training run in results/")
    c = recs[0]["course"]
    device = [o for o in c["ops"] if o["where"] == "device"]
    largest = max(device, key=lambda o: o["median_ms"])
    # "The largest kernel is conv2's weight gradient (stage 04)"
    assert (largest["layer"], largest["op"], largest["stage"]) == ("conv2", "conv_wgrad", "winograd")
    # "made with this chapter's step": nothing of it on the host; "two uploads and one read per step"
    assert not run.host_step(c) and not [o for o in c["ops"] if o["where"] == "host"]
    assert c["transfers_per_step"] == {"upload": 2, "read": 1}
    # "The kernels are 63 % of a step's wall time": more than the rest
    wall = float(np.median(c["step_ms"]))
    kernels = sum(o["median_ms"] for o in device)
    assert kernels > wall - kernels
    # "the target (at most PyTorch's step) is met"
    assert wall <= float(np.median(recs[0]["pytorch"]["step_ms"]))


def test_igemm_launch_exercise_check(capsys):
    from helpers.chapters.exercises import check_igemm_launch

    def right(lay, tm, tn, slice_len):
        oh = (lay["h"] + 2 * lay["padding"] - lay["kernel"]) // lay["stride"] + 1
        taps = lay["c"] * lay["kernel"] ** 2
        slices = -(-(lay["n"] * oh * oh) // slice_len)
        return -(-lay["k"] // tm) * -(-taps // tn) * slices, slices * taps * lay["k"]
    assert check_igemm_launch(right)
    assert capsys.readouterr().out.startswith("Correct")
    assert not check_igemm_launch(lambda lay, tm, tn, sl: (right(lay, tm, tn, sl)[1], right(lay, tm, tn, sl)[1]))
    assert not check_igemm_launch(lambda lay, tm, tn, sl: (right(lay, tm, tn, sl)[0], right(lay, tm, tn, sl)[1] // 9))
    out = capsys.readouterr().out
    assert "too small: one partial sum per weight" in out and "Not yet" in out

    def unanswered(*args):
        raise NotImplementedError()
    assert not check_igemm_launch(unanswered)
    assert "Not answered yet" in capsys.readouterr().out
