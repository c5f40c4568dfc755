"""Chapter 11's model of gemm_core.h's two row and column mappings (pictures_gemm.c_rows, the
picture and the read counts drawn from it): every row of a tile is held by exactly one work-item,
GEMM_LDS4 = 1 holds runs of 4 consecutive rows, and the counts the chapter prints."""
import pytest

from helpers.chapters.pictures_gemm import c_rows, lds4_reads


@pytest.mark.parametrize("tiles, w", [(32, 8), (128, 8), (64, 4), (128, 4)])
@pytest.mark.parametrize("lds4", [0, 1])
def test_every_row_held_once(lds4, tiles, w):
    held = sorted(r for t in range(tiles // w) for r in c_rows(lds4, t, tiles, w))
    assert held == list(range(tiles))


@pytest.mark.parametrize("tiles, w", [(32, 8), (128, 8), (64, 4)])
def test_lds4_rows_come_in_aligned_runs_of_4(tiles, w):
    for t in range(tiles // w):
        rows = c_rows(1, t, tiles, w)
        for i in range(0, w, 4):
            assert rows[i] % 4 == 0 and rows[i:i + 4] == list(range(rows[i], rows[i] + 4))
        assert c_rows(0, t, tiles, w) == list(range(t, tiles, tiles // w))


def test_read_counts_of_the_recorded_tiles():
    off, on = lds4_reads(128, 128, 8, 8)
    assert (off["reads"], on["reads"], off["fmas"]) == (16, 4, 64)
    assert off["passes"] == on["passes"] == 16            # float4: one pass per quarter-warp


def test_store_sectors_of_the_phase_split():
    """One warp's store instruction (64x64 tiles, 4x4 blocks): from the registers with float4 tile
    reads each lane owns a sector (16 at stride 1, 32 at stride 2); through local memory the lanes
    write 32 consecutive positions (4 and 8 sectors), as registers without GEMM_LDS4 do."""
    from helpers.chapters.pictures_gemm import sectors, store_table, warp_store
    assert store_table()[1:] == ["registers, GEMM_LDS4=0           4         8",
                                 "registers, GEMM_LDS4=1          16        32",
                                 "STORE_LOCAL                      4         8"]
    lanes = warp_store(1, 1, 2)
    assert {r for r, _ in lanes} == {0} and [o for _, o in lanes] == list(range(0, 64, 2))
    assert sectors([(0, 0), (0, 7), (0, 8), (1, 0)]) == 3
