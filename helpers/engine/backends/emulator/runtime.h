// What the emulator's parts share (runtime.cpp: threads, blocks, launches; instructions.cpp: the
// warp- and warpgroup-level instructions, cp.async, the conversions; hopper.cpp: mbarriers and the
// Tensor Memory Accelerator). Not seen by kernels.
#ifndef COURSE_EMULATOR_RUNTIME_H
#define COURSE_EMULATOR_RUNTIME_H

#include <cstddef>
#include <ucontext.h>

#include "cuda.h"

namespace emu {
enum State { RUNNABLE, AT_BARRIER, AT_WARP, AT_MBARRIER, AT_NAMED_BARRIER, DONE };
enum Op { OP_MMA = 1, OP_LDMATRIX = 8,         // OP_MMA + kind (MMA_TF32, MMA_F16, MMA_BF16)
          OP_WGMMA = 16, OP_WG_COMMIT, OP_WG_WAIT };   // of the warpgroup (128 threads)
constexpr int MAX_THREADS = 1024, STACK = 128 * 1024, MAX_COPIES = 64, MAX_GROUPS = 16, MAX_WG_OPS = 64;
inline int width(int op) { return op >= OP_WGMMA ? 128 : 32; }

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
    int kind, n;                      // wgmma: operand type, width, accumulators, descriptors;
    unsigned long long da, db;        // wait_group: the groups that may stay pending (n); an
                                      // mbarrier wait: the barrier (addr), the phase's parity (n);
                                      // bar.sync 1: the threads it waits for (n)
    Copy copies[MAX_COPIES];          // cp.async copies not yet landed, in issue order ...
    int ncopies, group_end[MAX_GROUPS], ngroups;   // ... the committed ones in groups
};

extern Thread* current;               // the thread running now
extern char error[1024];              // what stopped the launch
extern bool copies_at_issue;          // cp.async lands when issued, not when waited for
char* shared_base();                  // the launched library's shared memory
size_t shared_size();
char* where(char* out, size_t n, const Thread* t);   // "block (x, y, z), thread (x, y, z)"
void block_until(State s);            // the running thread waits (back to the scheduler)
void land(Thread* t, int count);      // its oldest count cp.async copies land

// run by the scheduler once every thread an instruction involves has arrived (instructions.cpp);
// false with the error set where the instruction cannot run
const char* op_name(int op);
void run_mma(Thread* lanes, int kind);
bool run_ldmatrix(Thread* lanes);
bool run_warpgroup(Thread* group, int w);
void reset_warpgroups();
int pending_warpgroup(int nthreads);  // a warpgroup with wgmma operations not waited for, or -1
unsigned swizzled(unsigned address);  // where the 128-byte swizzle puts a shared byte
// hopper.cpp: mbarriers and the box copies that complete on them
void reset_mbarriers();
bool mbarrier_ready(Thread* t);       // the phase t waits for has completed (its copies landed now)
}  // namespace emu

#endif
