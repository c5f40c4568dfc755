"""The fragment model (helpers/engine/fragments.py) against the PTX ISA's layout tables.

Each rule below is the PTX ISA's own, in its own terms (section names cited; the ISA numbers a
lane's elements a0, a1, ... "low to high" across its registers, two 16-bit elements per .f16x2
register, the lower half first), where the model maps (lane, register, half). A wrong entry in
the model fails here, and in the emulated kernels that run on it (tests/test_emulated.py)."""
import pytest

from helpers.chapters import pictures_tensor_cores
from helpers.engine import fragments


def group_id(lane):              # groupID = %laneid >> 2
    return lane >> 2


def thread_in_group(lane):       # threadID_in_group = %laneid % 4
    return lane % 4


# "Matrix Fragments for mma.m16n8k8", multiplicand A, .tf32 (four .b32 registers, a0..a3)
def isa_m16n8k8_tf32_a(lane, i):
    row = group_id(lane) if i in (0, 2) else group_id(lane) + 8
    col = thread_in_group(lane) if i in (0, 1) else thread_in_group(lane) + 4
    return row, col


# "Matrix Fragments for mma.m16n8k8", multiplicand B, .tf32 (two .b32 registers, b0, b1)
def isa_m16n8k8_tf32_b(lane, i):
    return (thread_in_group(lane) if i == 0 else thread_in_group(lane) + 4), group_id(lane)


# "Matrix Fragments for mma.m16n8k8" and "... for mma.m16n8k16 with floating point type":
# accumulators C or D, .f32 (four registers, c0..c3)
def isa_accumulator(lane, i):
    return (group_id(lane) if i < 2 else group_id(lane) + 8), thread_in_group(lane) * 2 + (i & 0x1)


# "Matrix Fragments for mma.m16n8k16 with floating point type", multiplicand A, .f16 / .bf16
# (four .f16x2 registers, a0..a7)
def isa_m16n8k16_a(lane, i):
    row = group_id(lane) if 0 <= i < 2 or 4 <= i < 6 else group_id(lane) + 8
    col = thread_in_group(lane) * 2 + (i & 0x1) + (8 if i >= 4 else 0)
    return row, col


# the same section, multiplicand B, .f16 / .bf16 (two .f16x2 registers, b0..b3)
def isa_m16n8k16_b(lane, i):
    return thread_in_group(lane) * 2 + (i & 0x1) + (8 if i >= 2 else 0), group_id(lane)


RULES = {("m16n8k8", "A"): (isa_m16n8k8_tf32_a, 4), ("m16n8k8", "B"): (isa_m16n8k8_tf32_b, 2),
         ("m16n8k8", "C"): (isa_accumulator, 4), ("m16n8k16", "A"): (isa_m16n8k16_a, 8),
         ("m16n8k16", "B"): (isa_m16n8k16_b, 4), ("m16n8k16", "C"): (isa_accumulator, 4)}


@pytest.mark.parametrize("shape, operand", RULES, ids=lambda v: str(v))
def test_mma_fragments_follow_the_isa(shape, operand):
    rule, elements = RULES[shape, operand]
    frag = fragments.fragment(shape, operand)
    rows, cols, regs, per_reg = fragments.SHAPES[shape][operand]
    assert regs * per_reg == elements and frag.shape == (32, regs, per_reg, 2)
    seen = set()
    for lane in range(32):
        for i in range(elements):        # element i: register i / per_reg, half i % per_reg
            got = tuple(int(v) for v in frag[lane, i // per_reg, i % per_reg])
            assert got == rule(lane, i), (shape, operand, lane, i)
            seen.add(got)
    assert seen == {(r, c) for r in range(rows) for c in range(cols)}     # every element, once


def test_ldmatrix_x4_follows_the_isa():
    """"Warp-level matrix load instruction: ldmatrix": with .x4, threads 0-7 give the addresses of
    the first matrix's rows (addr0-addr7), 8-15 the second's, 16-23 the third's, 24-31 the fourth's;
    each matrix lands in the next destination register; a group of four consecutive threads loads
    one row, thread 0 receiving the first fragment (the figure "ldmatrix fragment layout for one 8x8
    Matrix with 16-bit elements": thread 4r + j holds row r, columns 2j and 2j + 1)."""
    lanes, values = fragments.ldmatrix_x4()
    for m in range(4):
        assert [int(v) for v in lanes[m]] == list(range(8 * m, 8 * m + 8))
    for lane in range(32):
        for h in range(2):
            assert tuple(int(v) for v in values[lane, h]) == (lane // 4, 2 * (lane % 4) + h)


def test_ldmatrix_addresses_are_the_ones_the_kernels_give():
    """What the two layouts ask of ldmatrix.x4's addresses (fragments.ldmatrix_rows) is what the
    kernels compute (13_tc_fp16_ldm.cu, 13_tc_fp16_pipe.cu, 13_tc_nhwc.cu): for A, row lane % 16,
    chunk lane / 16; for two B tiles, row (lane / 16) * 8 + lane % 8, chunk (lane / 8) % 2."""
    assert fragments.ldmatrix_rows("A") == [(lane & 15, lane >> 4) for lane in range(32)]
    assert fragments.ldmatrix_rows("B") == [(((lane >> 4) << 3) + (lane & 7), (lane >> 3) & 1) for lane in range(32)]


def test_wgmma_accumulators_follow_the_isa():
    """"Matrix Fragments for wgmma.mma_async.m64nNk16" (and m64nNk8), accumulator D, .f32: N/2
    registers d0, d1, ... per thread; the figure ("WGMMA .m64nNk16 register fragment layout for
    accumulator matrix D") gives warp w of the warpgroup (%warpid % 4) rows 16w .. 16w + 15 and lays
    out each 8 columns as the mma accumulators: d(4j + i) of a lane is row 16w + groupID (+ 8 for
    i >= 2), column 8j + threadID_in_group * 2 + (i & 1)."""
    for n in (8, 64, 256):
        d = fragments.wgmma_accumulator(n)
        assert d.shape == (128, n // 2, 1, 2)
        seen = set()
        for thread in range(128):
            warp, lane = thread // 32, thread % 32
            for r in range(n // 2):
                j, i = r // 4, r % 4
                want = (16 * warp + group_id(lane) + (8 if i >= 2 else 0), 8 * j + thread_in_group(lane) * 2 + (i & 1))
                assert tuple(int(v) for v in d[thread, r, 0]) == want, (n, thread, r)
                seen.add(want)
        assert seen == {(m, c) for m in range(64) for c in range(n)}
    assert (fragments.wgmma_accumulator(64) == fragments.wgmma_accumulator(256)[:, :32]).all()


def test_128_byte_swizzle_follows_the_isa():
    """"Shared Memory Matrix Layout" (wgmma's operands in shared memory), 128B swizzling mode: the
    canonical K-major layout under Swizzle<3, 4, 3>, CuTe's function of the byte offset that XORs
    bits 7-9 (the 128-byte line's place in a 1024-byte pattern, which must start at a 1024-byte
    boundary for base offset 0, "Matrix Descriptor Format") into bits 4-6 (the 16-byte chunk); and
    13_tc_nhwc.cu's SWZ for 128-byte rows (CH = 8: chunk j of row r at j ^ (r % 8)) is that layout."""
    def swizzle_343(offset):                 # Swizzle<B=3, M=4, S=3>: yyy bits [M+S, M+S+B) into [M, M+B)
        return offset ^ ((offset & (0b111 << 7)) >> 3)

    table = fragments.swizzle_128b()
    for offset in range(0, 4096, 16):
        line, chunk = offset // 128, offset % 128 // 16
        assert swizzle_343(offset) == line * 128 + 16 * int(table[line % 8, chunk]), offset
    for r in range(16):
        for j in range(8):
            assert r * 128 + ((j ^ (r & 7)) << 4) == swizzle_343(r * 128 + 16 * j)       # the kernel's SWZ


def test_one_model_for_the_chapter_and_the_emulator():
    """Chapter 13's picture and exercise read the same model the emulator's tables come from."""
    assert pictures_tensor_cores.fragment_owner is fragments.fragment_owner
    assert fragments.fragment_owner("C", 9, 5) == (4 * 1 + 2, 3)        # row g + 8, column 2t + 1
    t = fragments.tables()
    assert (t["a_16"] == fragments.fragment("m16n8k16", "A")).all() and (t["c"] == fragments.fragment("m16n8k8", "C")).all()
    with pytest.raises(ValueError, match="no element"):
        fragments.owner("m16n8k16", "B", 16, 0)
