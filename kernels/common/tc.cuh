// Device code of the tensor-core stages (kernels/conv_dgrad/13_*.cu, chapter 13): 16-bit storage
// types and conversions, the warp-level matrix instructions as PTX, and the gather of dy' (dy
// times the activation's derivative) into the implicit GEMM's A operand.
//
// The GEMM: dx[(n,h,w)][c] = sum over (k,r,s) of dy'[(n,h,w)][(k,r,s)] * w[c][(k,r,s)]
//           M = N*H*W positions, N = C channels, K = K*KH*KW reduction (chapter 11's product,
//           transposed so that positions are mma rows and channels are mma columns).
// PTX is written inline (asm) so no CUDA header is needed: NVRTC compiles these files as they are.
#ifndef TC_CUH
#define TC_CUH

#include "course.cuh"

#ifndef KH
#define KH 3
#endif
#ifndef KW
#define KW 3
#endif
#ifndef STRIDE
#define STRIDE 1
#endif
#ifndef BF16
#define BF16 0            // 16-bit stages: 0 = fp16 (IEEE half), 1 = bfloat16
#endif

typedef unsigned short h16;   // the bits of one fp16 or bf16 value, as the host stores them

// -- the PTX instructions, one device function each ---------------------------------------
// (The tests' CPU build of the kernels, helpers/engine/backends/emulated.py, takes stand-ins that
// follow the PTX ISA instead.)
#ifdef COURSE_EMULATION
#include "emulated_ptx.h"
#else

// -- conversions --------------------------------------------------------------------------
// float -> tf32 (10-bit mantissa in a 32-bit word), rounding to nearest, ties away from zero;
// the host's reference rounds the same way (helpers/engine/tensor.py: to_tf32).
__device__ __forceinline__ unsigned tf32_bits(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

#if BF16
#define MMA_16 "bf16"
__device__ __forceinline__ float to_f32(h16 v) { return __uint_as_float((unsigned)v << 16); }
__device__ __forceinline__ h16 to_h16(float x) {
    h16 r;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}
#else
#define MMA_16 "f16"
__device__ __forceinline__ float to_f32(h16 v) {
    float r;
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(v));
    return r;
}
__device__ __forceinline__ h16 to_h16(float x) {
    h16 r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
    return r;
}
#endif

// -- warp-level matrix multiply-accumulate: d = a.b + d, fp32 accumulators ------------------
// m16n8k8 TF32. Lane l holds (g = l/4, t = l%4):  a0 A[g][t]  a1 A[g+8][t]  a2 A[g][t+4]
// a3 A[g+8][t+4];  b0 B[t][g]  b1 B[t+4][g];  c0..c3: four of C's 16x8 accumulators (which four
// is chapter 13's exercise; helpers/engine/fragments.py models every fragment).
__device__ __forceinline__ void mma_tf32(float c[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// m16n8k16 fp16 or bf16. Each register holds 2 values adjacent in k:  a0 A[g][2t..2t+1]
// a1 A[g+8][2t..]  a2 A[g][2t+8..]  a3 A[g+8][2t+8..];  b0 B[2t..2t+1][g]  b1 B[2t+8..][g];
// c as for TF32.
__device__ __forceinline__ void mma_16(float c[4], const unsigned a[4], const unsigned b[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_16 "." MMA_16 ".f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// -- shared-memory addresses, ldmatrix, cp.async -------------------------------------------
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// Four 8x8 matrices of 16-bit values; lane l gives the address of row l%8 of matrix l/8 (16
// bytes) and receives, of each matrix, row l/4 columns 2(l%4), 2(l%4)+1: an mma fragment.
__device__ __forceinline__ void ldmatrix_x4(unsigned r[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

// 16 bytes global -> shared without passing through registers; bytes = 0 writes zeros.
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N)); }
#endif

__device__ __forceinline__ float value(float v) { return v; }
__device__ __forceinline__ float value(h16 v) { return to_f32(v); }
__device__ __forceinline__ unsigned pack2(h16 lo, h16 hi) { return (unsigned)lo | ((unsigned)hi << 16); }

// -- the accumulators: a warp's 64 positions x 32 channels as 4 x 4 mma tiles of 16 x 8 -------
__device__ __forceinline__ void zero_acc(float acc[4][4][4]) {
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;
}

__device__ __forceinline__ void put(float* p, float v) { *p = v; }
__device__ __forceinline__ void put(h16* p, float v) { *p = to_h16(v); }   // rounded once, at the end
// how store_dx writes a value: stored (rounded to T), or added into a float32 dx by one split of
// the reduction among several (13_tc_nhwc.cu: SPLITK)
struct Store { template <typename T> __device__ __forceinline__ void operator()(T* p, float v) const { put(p, v); } };
struct Add { __device__ __forceinline__ void operator()(float* p, float v) const { atomicAdd(p, v); } };

// Where row m of the product lies in dx (NCHW): ok(m) is false past the positions, at(m) is the
// offset of (n, channel 0, h, w). Rows of most stages are positions m = (n, h, w) flattened;
// 13_tc_nhwc.cu's TMA blocks hold a patch of PN images x PH rows x PW columns, their row m within it
// (of one phase at stride step: the positions (n, i * step + ph, j * step + pw), i and j the patch's).
struct LinearRows {
    int NP, HW, C;
    __device__ __forceinline__ bool ok(int m) const { return m < NP; }
    __device__ __forceinline__ int at(int m) const { return m / HW * C * HW + m % HW; }
};
template <int ROWS, int COLS>          // the patch's rows and columns (PH, PW)
struct PatchRows {
    int n0, i0, j0, N, H, W, C, step, ph, pw;
    __device__ __forceinline__ int h(int m) const { return (i0 + m / COLS % ROWS) * step + ph; }
    __device__ __forceinline__ int w(int m) const { return (j0 + m % COLS) * step + pw; }
    __device__ __forceinline__ bool ok(int m) const { return n0 + m / (ROWS * COLS) < N && h(m) < H && w(m) < W; }
    __device__ __forceinline__ int at(int m) const { return ((n0 + m / (ROWS * COLS)) * C * H + h(m)) * W + w(m); }
};

// The warp's sums into dx (NCHW), from row m_warp and channel c_warp on, as MT x NT tiles of 16
// rows x 8 channels (4 x 4 for the mma.sync stages; 1 x BN/8 for a warp's share of a wgmma
// product): each lane's c0..c3 go to the rows and channels of its accumulator fragment (above).
// Rows past the positions and channels past C are not written.
template <int MT, int NT, typename T, typename Rows, typename Op = Store>
__device__ __forceinline__ void store_dx(T* dx, const float (&acc)[MT][NT][4], const Rows& rows, int m_warp, int c_warp,
                                         int g, int t, int C, int HW, Op write = Op()) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int m = m_warp + mt * 16 + g + (e >> 1) * 8;
                const int c = c_warp + nt * 8 + 2 * t + (e & 1);
                if (rows.ok(m) && c < C) write(&dx[rows.at(m) + c * HW], acc[mt][nt][e]);
            }
}
// the same for consecutive positions
template <int MT, int NT, typename T>
__device__ __forceinline__ void store_dx(T* dx, const float (&acc)[MT][NT][4], int m_warp, int c_warp, int g, int t,
                                         int NP, int C, int HW) {
    store_dx(dx, acc, LinearRows{NP, HW, C}, m_warp, c_warp, g, t, C, HW);
}

// Two B fragments from one ldmatrix.x4: channels 0-7 (``lo``) and 8-15 (``hi``) of a group of 16,
// each over two 16-byte chunks of k; lane l gives the address of channel (l / 16) * 8 + l % 8,
// chunk (l / 8) % 2.
__device__ __forceinline__ void ldmatrix_b2(unsigned lo[2], unsigned hi[2], unsigned addr) {
    unsigned r[4];
    ldmatrix_x4(r, addr);
    lo[0] = r[0];
    lo[1] = r[1];
    hi[0] = r[2];
    hi[1] = r[3];
}


// -- Hopper's warpgroup MMA (wgmma, sm_90a only) ------------------------------------------------
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)     // built for sm_90a / compute_90a: the only targets with wgmma
// A warpgroup (4 warps, 128 threads) multiplies a 64-row tile of A by an N-column tile of B, both
// read by the tensor cores straight from shared memory, into fp32 accumulators spread over its
// registers. Issued asynchronously: wgmma_commit closes a group of them, wgmma_wait<n> waits until
// at most n groups are in flight. The accumulators of warp w of the group are rows 16w .. 16w+15
// in the layout of mma.sync's C fragments, one 16 x 8 tile per 8 columns (store_dx reads them so).
//
// A shared tile is described by 64 bits: its start address, and how its rows lie. Here rows of 128
// bytes (one row of A or B: 32 tf32 or 64 16-bit values along the reduction), consecutive, with
// the 128-byte swizzle: the 16-byte chunk j of row r lies at chunk j ^ (r % 8). That is the layout
// 13_tc_nhwc.cu already gives its rows with CH = 8 (SWZ), chosen there for ldmatrix; the hardware
// undoes the XOR on its own, provided the tile starts at a multiple of 1024 bytes (8 rows).
// Fields: start address / 16 (bits 0-13), leading byte offset / 16 (16-29: unused by swizzled
// K-major tiles, 1 by convention), stride byte offset / 16 (32-45: 1024 bytes from one group of 8
// rows to the next), swizzle mode (62-63: 1 = 128 bytes). A k-step further along the rows starts
// 32 bytes further (8 tf32 or 16 16-bit values): the descriptor's address alone moves.
__device__ __forceinline__ unsigned long long wg_desc(unsigned addr) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32)
           | (1ull << 62);
}
// (The tests' CPU build takes stand-ins for the instructions from here on, as above.)
#ifdef COURSE_EMULATION
#include "emulated_hopper.h"
#else
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
// cp.async writes shared memory through the generic proxy, wgmma reads it through the async proxy:
// this fence (before the barrier that publishes a tile) orders the two.
__device__ __forceinline__ void fence_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Keeps the compiler from moving accumulator registers across an asynchronous wgmma.
__device__ __forceinline__ void pin(float* d, int n) {
    for (int i = 0; i < n; i++) asm volatile("" : "+f"(d[i]) :: "memory");
}

// d (64 x BN, fp32) += A (64 x k, shared, desc a) . B (k x BN, shared as BN rows of k, desc b), one
// k-step: k = 8 tf32 values (TF32_OPS) or 16 fp16/bf16 values, 32 bytes of every row. A thread
// holds BN / 2 accumulators, each an operand of the asm (%0 .. %BN/2-1; then the two descriptors
// and the scale of d): WGMMA_OUT32 binds them 32 at a time, WGMMA_R0 .. WGMMA_R3 name them.
#define WGMMA_OUT8(d, o) "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3]), \
                         "+f"(d[o + 4]), "+f"(d[o + 5]), "+f"(d[o + 6]), "+f"(d[o + 7])
#define WGMMA_OUT32(d, o) WGMMA_OUT8(d, o), WGMMA_OUT8(d, o + 8), WGMMA_OUT8(d, o + 16), WGMMA_OUT8(d, o + 24)
#define WGMMA_R0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WGMMA_R1 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WGMMA_R2 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define WGMMA_R3 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
                 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
// one wgmma of width N: REGS the accumulator list, A, B, P the operand numbers of the descriptors
// and the scale of d, then the accumulators bound
#define WGMMA_RUN(N, REGS, A, B, P, ...)                                                                \
    if (TF32_OPS)                                                                                       \
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %" #P ", 0;\n"                                     \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 {" REGS "}, %" #A ", %" #B ", p, 1, 1; }" \
                     : __VA_ARGS__ : "l"(a), "l"(b), "r"(1));                                                \
    else                                                                                                \
        asm volatile("{ .reg .pred p; setp.ne.b32 p, %" #P ", 0;\n"                                     \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." MMA_16 "." MMA_16 " {" REGS "}, %" #A ", %" #B \
                     ", p, 1, 1, 0, 0; }"                                                               \
                     : __VA_ARGS__ : "l"(a), "l"(b), "r"(1))
template <int BN_, bool TF32_OPS> struct Wgmma;
template <bool TF32_OPS> struct Wgmma<64, TF32_OPS> {
    static __device__ __forceinline__ void run(float* d, unsigned long long a, unsigned long long b) {
        WGMMA_RUN(64, WGMMA_R0, 32, 33, 34, WGMMA_OUT32(d, 0));
    }
};
template <bool TF32_OPS> struct Wgmma<128, TF32_OPS> {
    static __device__ __forceinline__ void run(float* d, unsigned long long a, unsigned long long b) {
        WGMMA_RUN(128, WGMMA_R0 ", " WGMMA_R1, 64, 65, 66, WGMMA_OUT32(d, 0), WGMMA_OUT32(d, 32));
    }
};
template <bool TF32_OPS> struct Wgmma<256, TF32_OPS> {
    static __device__ __forceinline__ void run(float* d, unsigned long long a, unsigned long long b) {
        WGMMA_RUN(256, WGMMA_R0 ", " WGMMA_R1 ", " WGMMA_R2 ", " WGMMA_R3, 128, 129, 130,
                  WGMMA_OUT32(d, 0), WGMMA_OUT32(d, 32), WGMMA_OUT32(d, 64), WGMMA_OUT32(d, 96));
    }
};

// -- bulk copies and the barriers they complete on (kernels/peak/wgmma.cu) -----------------------
// An mbarrier (8 bytes of shared memory) completes a phase when the arrivals given to mbar_init
// have arrived and the bytes announced by mbar_expect_bytes have landed; its parity bit then flips.
// mbar_wait(bar, p) returns once the phase of parity p has completed (phases 0, 1, 0, ...).
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void mbar_expect_bytes(unsigned bar, unsigned bytes) {   // and arrive
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n .reg .pred done;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 " @!done bra WAIT;\n}" :: "r"(bar), "r"(parity) : "memory");
}
// bytes (a multiple of 16) from global src to shared dst by the Tensor Memory Accelerator, one
// instruction; their arrival counts on bar
__device__ __forceinline__ void bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
// one arrival on bar (of the count given to mbar_init), no bytes
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
// barriers initialized by one thread are visible to the copies of the Tensor Memory Accelerator
// (and, after the block's barrier, to every thread)
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// A box of a tensor by the Tensor Memory Accelerator, one instruction: ``map`` (in global memory,
// made on the host: helpers/engine/backends/cuda.py: tensor_map) names the tensor, its extents,
// the box and the swizzle of the box in shared memory; the coordinates (innermost first, signed)
// are the box's first element. Elements outside the tensor arrive as zeros; the whole box's bytes
// count on bar.
__device__ __forceinline__ void tensor_copy_3d(unsigned dst, const void* map, int c0, int c1, int c2, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}
__device__ __forceinline__ void tensor_copy_4d(unsigned dst, const void* map, int c0, int c1, int c2, int c3,
                                               unsigned bar) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];"
                 :: "r"(dst), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar) : "memory");
}
// The other way: a box of shared memory (laid out densely, innermost coordinate fastest) written
// to the tensor at the coordinates, one instruction; elements outside the tensor are not written.
// The shared memory must stay until the copy has read it: tensor_store_wait.
__device__ __forceinline__ void tensor_store_4d(const void* map, unsigned src, int c0, int c1, int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];"
                 :: "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
__device__ __forceinline__ void tensor_store_wait() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// A barrier of the first n threads of the block only (barrier 1; __syncthreads is barrier 0)
__device__ __forceinline__ void bar_sync_first(int n) { asm volatile("bar.sync 1, %0;" :: "r"(n) : "memory"); }
#endif
#endif

// -- the A operand: dy' gathered for one position -------------------------------------------
// A thread walks the reduction index kk = (k*KH + r)*KW + s of its position in order, so
// (k, r, s) advance by counting instead of dividing.
struct Tap {
    int k, r, s;
};

__device__ __forceinline__ Tap tap_at(int kk) {
    Tap q;
    q.k = kk / (KH * KW);
    q.r = kk / KW % KH;
    q.s = kk % KW;
    return q;
}

__device__ __forceinline__ void next_tap(Tap& q) {
    if (++q.s == KW) {
        q.s = 0;
        if (++q.r == KH) { q.r = 0; ++q.k; }
    }
}

// The position pos = (n*H + h)*W + w whose row of A a thread gathers, decoded once: whether it
// exists (pos < N*H*W), where its image starts in dy, and its padded coordinates (h + PAD, w + PAD).
struct Position {
    bool ok;
    int dy_base, hp, wp;
};

__device__ __forceinline__ Position position_at(int pos, int NP, int H, int W, int K, int OH, int OW, int PAD) {
    const int HW = H * W;
    return Position{pos < NP, pos / HW * K * OH * OW, pos % HW / W + PAD, pos % W + PAD};
}

// Offset of dy[n][k][oh][ow] for position p and tap q, or -1 where the tap misses dy (outside it,
// between the strides, past K, or a position past N*H*W).
__device__ __forceinline__ int tap_offset(const Tap& q, const Position& p, int K, int OH, int OW) {
    const int oh_s = p.hp - q.r, ow_s = p.wp - q.s;
    if (!p.ok || q.k >= K || oh_s < 0 || ow_s < 0 || oh_s % STRIDE || ow_s % STRIDE) return -1;
    const int oh = oh_s / STRIDE, ow = ow_s / STRIDE;
    if (oh >= OH || ow >= OW) return -1;
    return p.dy_base + (q.k * OH + oh) * OW + ow;
}

// dy' at offset o (0 where o < 0): the activation's derivative fused into the read of dy.
template <typename T>
__device__ __forceinline__ float grad_at(const T* dy, const T* y, int o) {
    if (o < 0) return 0.0f;
#if ACT == ACT_NONE
    return value(dy[o]);
#else
    return value(dy[o]) * act_derivative(value(y[o]));
#endif
}

#endif
