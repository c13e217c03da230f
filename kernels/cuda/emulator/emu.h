// A small CUDA execution emulator for the kernels in kernels/cuda/, so their
// semantics can be tested on a machine without a GPU (CI).
//
// Why it exists: the compile check proves the kernels build and do not
// spill; it says nothing about whether they compute the right thing. This
// header lets g++ compile the .cu files unchanged (`-include emu.h`) and run
// them on the CPU: every CUDA thread of a block is a ucontext fiber on one OS
// thread, blocks run one after another. It models exactly what these kernels
// use: __syncthreads, __syncthreads_or, __shfl_xor_sync / __shfl_down_sync
// within a warp, static __shared__ arrays, atomicMax, __umulhi, and the two
// inline-PTX helpers. It says nothing about speed or memory-model corner cases;
// the GPU check on real hardware (scripts/gpu-check.sh) covers those.
#pragma once
#include <ucontext.h>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#include <functional>
#include <cstdio>
#include <cstdlib>

struct dim3u { unsigned x = 0, y = 0, z = 0; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
template <class T> static inline T min(T a, T b) { return a < b ? a : b; }

namespace emu {
struct Fiber { ucontext_t ctx; dim3u tid; bool done = false; std::vector<char> stack; };
inline Fiber* cur = nullptr;
inline ucontext_t sched;
inline std::function<void()> body;
inline unsigned nthreads = 0;
inline unsigned bar_count = 0, bar_gen = 0;
inline int or_acc[2] = {0, 0};
inline unsigned long long xchg[64][32];
inline unsigned wbar_count[64], wbar_gen[64];
inline dim3u blockIdx, blockDim, gridDim;

inline void yield() { swapcontext(&cur->ctx, &sched); }
inline void barrier() {
    unsigned g = bar_gen;
    if (++bar_count == nthreads) { bar_count = 0; or_acc[(g + 1) & 1] = 0; ++bar_gen; }
    else while (bar_gen == g) yield();
}
inline int syncthreads_or(int p) {
    unsigned g = bar_gen;
    if (p) or_acc[g & 1] = 1;
    barrier();
    return or_acc[g & 1];
}
inline unsigned flat_tid() { return cur->tid.x + blockDim.x * (cur->tid.y + blockDim.y * cur->tid.z); }
inline void warp_barrier(unsigned w) {
    unsigned g = wbar_gen[w];
    unsigned width = std::min(32u, nthreads - w * 32);
    if (++wbar_count[w] == width) { wbar_count[w] = 0; ++wbar_gen[w]; }
    else while (wbar_gen[w] == g) yield();
}
template <class T> inline T exchange(T v, int src) {
    unsigned t = flat_tid(), w = t / 32, lane = t % 32;
    unsigned long long bits = 0; std::memcpy(&bits, &v, sizeof(T));
    xchg[w][lane] = bits;
    warp_barrier(w);
    T r = v;
    if (src >= 0 && src < 32) std::memcpy(&r, &xchg[w][src], sizeof(T));
    warp_barrier(w);
    return r;
}
inline void entry() { body(); cur->done = true; }

inline void launch(dim3u grid, dim3u block, std::function<void()> f) {
    body = std::move(f);
    gridDim = grid; blockDim = block;
    nthreads = block.x * block.y * block.z;
    std::vector<Fiber> fibers(nthreads);
    for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
        blockIdx = dim3u{bx, by, bz};
        bar_count = 0; or_acc[0] = or_acc[1] = 0;
        std::memset(wbar_count, 0, sizeof wbar_count);
        for (unsigned t = 0; t < nthreads; ++t) {
            Fiber& fb = fibers[t];
            fb.done = false;
            fb.tid = dim3u{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
            fb.stack.resize(256 * 1024);
            getcontext(&fb.ctx);
            fb.ctx.uc_stack.ss_sp = fb.stack.data();
            fb.ctx.uc_stack.ss_size = fb.stack.size();
            fb.ctx.uc_link = &sched;
            makecontext(&fb.ctx, entry, 0);
        }
        bool any = true;
        while (any) {
            any = false;
            for (auto& fb : fibers) {
                if (fb.done) continue;
                any = true;
                cur = &fb;
                swapcontext(&sched, &fb.ctx);
            }
        }
    }
}
}  // namespace emu

#define threadIdx (emu::cur->tid)
#define blockIdx (emu::blockIdx)
#define blockDim (emu::blockDim)
#define __syncthreads() emu::barrier()
#define __syncthreads_or(p) emu::syncthreads_or((p) ? 1 : 0)
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int off) {
    return emu::exchange(v, (int)((emu::flat_tid() % 32) ^ off));
}
template <class T> static inline T __shfl_down_sync(unsigned, T v, int off) {
    int src = (int)(emu::flat_tid() % 32) + off;
    return emu::exchange(v, src < 32 ? src : -1);
}
static inline unsigned atomicMax(unsigned* p, unsigned v) { unsigned o = *p; if (v > o) *p = v; return o; }
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Blocks run one at a time, so a function-local static is per-block memory.
#define __shared__ static
static inline unsigned __umulhi(unsigned a, unsigned b) {
    return (unsigned)(((unsigned long long)a * b) >> 32);
}

// The sources keep their inline PTX behind #ifndef KVW_HOST_EMULATION; these
// are the plain versions.
#define KVW_HOST_EMULATION 1
static inline uint4 load_stream(const unsigned short* p) { return *reinterpret_cast<const uint4*>(p); }
static inline float fast_exp2(float x) { return std::exp2(x); }
