// Stage 10: the transposed weight slab, padded.
//
// What changed since 10_transposed: each row of the weight slab holds CB + 4 floats instead of
// CB (WROW). The copy's consecutive work-items store one channel's weights down a column, rows
// apart; with rows of CB = 32 floats every store hit the same bank. With CB + 4 consecutive rows
// start 4 banks further on, so 8 rows cover the 32 banks before one repeats: a warp's store goes
// in 4 passes instead of up to 32. Padding by 1 float would spread the rows over all 32 banks,
// but then a row no longer starts on a 16-byte boundary and the float4 reads of the inner loop
// would break; 4 is the least padding that keeps them. The reads themselves are unchanged.
//
// Why: a replayed access costs the local-memory pipeline a pass per replay; the stores of the
// copy happen once per chunk for every group, and with 32-way conflicts they cost as much as a
// large part of the chunk's reads. Padding costs 4 x ROWS floats of local memory per half.
//
// Memory safety: as 10_transposed.
//
// Measured: notebooks/10_bank_conflicts.ipynb (this device, and the GPU runs recorded in results/).
//
// Layouts: as 10_transposed, with WROW = CB + 4.
// NDRange and JIT parameters: as 10_transposed.

#include "dgrad_slab.h"

#include "dgrad_slab_padded.h"

#include "dgrad_slab_copy.h"

#include "dgrad_slab_kernel.h"
