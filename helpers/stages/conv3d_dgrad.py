"""conv3d_dgrad: the 3-D input gradient through vol2col (chapter 11)."""
from ..launch import gemm
from .params import TILES_WG
from .stage import Stage

STAGES = [
    Stage("conv3d_dgrad", 11, "vol2col", "conv3d_dgrad/11_vol2col.cl",
          "GEMM over K into a column workspace (C*T*R*S x N*OD*OH*OW), then col2vol",
          family=gemm, launch="vol2col", defines=TILES_WG, requires=gemm.vol_requires),
]
