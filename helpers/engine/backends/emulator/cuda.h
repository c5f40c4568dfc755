// The CUDA device as the course's kernels see it, on the CPU: what a .cu file needs to build as
// C++ with g++ and run on the host (helpers/engine/backends/emulated.py builds it in front of the
// kernel). A block's threads run as fibers of one host thread (runtime.cpp), blocks one after
// another; __syncthreads and the warp-level instructions (mma.sync, ldmatrix; wgmma for the
// warpgroup) wait for the threads they involve, as on the GPU. kernels/common/tc.cuh's PTX
// instructions are replaced by emulated_ptx.h and emulated_hopper.h (COURSE_EMULATION).
#ifndef COURSE_EMULATOR_CUDA_H
#define COURSE_EMULATOR_CUDA_H

// No standard header: each costs compile time, and every configuration of every stage is a build.

struct uint3 { unsigned x, y, z; };
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float __uint_as_float(unsigned u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; __builtin_memcpy(&u, &f, 4); return u; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
// the math the kernels use (CUDA's float overloads), from the compiler's built-ins
inline float fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
inline float fmax(float a, float b) { return __builtin_fmaxf(a, b); }
inline float expf(float x) { return __builtin_expf(x); }
inline float exp(float x) { return __builtin_expf(x); }
inline float tanhf(float x) { return __builtin_tanhf(x); }
inline float tanh(float x) { return __builtin_tanhf(x); }
inline float atomicAdd(float* p, float v) { float old = *p; *p = old + v; return old; }   // one host thread

namespace emu {
// the running thread's index; the launch's block index and shapes (runtime.cpp)
extern uint3 block_idx, block_dim, grid_dim;
const uint3& thread_idx();
void sync_block();                                   // __syncthreads
[[noreturn]] void fail(const char* what);            // stops the launch with this error

// warp-level instructions: every lane of the warp gives its operands, the last one to arrive runs
// the instruction for all 32 (instructions.cpp)
void mma(int kind, float c[4], const unsigned* a, const unsigned* b);
void ldmatrix_x4(unsigned r[4], unsigned addr);
enum { MMA_TF32, MMA_F16, MMA_BF16 };
// warpgroup-level (128 threads, sm_90a): wgmma.mma_async of width n, its commit and wait groups
void wgmma(int kind, int n, float* d, unsigned long long a, unsigned long long b);
void wgmma_commit();
void wgmma_wait(int newest_pending);
// mbarriers, the Tensor Memory Accelerator's box copies (tensor maps: emulated.py) and bulk copies,
// the named barrier 1 (hopper.cpp)
void mbar_init(unsigned bar, unsigned arrivals);
void mbar_expect_bytes(unsigned bar, unsigned bytes);
void mbar_arrive(unsigned bar);
void mbar_wait(unsigned bar, unsigned parity);
void tensor_copy(unsigned dst, const void* map, const int* coord, unsigned rank, unsigned bar);
void tensor_store(const void* map, unsigned src, const int* coord, unsigned rank);
void bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar);
void named_barrier(int id, int count);

// shared memory: every __shared__ array lies in one section, poisoned (all bits set: NaN in
// float32, fp16 and bf16) before each block; its addresses are offsets into it, as in PTX
unsigned shared_address(const void* p);
void cp_async16(unsigned dst, const void* src, int bytes);
void cp_async_commit();
void cp_async_wait(int newest_pending);

// the rounding conversions, bit for bit as the PTX ISA states them
unsigned cvt_rna_tf32(float x);
unsigned short cvt_rn_f16(float x);
unsigned short cvt_rn_bf16(float x);
float f16_to_f32(unsigned short h);

// a kernel's launch entry: its arguments from an array of pointers to their values, and a
// description of its parameters ("p4" a pointer to 4-byte values, "p2" to 2-byte ones, "pv" a
// tensor map's address, "i4" an int, "f4" a float)
template <typename T> struct kind { static constexpr const char* text = "??,"; };
template <> struct kind<int> { static constexpr const char* text = "i4,"; };
template <> struct kind<float> { static constexpr const char* text = "f4,"; };
template <typename T> struct kind<T*> { static constexpr const char* text = sizeof(T) == 2 ? "p2," : sizeof(T) == 4 ? "p4," : "p?,"; };
template <> struct kind<const void*> { static constexpr const char* text = "pv,"; };     // a tensor map
template <unsigned... I> struct seq {};
template <unsigned N, unsigned... I> struct make_seq : make_seq<N - 1, N - 1, I...> {};
template <unsigned... I> struct make_seq<0, I...> { using type = seq<I...>; };
template <typename... P, unsigned... I> void call(void (*f)(P...), void** args, seq<I...>) {
    f(*static_cast<P*>(args[I])...);
}
template <typename... P> void call(void (*f)(P...), void** args) { call(f, args, typename make_seq<sizeof...(P)>::type{}); }
template <typename... P> const char* signature(void (*)(P...)) {
    static char text[256];
    text[0] = 0;
    (__builtin_strcat(text, kind<P>::text), ...);
    return text;
}
}  // namespace emu

#define threadIdx (::emu::thread_idx())
#define blockIdx (::emu::block_idx)
#define blockDim (::emu::block_dim)
#define gridDim (::emu::grid_dim)
#define __syncthreads() ::emu::sync_block()
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static __attribute__((section("emu_shared")))
#define __CUDACC__ 1                 // course.h's CUDA spellings
#define COURSE_EMULATION 1           // tc.cuh: the PTX instructions below, not inline assembly

// after the kernel's source: one entry per kernel the launches name, and where the library's
// shared memory lies (the section the linker names; none if no kernel declares shared memory)
#define EMU_ENTRY(name)                                                                          \
    extern "C" void emu_call_##name(void** emu_args) { ::emu::call(name, emu_args); }            \
    extern "C" const char* emu_signature_##name() { return ::emu::signature(name); }
extern char __start_emu_shared[] __attribute__((weak, visibility("hidden")));
extern char __stop_emu_shared[] __attribute__((weak, visibility("hidden")));
#define EMU_SHARED_SECTION                                                                       \
    extern "C" char* emu_shared_section(unsigned long* bytes) {                                  \
        *bytes = __start_emu_shared ? (unsigned long)(__stop_emu_shared - __start_emu_shared) : 0; \
        return __start_emu_shared;                                                               \
    }

#endif
