// The emulator's runtime (cuda.h): a launch runs its blocks one after another; a block's threads
// are fibers (ucontext) of the calling host thread, switched only where a thread must wait for
// others: __syncthreads (every thread of the block that has not returned), the warp-level
// instructions mma.sync and ldmatrix (the 32 lanes of a warp, which must all arrive at the same
// instruction) and the warpgroup-level wgmma (128 threads; its operations run when
// wgmma.wait_group requires them). Copies land as late as the kernel's waits allow, or in the
// eager schedule when issued, where warps also run ahead of each other (emu_launch). Shared memory is the section emu_shared, where cuda.h
// puts every __shared__ array, filled with all-ones bits (NaN in float32, fp16, bf16) before each
// block. A kernel that waits at different barriers, a warp instruction with a lane missing, a
// shared address outside shared memory, or a fault (an address outside every allocation) stops
// the launch with a message naming the block and thread. The fragment layouts of mma, ldmatrix
// and wgmma and the 128-byte swizzle are tables set from the NumPy model
// (helpers/engine/fragments.py: emu_set_fragments below).
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime.h"

namespace emu {
uint3 block_idx, block_dim, grid_dim;
Thread* current;
char error[1024];
bool copies_at_issue;
bool eager;                           // the eager schedule: copies at issue, the first warp ahead
extern bool have_tables;              // instructions.cpp

namespace {
Thread threads[MAX_THREADS];
char* stacks[MAX_THREADS];
int nthreads;
ucontext_t scheduler;
bool failed;
void (*entry)(void**);
void** entry_args;
sigjmp_buf fault_jump;
volatile int fault_signal;
void* volatile fault_address;
char* shared_start;                   // the launched kernel's library's shared-memory section
size_t shared_bytes;

void fiber_main() {
    entry(entry_args);
    land(current, current->ncopies);   // a copy the kernel never waited for still lands
    current->state = DONE;             // back to the scheduler (uc_link)
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
    reset_warpgroups();
    reset_mbarriers();
    char at[128];
    for (;;) {
        // every thread that can run runs to where it must wait; in the eager schedule only the
        // first warp that can, so that it gets as far ahead of the others as the barriers let it
        int first_warp = -1;
        for (int i = 0; i < n; i++)
            if (threads[i].state == RUNNABLE && (!eager || first_warp < 0 || i / 32 == first_warp)) {
                first_warp = i / 32;
                current = &threads[i];
                swapcontext(&scheduler, &threads[i].ctx);
                if (failed) return false;
            }
        int live = 0, waiting = 0, runnable = 0;
        for (int i = 0; i < n; i++) {
            live += threads[i].state != DONE;
            waiting += threads[i].state == AT_BARRIER;
            runnable += threads[i].state == RUNNABLE;
        }
        if (!live) {
            const int w = pending_warpgroup(n);
            if (w >= 0) {
                std::snprintf(error, sizeof error, "block (%u, %u, %u): warpgroup %d returned with wgmma operations "
                              "not waited for", block_idx.x, block_idx.y, block_idx.z, w);
                return false;
            }
            return true;
        }
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
            if (width(first->op) == 128) continue;      // the warpgroup's, below
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
        for (int w = 0; w * 128 < n; w++) {            // warpgroup-level instructions
            Thread* group = &threads[128 * w];
            const int count = n - 128 * w < 128 ? n - 128 * w : 128;
            int at_op = 0, exited = 0;
            Thread* first = nullptr;
            for (int j = 0; j < count; j++) {
                const bool here = group[j].state == AT_WARP && width(group[j].op) == 128;
                at_op += here;
                exited += group[j].state == DONE;
                if (here && !first) first = &group[j];
            }
            if (!first) continue;
            if (count < 128 || exited) {
                std::snprintf(error, sizeof error, "%s: %s in warpgroup %d, but %s", where(at, sizeof at, first),
                              op_name(first->op), w, count < 128 ? "the warpgroup has fewer than 128 threads" : "a thread of it has returned");
                return false;
            }
            if (at_op < 128) continue;
            for (int j = 0; j < 128; j++)
                if (group[j].op != first->op) {
                    std::snprintf(error, sizeof error, "%s: threads of warpgroup %d wait at different instructions (%s and %s)",
                                  where(at, sizeof at, &group[j]), w, op_name(first->op), op_name(group[j].op));
                    return false;
                }
            if (!run_warpgroup(group, w)) return false;
            for (int j = 0; j < 128; j++) group[j].state = RUNNABLE;
            moved = true;
        }
        int named = 0, named_count = 0;                // bar.sync 1, n
        for (int i = 0; i < n; i++) {
            Thread& t = threads[i];
            if (t.state == AT_MBARRIER && mbarrier_ready(&t)) {
                t.state = RUNNABLE;
                moved = true;
            }
            if (t.state == AT_NAMED_BARRIER) {
                named++;
                named_count = t.n;
            }
        }
        if (named && named == named_count) {
            for (int i = 0; i < n; i++) if (threads[i].state == AT_NAMED_BARRIER) threads[i].state = RUNNABLE;
            moved = true;
        }
        if (moved || runnable) continue;
        if (waiting == live) {
            for (int i = 0; i < n; i++) if (threads[i].state == AT_BARRIER) threads[i].state = RUNNABLE;
            continue;
        }
        for (int i = 0; i < n; i++)
            if (threads[i].state != DONE && threads[i].state != AT_BARRIER) {
                const Thread& t = threads[i];
                std::snprintf(error, sizeof error, "%s: waits at %s while no other thread of the block can move on: "
                              "a deadlock on the GPU", where(at, sizeof at, &t),
                              t.state == AT_WARP ? op_name(t.op) : t.state == AT_MBARRIER ? "an mbarrier" : "bar.sync 1");
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

char* shared_base() { return shared_start; }
size_t shared_size() { return shared_bytes; }

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

void block_until(State s) {
    current->state = s;
    swapcontext(&current->ctx, &scheduler);
}

const uint3& thread_idx() { return current->idx; }

void sync_block() { block_until(AT_BARRIER); }

void fail(const char* what) {
    char at[128];
    std::snprintf(error, sizeof error, "%s: %s", where(at, sizeof at, current), what);
    failed = true;
    block_until(DONE);
    std::abort();                     // never resumed
}
}  // namespace emu

using namespace emu;

// One launch: ``grid`` x ``block`` threads run ``fn`` with ``args``, its library's shared memory
// ``shared`` (``bytes`` long: emu_shared_section). Two schedules, the two ends of what a GPU may do:
// the lazy one (cp.async and TMA copies land as late as the kernel's waits allow; the warps of a
// block advance together) and the eager one (``early``: copies land when issued; the first warp
// that can run runs until it must wait, then the next). 0, or -1 with the message in ``err``. One
// runtime serves every kernel library (their threads' stacks).
extern "C" int emu_launch(void (*fn)(void**), void** args, const unsigned* grid, const unsigned* block,
                          char* shared, unsigned long bytes, int early, char* err, int errlen) {
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
    shared_start = shared;
    shared_bytes = shared ? bytes : 0;
    copies_at_issue = eager = early != 0;
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

