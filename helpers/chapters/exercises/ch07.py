"""Chapter 07's exercise checks (combining input depth)."""
from __future__ import annotations

from .verdict import _verdict, exercise


@exercise(closes=("launch.unrolled:weight_vectors", "launch.unrolled:fast_block", "launch.unrolled:generated_code",
                   "launch.unrolled:code_stats", "launch.unrolled:kernel_text",
                   "chapters.pictures_combining:weight_block_loads"))
def check_weight_vectors(answer_fn) -> bool:
    """Chapter 07: (first, last) depth of a group -> the float4 indices (0..35) of a 16-depth
    block that hold the group's weights, in order (what the generator loads for the group)."""
    from ...launch.unrolled import weight_vectors
    for first in range(16):
        for last in range(first, 16):
            want = list(weight_vectors(first, last))
            got = list(answer_fn(first, last))
            if got != want:
                if sorted(got) == want:
                    why = "the right float4s, but not in increasing order"
                elif got and want and got[0] != want[0]:
                    why = f"the first float4 is {'too late' if got[0] > want[0] else 'too early'}"
                elif got and want and got[-1] != want[-1]:
                    why = f"the last float4 is {'too late' if got[-1] > want[-1] else 'too early'}"
                else:
                    why = "the list has gaps or repeats"
                return _verdict(False, "", f"depths {first}..{last} (floats {9 * first}..{9 * last + 8}): "
                                f"you give {got}: {why}")
    return _verdict(True, "a group of depths first..last needs float4 9·first//4 .. (9·last+8)//4", "")
