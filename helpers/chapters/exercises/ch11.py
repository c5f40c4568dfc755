"""Chapter 11's exercise checks (convolution as GEMM)."""
from __future__ import annotations

from .verdict import _verdict, exercise


@exercise(closes=("launch.gemm:phase_taps", "launch.gemm:phase_count", "chapters.pictures_gemm:phase_table",
                   "chapters.pictures_gemm:draw_phase_taps"))
def check_phase_taps(answer_fn) -> bool:
    """Chapter 11: (kernel, stride, phase) -> the taps r that reach the input rows of that phase."""
    from ...launch.gemm import phase_taps
    # (4, 2, 0) and (5, 3, 0) catch taps counted from the far end of the kernel (a flipped filter)
    for kernel, stride, phase in [(3, 1, 0), (3, 2, 0), (3, 2, 1), (5, 2, 1), (1, 2, 1), (5, 3, 2), (2, 3, 2),
                                  (4, 2, 0), (5, 3, 0)]:
        got, want = sorted(answer_fn(kernel, stride, phase)), phase_taps(kernel, stride, phase)
        case = f"kernel {kernel}, stride {stride}, phase {phase}: you give {got}; "
        if len(set(got)) != len(got):
            return _verdict(False, "", case + "a tap appears twice")
        wrong = sorted(set(got) - set(want))
        if wrong:
            return _verdict(False, "", case + f"tap r = {wrong[0]} does not reach the rows of this phase "
                            f"(which r make h + pad - r a multiple of the stride?)")
        if got != want:
            return _verdict(False, "", case + "a tap that reaches the rows of this phase is missing")
    return _verdict(True, "every phase gets exactly the taps that reach it", "")
