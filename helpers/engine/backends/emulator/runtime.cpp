// The emulator's runtime (cuda.h): a launch runs its blocks one after another; a block's threads
// are fibers (ucontext) of the calling host thread, switched only where a thread must wait for
// others: __syncthreads (every thread of the block that has not returned) and the warp-level
// instructions mma.sync and ldmatrix (the 32 lanes of a warp, which must all arrive at the same
// instruction). Shared memory is the section emu_shared, where cuda.h puts every __shared__
// array, filled with all-ones bits (NaN in float32, fp16, bf16) before each block. A kernel that
// waits at different barriers, a warp instruction with a lane missing, a shared address outside
// shared memory, or a fault (an address outside every allocation) stops the launch with a message
// naming the block and thread. The fragment layouts of mma and ldmatrix are tables set from the
// NumPy model (helpers/engine/fragments.py: emu_set_fragments below).
#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "cuda.h"

extern char __start_emu_shared[] __attribute__((weak, visibility("hidden")));
extern char __stop_emu_shared[] __attribute__((weak, visibility("hidden")));

namespace emu {
uint3 block_idx, block_dim, grid_dim;

namespace {
enum State { RUNNABLE, AT_BARRIER, AT_WARP, DONE };
enum Op { OP_MMA = 1, OP_LDMATRIX = 8 };        // OP_MMA + kind (MMA_TF32, MMA_F16, MMA_BF16)
constexpr int MAX_THREADS = 1024, STACK = 256 * 1024, MAX_COPIES = 64, MAX_GROUPS = 16;

struct Copy {
    unsigned dst;
    const unsigned char* src;
    int bytes;
};
struct Thread {
    ucontext_t ctx;
    uint3 idx;
    State state;
    int op;                           // the warp-level instruction it waits at
    float* c;                         // mma: accumulators (in and out), A and B registers
    const unsigned *a, *b;
    unsigned addr;                    // ldmatrix: the row address it gives, its 4 registers
    unsigned* r;
    Copy copies[MAX_COPIES];          // cp.async copies not yet landed, in issue order ...
    int ncopies, group_end[MAX_GROUPS], ngroups;   // ... the committed ones in groups
};

Thread threads[MAX_THREADS];
char* stacks[MAX_THREADS];
int nthreads;
Thread* current;
ucontext_t scheduler;
char error[1024];
bool failed;
void (*entry)(void**);
void** entry_args;
sigjmp_buf fault_jump;
volatile int fault_signal;
void* volatile fault_address;

// the fragment tables: (row, column) of each lane's values; ldmatrix: the lane giving each row's address
int frag_a_tf32[32][4][1][2], frag_b_tf32[32][2][1][2], frag_a_16[32][4][2][2], frag_b_16[32][2][2][2],
    frag_c[32][4][1][2], ldm_address_lane[4][8], ldm_value[32][2][2];
bool have_tables;

char* shared_base() { return __start_emu_shared; }
size_t shared_size() { return __start_emu_shared ? (size_t)(__stop_emu_shared - __start_emu_shared) : 0; }

char* where(char* out, size_t n, const Thread* t) {
    std::snprintf(out, n, "block (%u, %u, %u), thread (%u, %u, %u)", block_idx.x, block_idx.y, block_idx.z,
                  t->idx.x, t->idx.y, t->idx.z);
    return out;
}

void land(Thread* t, int count) {      // the oldest ``count`` copies of t, in order
    char* base = shared_base();
    for (int i = 0; i < count; i++) {
        const Copy& c = t->copies[i];
        std::memcpy(base + c.dst, c.src, c.bytes);
        std::memset(base + c.dst + c.bytes, 0, 16 - c.bytes);
    }
    std::memmove(t->copies, t->copies + count, (t->ncopies - count) * sizeof(Copy));
    t->ncopies -= count;
}

void fiber_main() {
    entry(entry_args);
    land(current, current->ncopies);   // a copy the kernel never waited for still lands
    current->state = DONE;             // back to the scheduler (uc_link)
}

void block_until(State s) {
    current->state = s;
    swapcontext(&current->ctx, &scheduler);
}

float element(int kind, unsigned reg, int half) {
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

const char* op_name(int op) {
    return op == OP_LDMATRIX ? "ldmatrix" : op == OP_MMA + MMA_TF32 ? "mma.m16n8k8.tf32"
           : op == OP_MMA + MMA_F16 ? "mma.m16n8k16.f16" : "mma.m16n8k16.bf16";
}

// one block: every thread from its start to its return
bool run_block() {
    const int n = nthreads;
    for (int i = 0; i < n; i++) {
        Thread& t = threads[i];
        t.idx = {(unsigned)i % block_dim.x, (unsigned)i / block_dim.x % block_dim.y, (unsigned)i / (block_dim.x * block_dim.y)};
        t.state = RUNNABLE;
        t.ncopies = t.ngroups = 0;
        getcontext(&t.ctx);
        t.ctx.uc_stack.ss_sp = stacks[i];
        t.ctx.uc_stack.ss_size = STACK;
        t.ctx.uc_link = &scheduler;
        makecontext(&t.ctx, fiber_main, 0);
    }
    if (shared_size()) std::memset(shared_base(), 0xFF, shared_size());
    char at[128];
    for (;;) {
        for (int i = 0; i < n; i++)
            if (threads[i].state == RUNNABLE) {
                current = &threads[i];
                swapcontext(&scheduler, &threads[i].ctx);
                if (failed) return false;
            }
        int live = 0, waiting = 0;
        for (int i = 0; i < n; i++) {
            live += threads[i].state != DONE;
            waiting += threads[i].state == AT_BARRIER;
        }
        if (!live) return true;
        bool moved = false;
        for (int w = 0; w * 32 < n; w++) {
            Thread* lanes = &threads[32 * w];
            const int count = n - 32 * w < 32 ? n - 32 * w : 32;
            int at_op = 0, exited = 0;
            for (int l = 0; l < count; l++) {
                at_op += lanes[l].state == AT_WARP;
                exited += lanes[l].state == DONE;
            }
            if (!at_op) continue;
            Thread* first = nullptr;
            for (int l = 0; l < count && !first; l++) if (lanes[l].state == AT_WARP) first = &lanes[l];
            if (count < 32 || exited) {
                std::snprintf(error, sizeof error, "%s: %s in warp %d, but %s", where(at, sizeof at, first),
                              op_name(first->op), w, count < 32 ? "the warp has fewer than 32 threads" : "a lane of it has returned");
                return false;
            }
            if (at_op < 32) continue;                   // the other lanes are still on their way
            for (int l = 0; l < 32; l++)
                if (lanes[l].op != first->op) {
                    std::snprintf(error, sizeof error, "%s: lanes of warp %d wait at different warp-level instructions "
                                  "(%s and %s)", where(at, sizeof at, &lanes[l]), w, op_name(first->op), op_name(lanes[l].op));
                    return false;
                }
            if (first->op == OP_LDMATRIX) {
                if (!run_ldmatrix(lanes)) return false;
            } else {
                run_mma(lanes, first->op - OP_MMA);
            }
            for (int l = 0; l < 32; l++) lanes[l].state = RUNNABLE;
            moved = true;
        }
        if (moved) continue;
        if (waiting == live) {
            for (int i = 0; i < n; i++) if (threads[i].state == AT_BARRIER) threads[i].state = RUNNABLE;
            continue;
        }
        for (int i = 0; i < n; i++)
            if (threads[i].state == AT_WARP) {
                std::snprintf(error, sizeof error, "%s: waits at %s while other threads of the block wait at "
                              "__syncthreads: a deadlock on the GPU", where(at, sizeof at, &threads[i]), op_name(threads[i].op));
                return false;
            }
        return false;
    }
}

void on_fault(int sig, siginfo_t* info, void*) {
    fault_signal = sig;
    fault_address = info->si_addr;
    siglongjmp(fault_jump, 1);
}
}  // namespace

const uint3& thread_idx() { return current->idx; }

void sync_block() { block_until(AT_BARRIER); }

void fail(const char* what) {
    char at[128];
    std::snprintf(error, sizeof error, "%s: %s", where(at, sizeof at, current), what);
    failed = true;
    block_until(DONE);
    std::abort();                     // never resumed
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
                                  const int* c, const int* ldm_lanes, const int* ldm_values) {
    std::memcpy(frag_a_tf32, a_tf32, sizeof frag_a_tf32);
    std::memcpy(frag_b_tf32, b_tf32, sizeof frag_b_tf32);
    std::memcpy(frag_a_16, a_16, sizeof frag_a_16);
    std::memcpy(frag_b_16, b_16, sizeof frag_b_16);
    std::memcpy(frag_c, c, sizeof frag_c);
    std::memcpy(ldm_address_lane, ldm_lanes, sizeof ldm_address_lane);
    std::memcpy(ldm_value, ldm_values, sizeof ldm_value);
    have_tables = true;
}

// One launch: ``grid`` x ``block`` threads run ``fn`` with ``args``. 0, or -1 with the message in ``err``.
extern "C" int emu_launch(void (*fn)(void**), void** args, const unsigned* grid, const unsigned* block, char* err,
                          int errlen) {
    const unsigned n = block[0] * block[1] * block[2];
    error[0] = 0;
    failed = false;
    if (!have_tables) std::snprintf(error, sizeof error, "the fragment tables were not set (emu_set_fragments)");
    else if (n == 0 || n > MAX_THREADS) std::snprintf(error, sizeof error, "blocks of %u threads (1 to %d)", n, MAX_THREADS);
    if (error[0]) {
        std::snprintf(err, errlen, "%s", error);
        return -1;
    }
    const long page = sysconf(_SC_PAGESIZE);
    for (unsigned i = 0; i < n; i++)
        if (!stacks[i]) {          // a stack per thread, its lowest page a guard against overflow
            void* p = mmap(nullptr, STACK + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) {
                std::snprintf(err, errlen, "no memory for the threads' stacks");
                return -1;
            }
            mprotect(p, page, PROT_NONE);
            stacks[i] = (char*)p + page;
        }
    entry = fn;
    entry_args = args;
    nthreads = (int)n;
    block_dim = {block[0], block[1], block[2]};
    grid_dim = {grid[0], grid[1], grid[2]};
    static char alt[64 * 1024];
    stack_t ss{}, old_ss{};
    ss.ss_sp = alt;
    ss.ss_size = sizeof alt;
    sigaltstack(&ss, &old_ss);
    struct sigaction sa{}, old[3];
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    const int sigs[3] = {SIGSEGV, SIGBUS, SIGFPE};
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &old[i]);
    bool ok = true;
    if (sigsetjmp(fault_jump, 1) == 0) {
        for (unsigned z = 0; z < grid[2] && ok; z++)
            for (unsigned y = 0; y < grid[1] && ok; y++)
                for (unsigned x = 0; x < grid[0] && ok; x++) {
                    block_idx = {x, y, z};
                    ok = run_block();
                }
    } else {
        char at[128];
        const char* stack = "";
        for (unsigned i = 0; i < n; i++)
            if ((char*)fault_address >= stacks[i] - page && (char*)fault_address < stacks[i]) stack = " (a thread's stack overflowed)";
        std::snprintf(error, sizeof error, "%s: %s at address %p%s", where(at, sizeof at, current),
                      fault_signal == SIGFPE ? "arithmetic fault (an integer division by zero?)" : "memory fault",
                      fault_address, stack);
        ok = false;
    }
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], nullptr);
    sigaltstack(&old_ss, nullptr);
    if (!ok) std::snprintf(err, errlen, "%s", error[0] ? error : "the launch stopped");
    return ok ? 0 : -1;
}

// The conversions alone, for the tests that compare them with NumPy's.
extern "C" unsigned emu_cvt_rna_tf32(float x) { return cvt_rna_tf32(x); }
extern "C" unsigned short emu_cvt_rn_f16(float x) { return cvt_rn_f16(x); }
extern "C" unsigned short emu_cvt_rn_bf16(float x) { return cvt_rn_bf16(x); }
extern "C" float emu_f16_to_f32(unsigned short h) { return f16_to_f32(h); }
