"""Checks for the chapters' exercises: each says what is right or points at what is off, never
just False, and never prints the expected answer.

Solutions in the teacher notebooks sit between ``### BEGIN SOLUTION`` and ``### END SOLUTION``;
the student edition (``./course student``, helpers/tools/editions.py) replaces them with
``raise NotImplementedError()``. Every check catches that and says, politely, that the exercise
is not answered yet, so the student edition runs top to bottom.

One module per chapter, every check importable from here: ch00, ch01, ch01a, ch02, ch03, ch04,
ch05, ch06, ch07, ch08, ch09, ch10, ch11, ch12, ch12a, ch13, ch14, ch15 and ch16 (``ch02.py``:
chapter 02's checks). verdict.py: what every check shares (the verdict line, the decorator that
reports an unanswered exercise); closed.py: the course's own answers closed while a learner's runs.
"""
from .verdict import NOT_ANSWERED, exercise
from .ch00 import check_intensity, check_timing_summary
from .ch01 import check_output_size, check_touched_outputs
from .ch01a import check_launch
from .ch02 import check_naive_bytes
from .ch03 import check_valid_table
from .ch04 import check_block_lines
from .ch05 import check_vector_columns
from .ch06 import check_live_loads, check_straddling_depths
from .ch07 import check_weight_vectors
from .ch08 import check_width_columns
from .ch09 import check_tile_reuse
from .ch10 import check_stride_passes
from .ch11 import check_phase_taps
from .ch12 import check_winograd_1d
from .ch12a import check_wino_products
from .ch13 import check_c_fragment, check_tf32_products, check_nhwc_offsets, check_box_starts, check_ring_waits
from .ch14 import check_chan_merge
from .ch15 import check_step_flops, check_igemm_launch, check_arena_layout
from .ch16 import check_conv3d_by_2d

__all__ = ["NOT_ANSWERED", "exercise", "check_intensity", "check_timing_summary", "check_output_size",
           "check_touched_outputs", "check_launch", "check_naive_bytes", "check_valid_table", "check_block_lines",
           "check_vector_columns", "check_straddling_depths", "check_live_loads", "check_weight_vectors",
           "check_width_columns", "check_tile_reuse", "check_stride_passes", "check_phase_taps",
           "check_winograd_1d", "check_wino_products", "check_c_fragment", "check_tf32_products",
           "check_nhwc_offsets", "check_box_starts", "check_ring_waits", "check_chan_merge", "check_step_flops",
           "check_igemm_launch", "check_arena_layout", "check_conv3d_by_2d"]
