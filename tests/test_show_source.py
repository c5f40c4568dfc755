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


def test_a_kernel_written_once_for_both_languages_is_listed_in_opencl_c():
    """03_memoized_bounds keeps its kernel in dgrad_memoized.h, one text with its CUDA twin in
    course.h's words; listed with the header inlined (chapter 3) it reads as the OpenCL C file it
    was: the header's code in OpenCL C in place of its #include, its include of course.h dropped
    (dgrad.h, included above it, brings it), and the excerpt's line count that of what is shown."""
    inline = ("dgrad_memoized.h",)
    text = show_source("conv_dgrad", "memoized_bounds", inline=inline).text
    lines = text.splitlines()
    assert [ln for ln in lines if ln.startswith("#include")] == ['#include "dgrad.h"'], text
    i = lines.index('#include "dgrad.h"')
    assert lines[i + 1:i + 3] == ["", "#ifndef KH"]
    assert ("__kernel void conv_dgrad(__global const float* restrict dy,  // gradient w.r.t. the layer output"
            in lines and "                         __global float* restrict dx,        // gradient w.r.t. the "
            "layer input" in lines)
    assert [ln.strip() for ln in lines if "_id(" in ln] == [f"const int {v} = get_global_id({d});"
                                                           for v, d in (("hw", 0), ("c", 1), ("n", 2))]
    words = ("KERNEL", "GLOBAL", "RESTRICT", "DGRAD_MEMOIZED_H")
    assert not [ln for ln in lines if any(w in ln for w in words)]
    assert text.endswith("    dx[((n * C + c) * H + h) * W + x] = grad;\n}\n")
    head = kernel_source("conv_dgrad/03_memoized_bounds.cl").split('#include "dgrad.h"')[0]
    assert text.startswith(head) and show_source("conv_dgrad", "memoized_bounds").text.startswith(head)
    excerpt = show_source("conv_dgrad", "memoized_bounds", function="conv_dgrad", inline=inline).text
    assert excerpt.startswith(f"// excerpt of kernels/conv_dgrad/03_memoized_bounds.cl ({len(lines)} lines)")


@pytest.mark.parametrize("kw, says", [
    ({"function": "nope"}, "kernels/gemm/01_naive.cl: no function, kernel or macro named 'nope'"),
    ({"lines": (0, 300)}, "has 19 lines"),
    ({"lines": (1, 2), "function": "x"}, "not both"),
])
def test_bad_requests_are_refused_with_what_to_do(kw, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        show_source("gemm", "naive", **kw)
