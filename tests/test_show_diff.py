"""show_diff's switches: a stage's -D switches resolved so that a diff holding several ideas is
shown one idea at a time (chapters 12 and 14), and nothing else in the file changes."""
import pytest

from helpers.chapters.notebook import resolve_switches, show_diff

TEXT = """#ifndef FAST
#define FAST 1
#endif
#ifndef OTHER
#define OTHER 0
#endif
a
#if FAST
b
#else
c
#endif
#if !FAST
d
#endif
#if OTHER
e
#endif
"""


def test_resolve_switches_keeps_other_directives():
    on = resolve_switches(TEXT, {"FAST": 1}).splitlines()
    off = resolve_switches(TEXT, {"FAST": 0}).splitlines()
    assert "#ifndef FAST" not in on and "#ifndef OTHER" in on and "#if OTHER" in on
    assert [ln for ln in on if len(ln) == 1] == ["a", "b", "e"]
    assert [ln for ln in off if len(ln) == 1] == ["a", "c", "d", "e"]
    assert resolve_switches(TEXT, {}) == TEXT


def test_a_switch_diff_shows_only_that_switch():
    text = str(show_diff("conv_forward", "wino_blocked", "wino_blocked", {"ROTATED": 0}, {"ROTATED": 1}))
    changed = [ln for ln in text.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
    assert len(changed) == 2 and all(ln[1:].startswith("#define W_AT(") for ln in changed), text
    prefetch = str(show_diff("conv_forward", "wino_blocked", "wino_blocked", {"ROTATED": 0, "PREFETCH": 0},
                             {"PREFETCH": 1}))
    assert "fetch_blocks" in prefetch and "ROTATED" not in prefetch.split("\n", 2)[2]
    plain = str(show_diff("conv_forward", "wino_transposed", "wino_blocked", {"ROTATED": 0, "PREFETCH": 0}))
    assert "#if PREFETCH" not in plain and "#if ROTATED" not in plain and "REG" in plain


def test_batch_norm_stage_02_shows_its_two_ideas_apart():
    idea1 = str(show_diff("batchnorm_forward", "naive", "local_two_pass", {"COALESCED": 0}))
    assert "#if COALESCED" not in idea1 and "chunk" in idea1 and "*step = WG" not in idea1
    idea2 = str(show_diff("batchnorm_forward", "local_two_pass", "local_two_pass", {"COALESCED": 0}, {"COALESCED": 1}))
    changed = [ln for ln in idea2.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
    assert len(changed) == 3 and any("*step = WG" in ln for ln in changed), idea2


def test_batch_norm_switches_show_one_change_each():
    """Stage 02's SPLIT_SUMS, stage 05's EARLY_LOADS and stage 06's TWO_PASS_STATS: each diff holds
    only its own change."""
    def changed(text):
        return [ln for ln in text.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]

    split = changed(str(show_diff("batchnorm_backward", "local_two_pass", "local_two_pass",
                                  {"COALESCED": 1, "SPLIT_SUMS": 0}, {"SPLIT_SUMS": 1})))
    assert any("pass 2: sum of g * (x - mean)" in ln for ln in split if ln[0] == "+")
    assert any("both sums, as stage 01" in ln for ln in split if ln[0] == "-")
    assert not any("#if" in ln or "slab_part" in ln or "first = " in ln for ln in split), split
    early = changed(str(show_diff("batchnorm_backward", "fused", "fused", {"VEC4": 1, "REVERSE": 0, "EARLY_LOADS": 0},
                                  {"EARLY_LOADS": 1})))
    assert sum("this block's loads, issued first" in ln for ln in early if ln[0] == "+") == 2     # both kernels
    assert sum("only now" in ln for ln in early if ln[0] == "-") == 2
    assert not any("#if" in ln or "get_group_id" in ln for ln in early), early
    stats = changed(str(show_diff("batchnorm_forward", "one_pass", "one_pass", {"TWO_PASS_STATS": 0},
                                  {"TWO_PASS_STATS": 1})))
    assert any("wg_merge" in ln for ln in stats if ln[0] == "-") and any("DOTU(d, d)" in ln for ln in stats if ln[0] == "+")
    assert not any("#if" in ln or "bn_backward" in ln or "STOREU" in ln for ln in stats), stats


def test_a_shared_header_is_written_out_for_the_diff():
    """11_igemm_phases keeps its GEMM and kernel in common/phase_gemm.h, 11_igemm_delta writes its
    own: with the header inlined (its code, not its preamble or guard) and phases built like delta,
    the code both share is context of the diff, not a whole kernel added."""
    plain = str(show_diff("conv_dgrad", "igemm_phases", "igemm_delta").text).splitlines()
    both = str(show_diff("conv_dgrad", "igemm_phases", "igemm_delta", {"PHASE_CONSTANT": 0, "STORE_LOCAL": 0},
                         inline=("phase_gemm.h",)).text).splitlines()
    shared = "    if (n0 >= NP) return;                // the whole work-group: past this phase's positions"
    assert "+" + shared in plain and " " + shared in both
    assert not any(ln.startswith(("-#include \"phase_gemm.h\"", "-#ifndef PHASE_GEMM_H", "-// Switches (JIT"))
                   for ln in both)
    added = lambda lines: sum(ln.startswith("+") and not ln.startswith("+++") for ln in lines)
    assert added(both) < 0.8 * added(plain)         # delta's kernel body is no longer all new


def test_hidden_lines_are_masked_in_both_editions():
    """``hide``: every line holding the text, white space ignored, becomes one marker that says what
    it held (13b's diff shows the row its exercise asks for, in the code and in two comments); a text
    that no line holds any more is an error, not a silent no-op."""
    switches = {"TMA": 0, "FWD": 0, "ILV": 0, "WGMMA": 1, "TMA_STORE": 0}
    plain = show_diff("conv_dgrad", "tc_tf32_wgmma", "tc_tf32_tma", switches, {"TMA": 1}).text
    masked = show_diff("conv_dgrad", "tc_tf32_wgmma", "tc_tf32_tma", switches, {"TMA": 1},
                       hide={"+ (ph+PAD-r) / S": "the box's row"}).text
    assert "(ph + PAD - r) / S" in plain and "(ph + PAD - r) /" not in masked
    marks = [ln for ln in masked.splitlines() if "hidden: the box's row" in ln]
    assert len(marks) == 3 and all(ln.startswith("+ ") for ln in marks), marks
    assert len(masked.splitlines()) == len(plain.splitlines())       # three lines apart: a marker each
    with pytest.raises(ValueError, match="no line holds"):
        show_diff("conv_dgrad", "padded", "hoisted", hide={"(ph + PAD - r) / S": "absent"})


def test_a_header_for_both_languages_is_shown_in_opencl_c():
    """09_prefetch and chapter 10's stages keep their kernel in headers written once for OpenCL and
    CUDA with course.h's words (dgrad_prefetch.h, dgrad_slab*.h); inlined into an OpenCL stage's
    diff they read in OpenCL C, so 09_register_block -> 09_prefetch -> 10_transposed change only
    what the stages teach, not the spelling of their barriers, work-item functions and local arrays."""
    slab = ("dgrad_slab.h", "dgrad_slab_copy.h", "dgrad_slab_kernel.h")
    inline = ("dgrad_prefetch.h", slab[0], "dgrad_slab_transposed.h", *slab[1:])
    lines = str(show_diff("conv_dgrad", "prefetch", "transposed", inline=inline)).splitlines()
    changed = [ln for ln in lines if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
    words = ("KERNEL_LS", "LOCAL_MEM", "LOCAL_PTR", "LOCAL_ID", "GROUP_ID", "BARRIER", "RESTRICT", "GLOBAL ")
    assert not any(w in ln for ln in lines for w in words), [ln for ln in lines if any(w in ln for w in words)]
    assert not any("barrier(CLK_LOCAL_MEM_FENCE)" in ln or "get_local_id(0)" in ln for ln in changed), changed
    assert "+    __local float4 wt[2][ROWS * WROW / 4];" in lines
    assert "+#define WROW CB" in lines and "+    COPY_ONCE" in lines
    assert not any("#include" in ln for ln in changed), changed
    prefetch = str(show_diff("conv_dgrad", "register_block", "prefetch", inline=("dgrad_prefetch.h",)))
    assert "+    barrier(CLK_LOCAL_MEM_FENCE);" in prefetch and "BARRIER" not in prefetch
    assert '#include "dgrad_prefetch.h"' not in prefetch
    hoisted = str(show_diff("conv_dgrad", "padded", "hoisted",
                            inline=(slab[0], "dgrad_slab_padded.h", slab[1], "dgrad_slab_hoisted.h", slab[2])))
    removed = [ln for ln in hoisted.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    assert any("const int kk = (k0) + kk" in ln or "const int k = (k0) + kk" in ln for ln in removed), hoisted
    assert "+#define COPY_ONCE" in hoisted and "#include" not in hoisted


def test_batch_norm_unit_is_written_out_where_a_diff_changes_it():
    """Stages 05 and 06 take their unit (a float4 when VEC4, else a float) from batchnorm_unit.h:
    chapter 14's two diffs that change the unit (04 -> 05, and VEC4=0 in stage 05) inline it, so
    they show the unit's lines, not an added #include or nothing."""
    import json
    from pathlib import Path

    def changed(text):
        return [ln for ln in text.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]

    unit = ("batchnorm_unit.h",)
    added = changed(show_diff("batchnorm_forward", "vec4", "fused", {"VEC4": 1, "REVERSE": 0, "EARLY_LOADS": 0},
                              inline=unit).text)
    assert "+typedef float4 unit_t;" in added and not any("#include" in ln for ln in added), added
    scalar = changed(show_diff("batchnorm_forward", "fused", "fused", {"VEC4": 1, "REVERSE": 1, "EARLY_LOADS": 1},
                               {"VEC4": 0}, inline=unit).text)
    assert "-typedef float4 unit_t;" in scalar and "+typedef float unit_t;" in scalar, scalar
    notebook = json.loads((Path(__file__).parent.parent / "notebooks" / "14_batch_norm.ipynb").read_text())
    calls = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    calls = [c for c in calls if c.startswith("show_diff(") and ('"vec4", "fused"' in c or '{"VEC4": 0}' in c)]
    assert len(calls) == 2 and all('inline=("batchnorm_unit.h",)' in c for c in calls), calls


def test_chapter_10_diffs_show_the_layouts_their_stages_share_with_the_twins():
    """Chapter 10's stages and their CUDA twins state their layouts once, in a header each
    (dgrad_slab_transposed.h, _padded.h, _swizzle.h); inlined, the diffs between the stages show
    the layouts that change (WROW padded, WADDR swizzled, ROWCOPY's rows) and no #include."""
    padded = str(show_diff("conv_dgrad", "transposed", "padded",
                           inline=("dgrad_slab_transposed.h", "dgrad_slab_padded.h"))).splitlines()
    assert "-#define WROW CB" in padded and any(ln.startswith("+#define WROW (CB + 4)") for ln in padded)
    swizzle = str(show_diff("conv_dgrad", "padded", "swizzle", {"ROWCOPY": 0},
                            inline=("dgrad_slab_padded.h", "dgrad_slab_swizzle.h"))).splitlines()
    assert any(ln.startswith("+#define WADDR(R, cc)") and "^" in ln for ln in swizzle), swizzle
    rows = str(show_diff("conv_dgrad", "swizzle", "swizzle", {"ROWCOPY": 0}, {"ROWCOPY": 1},
                         inline=("dgrad_slab_swizzle.h",))).splitlines()
    assert any(ln.startswith("+#define DY_AT(i) (i)") for ln in rows), rows
    for diff in (padded, swizzle, rows):
        changed = [ln for ln in diff[2:] if ln[:1] in "+-"]
        assert changed and not any("#include" in ln for ln in changed), changed
        assert not any(f'"dgrad_slab_{x}.h"' in ln or "DGRAD_SLAB_" in ln for ln in diff
                       for x in ("transposed", "padded", "swizzle")), diff
