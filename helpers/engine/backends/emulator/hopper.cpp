// Hopper's copies and barriers in the emulator (runtime.h): mbarriers (arrivals, transaction bytes,
// phases), the Tensor Memory Accelerator's box copies through tensor maps (made by the host:
// emulated.py's tensor_map, the layout below) and its box store, bulk copies. A copy lands, and
// counts its bytes on its mbarrier, when a thread waits on that barrier (or, in the launch's other
// mode, when issued), so a kernel that reads a slot without waiting reads what was there before.
// A box lies in shared memory densely, innermost coordinate fastest; with the 128-byte swizzle
// (rows of exactly 128 bytes, the only ones the kernels copy so) each row's 16-byte chunks are
// placed by the same swizzle table as wgmma's operands (instructions.cpp: swizzled).
#include <cstdio>
#include <cstring>

#include "runtime.h"

namespace emu {
namespace {
struct TensorMap {                    // what emulated.py's tensor_map packs (128 bytes)
    unsigned long long base;
    unsigned rank, item, swizzle, unused;
    unsigned long long dims[5], strides[5];   // extents, innermost first; bytes from one index to the next
    unsigned box[5];
};
static_assert(sizeof(TensorMap) == 128, "tensor_map packs 128 bytes");

struct Mbarrier {                     // an mbarrier: its shared address and state
    unsigned addr;
    int expected, pending, tx;
    unsigned completed;               // phases completed; the one in progress has parity completed % 2
};
struct Pending {                      // a box copy not landed yet
    unsigned dst, bar;
    const TensorMap* map;
    int coord[5];
};
constexpr int MAX_BARRIERS = 64, MAX_PENDING = 256;
Mbarrier barriers[MAX_BARRIERS];
int nbarriers;
Pending pending[MAX_PENDING];
int npending;

Mbarrier* find(unsigned addr) {
    for (int i = 0; i < nbarriers; i++)
        if (barriers[i].addr == addr) return &barriers[i];
    return nullptr;
}

Mbarrier* barrier_at(unsigned addr) {
    Mbarrier* b = find(addr);
    if (!b) fail("an mbarrier used before mbarrier.init");
    return b;
}

void settle(Mbarrier* b) {            // the phase completes once all arrived and all bytes landed
    if (b->pending == 0 && b->tx == 0) {
        b->completed++;
        b->pending = b->expected;
    }
}

// element ``index`` of the box at ``coord``: its byte in global memory, or null outside the tensor
unsigned char* global_element(const TensorMap* m, const int* coord, long index) {
    unsigned long long offset = 0;
    for (unsigned d = 0; d < m->rank; d++) {
        const long c = coord[d] + index % m->box[d];
        index /= m->box[d];
        if (c < 0 || (unsigned long long)c >= m->dims[d]) return nullptr;
        offset += (unsigned long long)c * m->strides[d];
    }
    return reinterpret_cast<unsigned char*>(m->base + offset);
}

long box_elements(const TensorMap* m) {
    long n = 1;
    for (unsigned d = 0; d < m->rank; d++) n *= m->box[d];
    return n;
}

unsigned shared_element(const TensorMap* m, unsigned at, long index) {
    const unsigned logical = at + (unsigned)(index * m->item);
    return m->swizzle ? swizzled(logical) : logical;
}

void land_box(const Pending& p) {
    const TensorMap* m = p.map;
    const long n = box_elements(m);
    for (long i = 0; i < n; i++) {
        const unsigned at = shared_element(m, p.dst, i);
        const unsigned char* src = global_element(m, p.coord, i);
        if (src) std::memcpy(shared_base() + at, src, m->item);
        else std::memset(shared_base() + at, 0, m->item);           // outside the tensor: zeros
    }
    Mbarrier* b = find(p.bar);
    b->tx -= (int)(n * m->item);        // the whole box counts, zeros included
    settle(b);
}

const TensorMap* checked(const void* map, unsigned rank, unsigned dst) {
    const TensorMap* m = static_cast<const TensorMap*>(map);
    if (m->rank != rank) fail("a tensor copy of another rank than its tensor map's");
    if (m->swizzle && (m->box[0] * m->item != 128 || dst % 1024))
        fail("a swizzled box whose rows are not 128 bytes or whose shared address is not a multiple of 1024 "
             "(the emulator models the 128-byte swizzle on 128-byte rows)");
    if (dst + (size_t)box_elements(m) * m->item > shared_size()) fail("a box copy past the end of shared memory");
    return m;
}

void box_copy(unsigned dst, const void* map, const int* coord, unsigned rank, unsigned bar) {
    const TensorMap* m = checked(map, rank, dst);
    barrier_at(bar);
    if (npending == MAX_PENDING) fail("too many box copies in flight");
    Pending& p = pending[npending++];
    p = {dst, bar, m, {}};
    for (unsigned d = 0; d < rank; d++) p.coord[d] = coord[d];
    if (copies_at_issue) {
        land_box(p);
        npending--;
    }
}
}  // namespace

void reset_mbarriers() { nbarriers = npending = 0; }

bool mbarrier_ready(Thread* t) {
    for (int i = 0; i < npending;)   // the copies that complete on this barrier land now
        if (pending[i].bar == t->addr) {
            land_box(pending[i]);
            pending[i] = pending[--npending];
        } else {
            i++;
        }
    const Mbarrier* b = find(t->addr);
    return b->completed % 2 != (unsigned)t->n;          // the phase of that parity has completed
}

void mbar_init(unsigned bar, unsigned arrivals) {
    if (bar % 8 || bar + 8 > shared_size()) fail("an mbarrier not 8-byte aligned in shared memory");
    Mbarrier* b = find(bar);
    if (!b) {
        if (nbarriers == MAX_BARRIERS) fail("too many mbarriers");
        b = &barriers[nbarriers++];
    }
    *b = {bar, (int)arrivals, (int)arrivals, 0, 0};
}

void mbar_expect_bytes(unsigned bar, unsigned bytes) {
    Mbarrier* b = barrier_at(bar);
    b->tx += (int)bytes;
    b->pending--;
    settle(b);
}

void mbar_arrive(unsigned bar) {
    Mbarrier* b = barrier_at(bar);
    b->pending--;
    settle(b);
}

void mbar_wait(unsigned bar, unsigned parity) {
    barrier_at(bar);
    current->addr = bar;
    current->n = (int)(parity & 1);
    if (!mbarrier_ready(current)) block_until(AT_MBARRIER);
}

void tensor_copy(unsigned dst, const void* map, const int* coord, unsigned rank, unsigned bar) {
    box_copy(dst, map, coord, rank, bar);
}

void tensor_store(const void* map, unsigned src, const int* coord, unsigned rank) {
    const TensorMap* m = checked(map, rank, src);
    const long n = box_elements(m);
    for (long i = 0; i < n; i++) {
        unsigned char* dst = global_element(m, coord, i);
        if (dst) std::memcpy(dst, shared_base() + shared_element(m, src, i), m->item);   // outside: not written
    }
}

void bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    if (dst % 16 || bytes % 16 || dst + bytes > shared_size()) fail("a bulk copy not of whole 16-byte chunks in shared memory");
    std::memcpy(shared_base() + dst, src, bytes);
    Mbarrier* b = barrier_at(bar);
    b->tx -= (int)bytes;
    settle(b);
}

void named_barrier(int id, int count) {
    if (id != 1 || count % 32) fail("bar.sync other than barrier 1 of a whole number of warps");
    current->n = count;
    block_until(AT_NAMED_BARRIER);
}
}  // namespace emu
