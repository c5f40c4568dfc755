"""show_source's excerpts: a chapter lists the functions, kernels or macros its text explains (or a
range of lines), under a line that names the whole file, instead of printing every line of it."""
import pytest

from helpers.chapters.notebook import show_source
from helpers.engine.kernels import kernel_source


def test_a_function_is_kept_whole_with_its_comment_and_nothing_else():
    text = show_source("conv_dgrad", "igemm_analytic", function="gather_dy").text
    lines = text.splitlines()
    assert lines[0] == "// excerpt of kernels/conv_dgrad/11_igemm_analytic.cl (75 lines): gather_dy"
    assert lines[1].startswith("// B[(k,r,s)][column]")            # the comment right above it
    assert lines[2].startswith("inline float gather_dy(") and lines[-1] == "}"
    assert "conv_dgrad(" not in text and "#include" not in text
    body = "\n".join(lines[1:]) + "\n"
    assert body in kernel_source("conv_dgrad/11_igemm_analytic.cl")  # the file's own lines, unchanged


def test_a_kernel_keeps_its_attribute_line_and_macros_their_continuations():
    kernel = show_source("common/phase_gemm.h", function="conv_dgrad").text.splitlines()
    assert kernel[1].startswith("__kernel __attribute__") and kernel[2].startswith("void conv_dgrad(")
    assert kernel[-1] == "}"
    macro = show_source("common/gemm_core.h", function="GEMM_STORE_COLUMN").text.splitlines()
    assert macro[1].startswith("#define GEMM_STORE_COLUMN") and macro[-1].strip() == "} while (0)"


def test_several_names_in_file_order_touching_parts_joined():
    text = show_source("conv_dgrad", "igemm_analytic", function=("GEMM_B", "gather_dy", "GEMM_A")).text
    assert text.index("gather_dy(__global") < text.index("#define GEMM_A") < text.index("#define GEMM_B")
    assert "0.0f)\n#define GEMM_B" in text                         # adjacent lines stay one block


def test_switches_resolve_what_is_kept():
    text = show_source("common/gemm_core.h", function="gemm_accumulate",
                       switches={"GEMM_PREFETCH": 0, "GEMM_VEC_A": 0, "GEMM_VEC_B": 0, "GEMM_B_KMAJOR": 0}).text
    assert text.splitlines()[0].endswith("with GEMM_PREFETCH=0, GEMM_VEC_A=0, GEMM_VEC_B=0, GEMM_B_KMAJOR=0")
    assert "GEMM_FETCH" not in text and "GEMM_A4" not in text and "#if GEMM_LDS4" in text
    assert len(text.splitlines()) < 60


def test_a_line_range():
    text = show_source("gemm", "naive", lines=(1, 3)).text.splitlines()
    assert text[0] == "// excerpt of kernels/gemm/01_naive.cl (19 lines): lines 1-3" and len(text) == 4


def test_the_whole_file_without_options():
    assert show_source("gemm", "naive").text == kernel_source("gemm/01_naive.cl")


@pytest.mark.parametrize("kw, says", [
    ({"function": "nope"}, "kernels/gemm/01_naive.cl: no function, kernel or macro named 'nope'"),
    ({"lines": (0, 300)}, "has 19 lines"),
    ({"lines": (1, 2), "function": "x"}, "not both"),
])
def test_bad_requests_are_refused_with_what_to_do(kw, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        show_source("gemm", "naive", **kw)
