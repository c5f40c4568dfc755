"""batchnorm_forward and batchnorm_backward (chapter 14): one stage list for both operations;
each stage's file holds the forward (training and inference) and the backward kernels.

``variants`` run over the grid beside the defaults: small work-groups and blocks, so that trees
have many levels and stage 05 many blocks (stage 02's COALESCED=0: chunks of one element, of
many, and work-items left with none), and every switch (stage 02's COALESCED and SPLIT_SUMS,
05's REVERSE and EARLY_LOADS, 06's TWO_PASS_STATS, EARLY_PARAMS and STEP_OFFSETS, and its RADIX
at 2, 4 and 16) at its other setting.
"""
from dataclasses import replace

from ..launch import batchnorm
from .params import WG
from .stage import Stage

TREE_TUNE = {"WG": [64, 128, 256, 512, 1024]}

FORWARD = [
    Stage("batchnorm_forward", 1, "naive", "batchnorm/01_naive.cl",
          "one work-item per channel loops over N*H*W values: three passes forward, two backward",
          family=batchnorm, launch="per_channel", defines=WG, tune={"WG": [32, 64, 128]}),
    Stage("batchnorm_forward", 2, "local_two_pass", "batchnorm/02_local_two_pass.cl",
          "one work-group per channel, coalesced reads (COALESCED=0: a contiguous chunk per "
          "work-item), sums through a local-memory tree, one pass per sum (SPLIT_SUMS=0: both "
          "backward sums in one pass)",
          family=batchnorm, launch="group_per_channel", defines={"WG": 256, "COALESCED": 1, "SPLIT_SUMS": 1},
          tune=TREE_TUNE, requires=batchnorm.wg_power_of_two,
          variants=({"WG": 4}, {"COALESCED": 0}, {"WG": 4, "COALESCED": 0}, {"SPLIT_SUMS": 0},
                    {"WG": 4, "COALESCED": 0, "SPLIT_SUMS": 0})),
    Stage("batchnorm_forward", 3, "welford", "batchnorm/03_welford.cl",
          "single pass for the statistics: Welford per work-item, Chan's merge in the tree",
          family=batchnorm, launch="group_per_channel", defines={"WG": 256}, tune=TREE_TUNE,
          requires=batchnorm.wg_power_of_two, variants=({"WG": 8},)),
    Stage("batchnorm_forward", 4, "vec4", "batchnorm/04_vec4.cl",
          "float4 loads and stores on aligned addresses, a scalar head and tail per slab",
          family=batchnorm, launch="group_per_channel", defines={"WG": 256}, tune=TREE_TUNE,
          requires=batchnorm.wg_power_of_two, variants=({"WG": 4},)),
    Stage("batchnorm_forward", 5, "fused", "batchnorm/05_fused.cl",
          "many work-groups per channel: block partials, then merge + normalize in one kernel "
          "(EARLY_LOADS=0: the block loaded after the merge); each tensor read twice",
          family=batchnorm, launch="blocks", defines={"WG": 256, "ITEMS": 4, "REVERSE": 1, "EARLY_LOADS": 1},
          tune={"WG": [128, 256, 512], "ITEMS": [1, 2, 4, 8]}, jit=batchnorm.vec4, requires=batchnorm.wg_power_of_two,
          fast={"VEC4": 1},
          variants=({"WG": 4, "ITEMS": 1}, {"WG": 16, "ITEMS": 3, "REVERSE": 0}, {"WG": 4, "ITEMS": 3, "EARLY_LOADS": 0},
                    {"WG": 16, "ITEMS": 1, "REVERSE": 0, "EARLY_LOADS": 0})),
    # WG 4 holds at most 4 x MAX_ITEMS = 100 units a channel: (2, 6, 14, 14), 98 float4s, fills 25 a
    # work-item; a larger channel doubles the work-group (up to 256), a channel beyond 256 x 25 units
    # falls back to stage 05
    Stage("batchnorm_forward", 6, "one_pass", "batchnorm/06_one_pass.cl",
          "channels that fit one work-group's registers: one launch, each tensor read once, two-pass "
          "statistics over registers (TWO_PASS_STATS=0: Welford's); larger channels run stage 05",
          family=batchnorm, launch="one_pass", defines={"WG": 128, "TWO_PASS_STATS": 1, "EARLY_PARAMS": 1, "STEP_OFFSETS": 1, "RADIX": 8},
          tune={"WG": [128, 256, 512, 1024]}, jit=batchnorm.one_pass_items, requires=batchnorm.channel_fits, fallback="fused",
          variants=({"WG": 4}, {"WG": 32}, {"TWO_PASS_STATS": 0}, {"WG": 4, "TWO_PASS_STATS": 0},
                    {"EARLY_PARAMS": 0, "STEP_OFFSETS": 0, "RADIX": 2}, {"WG": 4, "RADIX": 16},
                    {"WG": 32, "RADIX": 4, "STEP_OFFSETS": 0}, {"EARLY_PARAMS": 0})),
    # Chapter 11's algorithm chooser (helpers/chooser.py), here as for the input gradient: the
    # candidates ranked by their recorded speed, the best few timed once per device and shape
    Stage("batchnorm_forward", 14, "auto", "",
          "the fastest registered stage for this device and shape within the workspace budget: ranked "
          "by a model of the recorded runs, the best few timed once and cached (helpers/chooser.py)", choose=True),
]

# the backward operation runs the same stages (the same files, their backward kernels)
BACKWARD = [replace(s, op="batchnorm_backward") for s in FORWARD]
BACKWARD[5] = replace(BACKWARD[5], defines={**BACKWARD[5].defines, "WG": 256})
