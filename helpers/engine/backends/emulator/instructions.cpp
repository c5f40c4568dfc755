// The instructions of the emulator (runtime.h): mma.sync, ldmatrix and wgmma, run by the scheduler
// (runtime.cpp) once every thread they involve has given its operands, through the fragment tables
// set from NumPy's model (helpers/engine/fragments.py: emu_set_fragments); cp.async's groups; the
// PTX conversions, bit for bit.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "runtime.h"

namespace emu {
namespace {
// the fragment tables: (row, column) of each lane's values; ldmatrix: the lane giving each row's address
int frag_a_tf32[32][4][1][2], frag_b_tf32[32][2][1][2], frag_a_16[32][4][2][2], frag_b_16[32][2][2][2],
    frag_c[32][4][1][2], ldm_address_lane[4][8], ldm_value[32][2][2], frag_d_wgmma[128][128][1][2],
    swizzle_128b[8][8];
struct WgOp {                         // one wgmma.mma_async of a warpgroup, not yet run
    int kind, n;
    unsigned long long da, db;
    float* d[128];
};
struct Warpgroup {                    // its operations issued, the first committed ones in groups
    WgOp ops[MAX_WG_OPS];
    int nops, group_end[MAX_GROUPS], ngroups;
};
Warpgroup warpgroups[MAX_THREADS / 128];
}  // namespace

static float element(int kind, unsigned reg, int half) {
    if (kind == MMA_TF32) return __uint_as_float(reg & 0xFFFFE000u);   // the operand's TF32 bits
    const unsigned short bits = (unsigned short)(reg >> (16 * half));
    return kind == MMA_BF16 ? __uint_as_float((unsigned)bits << 16) : f16_to_f32(bits);
}

// D = A B + C for one warp, from the lanes' registers through the fragment tables
void run_mma(Thread* lanes, int kind) {
    const int K = kind == MMA_TF32 ? 8 : 16, halves = kind == MMA_TF32 ? 1 : 2;
    double A[16][16], B[16][8], C[16][8];
    for (auto& row : A) for (double& v : row) v = __builtin_nan("");
    for (auto& row : B) for (double& v : row) v = __builtin_nan("");
    for (int l = 0; l < 32; l++) {
        for (int j = 0; j < 4; j++)
            for (int h = 0; h < halves; h++) {
                const int* rc = kind == MMA_TF32 ? frag_a_tf32[l][j][h] : frag_a_16[l][j][h];
                A[rc[0]][rc[1]] = element(kind, lanes[l].a[j], h);
            }
        for (int j = 0; j < 2; j++)
            for (int h = 0; h < halves; h++) {
                const int* rc = kind == MMA_TF32 ? frag_b_tf32[l][j][h] : frag_b_16[l][j][h];
                B[rc[0]][rc[1]] = element(kind, lanes[l].b[j], h);
            }
        for (int j = 0; j < 4; j++) C[frag_c[l][j][0][0]][frag_c[l][j][0][1]] = lanes[l].c[j];
    }
    for (int l = 0; l < 32; l++)
        for (int j = 0; j < 4; j++) {
            const int m = frag_c[l][j][0][0], n = frag_c[l][j][0][1];
            double d = C[m][n];
            for (int k = 0; k < K; k++) d += A[m][k] * B[k][n];
            lanes[l].c[j] = (float)d;
        }
}

bool run_ldmatrix(Thread* lanes) {
    unsigned short M[4][8][8];
    const size_t size = shared_size();
    for (int m = 0; m < 4; m++)
        for (int r = 0; r < 8; r++) {
            Thread* t = &lanes[ldm_address_lane[m][r]];
            if (t->addr % 16 || t->addr + 16 > size) {
                char at[128];
                std::snprintf(error, sizeof error, "%s: ldmatrix row address %u is %s", where(at, sizeof at, t),
                              t->addr, t->addr % 16 ? "not 16-byte aligned" : "outside shared memory");
                return false;
            }
            std::memcpy(M[m][r], shared_base() + t->addr, 16);
        }
    for (int l = 0; l < 32; l++)
        for (int m = 0; m < 4; m++) {
            unsigned v = 0;
            for (int h = 0; h < 2; h++) v |= (unsigned)M[m][ldm_value[l][h][0]][ldm_value[l][h][1]] << (16 * h);
            lanes[l].r[m] = v;
        }
    return true;
}

// The byte of shared memory holding byte kb of row r of a K-major operand described by desc (the
// PTX ISA's matrix descriptor: start address, stride byte offset between groups of 8 rows, the
// 128-byte swizzle on the address's 16-byte chunk within its 128-byte line, by the line's place in
// its 1024-byte pattern); false, with the error set, for a layout this emulator does not model.
static bool operand_byte(unsigned long long desc, int r, int kb, unsigned& at) {
    const unsigned start = (unsigned)(desc & 0x3FFF) << 4, sbo = (unsigned)((desc >> 32) & 0x3FFF) << 4;
    const unsigned base_offset = (unsigned)(desc >> 49) & 7, mode = (unsigned)(desc >> 62);
    if (mode != 1 || base_offset) {
        std::snprintf(error, sizeof error, "wgmma descriptor %#llx: swizzle mode %u, base offset %u; the emulator "
                      "models K-major operands with the 128-byte swizzle (mode 1) and base offset 0", desc, mode, base_offset);
        return false;
    }
    at = swizzled(start + (unsigned)(r / 8) * sbo + (unsigned)(r % 8) * 128 + (unsigned)kb);
    if (at + 4 > shared_size()) {
        std::snprintf(error, sizeof error, "wgmma descriptor %#llx: row %d reads outside shared memory", desc, r);
        return false;
    }
    return true;
}

// D (64 x n) += A (64 x K, K-major) B^T (n x K, K-major), from shared memory now
static bool run_wgmma(const WgOp& op) {
    const int K = op.kind == MMA_TF32 ? 8 : 16, size = op.kind == MMA_TF32 ? 4 : 2;
    static float A[64][16], B[256][16];
    for (int which = 0; which < 2; which++)
        for (int r = 0; r < (which ? op.n : 64); r++)
            for (int k = 0; k < K; k++) {
                unsigned at, bits = 0;
                if (!operand_byte(which ? op.db : op.da, r, k * size, at)) return false;
                std::memcpy(&bits, shared_base() + at, size);
                (which ? B : A)[r][k] = element(op.kind, bits, 0);
            }
    for (int j = 0; j < 128; j++)
        for (int i = 0; i < op.n / 2; i++) {
            const int m = frag_d_wgmma[j][i][0][0], c = frag_d_wgmma[j][i][0][1];
            double d = op.d[j][i];
            for (int k = 0; k < K; k++) d += (double)A[m][k] * B[c][k];
            op.d[j][i] = (float)d;
        }
    return true;
}

// a warpgroup's collective instruction, all 128 threads arrived
static bool run_warpgroup_op(Thread* t, Warpgroup& wg) {
    char at[128];
    for (int j = 1; j < 128; j++)
        if (t[j].kind != t[0].kind || t[j].n != t[0].n || t[j].da != t[0].da || t[j].db != t[0].db) {
            std::snprintf(error, sizeof error, "%s: threads of one warpgroup give different operands to the same "
                          "wgmma instruction", where(at, sizeof at, &t[j]));
            return false;
        }
    if (t[0].op == OP_WGMMA) {
        if (wg.nops == MAX_WG_OPS) {
            std::snprintf(error, sizeof error, "%s: too many wgmma operations in flight", where(at, sizeof at, t));
            return false;
        }
        WgOp& op = wg.ops[wg.nops++];
        op = {t[0].kind, t[0].n, t[0].da, t[0].db, {}};
        for (int j = 0; j < 128; j++) op.d[j] = t[j].c;
    } else if (t[0].op == OP_WG_COMMIT) {
        if (wg.ngroups == MAX_GROUPS) {
            std::snprintf(error, sizeof error, "%s: too many wgmma groups in flight", where(at, sizeof at, t));
            return false;
        }
        wg.group_end[wg.ngroups++] = wg.nops;
    } else {                                     // wait: the oldest groups run, in order
        const int done = wg.ngroups - t[0].n;
        if (done <= 0) return true;
        const int count = wg.group_end[done - 1];
        for (int i = 0; i < count; i++)
            if (!run_wgmma(wg.ops[i])) return false;
        std::memmove(wg.ops, wg.ops + count, (wg.nops - count) * sizeof(WgOp));
        wg.nops -= count;
        for (int g = done; g < wg.ngroups; g++) wg.group_end[g - done] = wg.group_end[g] - count;
        wg.ngroups -= done;
    }
    return true;
}

const char* op_name(int op) {
    return op == OP_LDMATRIX ? "ldmatrix" : op == OP_MMA + MMA_TF32 ? "mma.m16n8k8.tf32"
           : op == OP_MMA + MMA_F16 ? "mma.m16n8k16.f16" : op == OP_MMA + MMA_BF16 ? "mma.m16n8k16.bf16"
           : op == OP_WGMMA ? "wgmma.mma_async" : op == OP_WG_COMMIT ? "wgmma.commit_group" : "wgmma.wait_group";
}

bool have_tables;

unsigned swizzled(unsigned address) {
    return (address & ~0x70u) | ((unsigned)swizzle_128b[(address >> 7) & 7][(address >> 4) & 7] << 4);
}

bool run_warpgroup(Thread* group, int w) { return run_warpgroup_op(group, warpgroups[w]); }

void reset_warpgroups() {
    for (Warpgroup& wg : warpgroups) wg.nops = wg.ngroups = 0;
}

int pending_warpgroup(int nthreads) {
    for (int w = 0; w * 128 < nthreads; w++)
        if (warpgroups[w].nops) return w;
    return -1;
}

void mma(int kind, float c[4], const unsigned* a, const unsigned* b) {
    current->op = OP_MMA + kind;
    current->c = c;
    current->a = a;
    current->b = b;
    block_until(AT_WARP);
}

void ldmatrix_x4(unsigned r[4], unsigned addr) {
    current->op = OP_LDMATRIX;
    current->addr = addr;
    current->r = r;
    block_until(AT_WARP);
}

void wgmma(int kind, int n, float* d, unsigned long long a, unsigned long long b) {
    if (n % 8 || n < 8 || n > 256) fail("wgmma of a width that is not a multiple of 8 up to 256");
    current->op = OP_WGMMA;
    current->kind = kind;
    current->n = n;
    current->c = d;
    current->da = a;
    current->db = b;
    block_until(AT_WARP);
}

void wgmma_commit() {
    current->op = OP_WG_COMMIT;
    current->kind = current->n = 0;
    current->da = current->db = 0;
    block_until(AT_WARP);
}

void wgmma_wait(int newest_pending) {
    current->op = OP_WG_WAIT;
    current->kind = 0;
    current->n = newest_pending;
    current->da = current->db = 0;
    block_until(AT_WARP);
}

unsigned shared_address(const void* p) {
    const char* q = static_cast<const char*>(p);
    if (!shared_size() || q < shared_base() || q >= shared_base() + shared_size()) fail("smem_addr of an address outside shared memory");
    return (unsigned)(q - shared_base());
}

void cp_async16(unsigned dst, const void* src, int bytes) {
    if (dst % 16 || dst + 16 > shared_size()) fail("cp.async destination not 16-byte aligned or outside shared memory");
    if (bytes < 0 || bytes > 16) fail("cp.async source size outside 0..16 bytes");
    if (bytes && (uintptr_t)src % 16) fail("cp.async source not 16-byte aligned");
    if (current->ncopies == MAX_COPIES) fail("too many cp.async copies in flight in one thread");
    current->copies[current->ncopies++] = {dst, static_cast<const unsigned char*>(src), bytes};
    if (copies_at_issue) land(current, current->ncopies);
}

void cp_async_commit() {
    if (current->ngroups == MAX_GROUPS) fail("too many cp.async groups in flight in one thread");
    current->group_end[current->ngroups++] = current->ncopies;
}

void cp_async_wait(int newest_pending) {
    Thread* t = current;
    const int done = t->ngroups - newest_pending;       // the oldest groups, which must have landed
    if (done <= 0) return;
    const int count = t->group_end[done - 1];
    land(t, count);
    for (int g = done; g < t->ngroups; g++) t->group_end[g - done] = t->group_end[g] - count;
    t->ngroups -= done;
}

unsigned cvt_rna_tf32(float x) {         // to nearest, ties away from zero; Inf and NaN kept
    const unsigned u = __float_as_uint(x);
    if ((u & 0x7F800000u) == 0x7F800000u) return u;
    return (u + 0x1000u) & 0xFFFFE000u;
}

unsigned short cvt_rn_f16(float x) {     // to nearest, ties to even; subnormals; overflow to Inf
    const unsigned u = __float_as_uint(x), sign = (u >> 16) & 0x8000u, m = u & 0x7FFFFFu;
    const int e = (int)((u >> 23) & 0xFF);
    if (e == 0xFF) return (unsigned short)(sign | 0x7C00u | (m ? 0x200u : 0u));
    const int E = e - 127 + 15;                         // the biased exponent in fp16
    if (E >= 31) return (unsigned short)(sign | 0x7C00u);
    unsigned r, rest, half;
    if (E <= 0) {                                       // subnormal in fp16: (1.m) 2^(E-14) / 2^-24
        const int shift = 14 - E;
        if (shift > 24) return (unsigned short)sign;
        const unsigned full = m | 0x800000u;
        r = full >> shift;
        rest = full & ((1u << shift) - 1);
        half = 1u << (shift - 1);
    } else {
        r = ((unsigned)E << 10) | (m >> 13);
        rest = m & 0x1FFFu;
        half = 0x1000u;
    }
    if (rest > half || (rest == half && (r & 1))) r++;  // a carry into the exponent is right, up to Inf
    return (unsigned short)(sign | r);
}

unsigned short cvt_rn_bf16(float x) {    // to nearest, ties to even; NaN to the canonical NaN
    const unsigned u = __float_as_uint(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
    return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

float f16_to_f32(unsigned short h) {
    const unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FFu;
    if (e == 0) {
        const float v = __builtin_ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31) return __uint_as_float(sign | 0x7F800000u | (m << 13));
    return __uint_as_float(sign | ((e - 15 + 127) << 23) | (m << 13));
}
}  // namespace emu

using namespace emu;

// The tables of helpers/engine/fragments.py, each an int32 array in C order.
extern "C" void emu_set_fragments(const int* a_tf32, const int* b_tf32, const int* a_16, const int* b_16,
                                  const int* c, const int* ldm_lanes, const int* ldm_values, const int* d_wgmma,
                                  const int* swizzle) {
    std::memcpy(frag_a_tf32, a_tf32, sizeof frag_a_tf32);
    std::memcpy(frag_b_tf32, b_tf32, sizeof frag_b_tf32);
    std::memcpy(frag_a_16, a_16, sizeof frag_a_16);
    std::memcpy(frag_b_16, b_16, sizeof frag_b_16);
    std::memcpy(frag_c, c, sizeof frag_c);
    std::memcpy(ldm_address_lane, ldm_lanes, sizeof ldm_address_lane);
    std::memcpy(ldm_value, ldm_values, sizeof ldm_value);
    std::memcpy(frag_d_wgmma, d_wgmma, sizeof frag_d_wgmma);
    std::memcpy(swizzle_128b, swizzle, sizeof swizzle_128b);
    have_tables = true;
}

// The conversions alone, for the tests that compare them with NumPy's.
extern "C" unsigned emu_cvt_rna_tf32(float x) { return cvt_rna_tf32(x); }
extern "C" unsigned short emu_cvt_rn_f16(float x) { return cvt_rn_f16(x); }
extern "C" unsigned short emu_cvt_rn_bf16(float x) { return cvt_rn_bf16(x); }
extern "C" float emu_f16_to_f32(unsigned short h) { return f16_to_f32(h); }
