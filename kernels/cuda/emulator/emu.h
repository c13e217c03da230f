// A small CUDA execution emulator for the kernels in kernels/cuda/, so their
// semantics can be tested on a machine without a GPU (CI).
//
// Why it exists: the compile check proves the kernels build and do not
// spill; it says nothing about whether they compute the right thing. This
// header lets g++ compile the .cu files unchanged (`-include emu.h`) and run
// them on the CPU: every CUDA thread of a block is a ucontext fiber on one OS
// thread, blocks run one after another in a shuffled order. It models exactly what these kernels
// use: __syncthreads, __syncthreads_or, __shfl_xor_sync / __shfl_down_sync
// within a warp, static and dynamic __shared__ arrays, atomicMax/atomicAdd,
// __umulhi, and the inline-PTX helpers: streaming loads, ex2, L2 loads, and
// for the tensor-core variant cp.async groups, ldmatrix (.x4, .trans) and
// mma.sync m16n8k16 bf16 with their documented fragment layouts (each lane
// contributes its fragment, the warp's matrices are assembled, each lane
// takes its result elements), so the variant's indexing is what is tested.
//
// cp.async has two modes (KVW_EMU_CP_ASYNC): `wait` (default) lands every
// copy only when its group is waited for, so a read of a stage before its
// wait_group (or before the barrier after it, for other threads' copies) sees
// stale bytes; `issue` lands it at once, so a refill of a slot that another
// warp has not finished reading overwrites it early. CI runs both.
//
// It says nothing about speed, the tensor cores' internal rounding (an f32
// fma chain stands in for it), or memory-model corner cases across blocks
// (blocks run one after another); the GPU check on real hardware
// (scripts/gpu-check.sh) covers those.
#pragma once
// Fibers switch with _setjmp/_longjmp across stacks, which the fortified
// longjmp would refuse.
#ifdef _FORTIFY_SOURCE
#undef _FORTIFY_SOURCE
#endif
#include <setjmp.h>
#include <ucontext.h>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#include <functional>
#include <utility>
#include <cstdio>
#include <cstdlib>

struct dim3u { unsigned x = 0, y = 0, z = 0; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned i; std::memcpy(&i, &f, 4); return i; }
template <class T> static inline T min(T a, T b) { return a < b ? a : b; }

namespace emu {
struct Copy { void* dst; const void* src; };
struct Fiber {
    ucontext_t ctx; jmp_buf jb; dim3u tid; bool done = false, started = false; std::vector<char> stack;
    std::vector<std::vector<Copy>> committed; std::vector<Copy> open;
};
inline Fiber* cur = nullptr;
inline jmp_buf sched;
inline std::function<void()> body;
inline unsigned nthreads = 0;
inline unsigned bar_count = 0, bar_gen = 0;
inline int or_acc[2] = {0, 0};
inline unsigned long long xchg[64][32];
inline unsigned wbar_count[64], wbar_gen[64];
inline dim3u blockIdx, blockDim, gridDim;

// Switches save no signal mask (swapcontext's system call per switch made
// the emulator spend most of its time in the kernel); a fiber is entered
// once with setcontext, then resumed with _longjmp.
inline void yield() {
    if (!_setjmp(cur->jb)) _longjmp(sched, 1);
}
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
inline void entry() {
    body();
    cur->done = true;
    _longjmp(sched, 1);
}

inline void launch(dim3u grid, dim3u block, std::function<void()> f) {
    body = std::move(f);
    gridDim = grid; blockDim = block;
    nthreads = block.x * block.y * block.z;
    std::vector<Fiber> fibers(nthreads);
    // Blocks run one at a time, in a shuffled order (seeded per launch):
    // the GPU promises no order, and the fused merge must work whichever
    // block of a group arrives last.
    std::vector<dim3u> order;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) order.push_back(dim3u{bx, by, bz});
    static unsigned long long seed = 0x243f6a8885a308d3ull;
    for (size_t i = order.size(); i > 1; --i) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        std::swap(order[i - 1], order[(seed >> 33) % i]);
    }
    for (const dim3u& blk : order) {
        blockIdx = blk;
        bar_count = 0; or_acc[0] = or_acc[1] = 0;
        std::memset(wbar_count, 0, sizeof wbar_count);
        for (unsigned t = 0; t < nthreads; ++t) {
            Fiber& fb = fibers[t];
            fb.done = false;
            fb.started = false;
            fb.committed.clear();
            fb.open.clear();
            fb.tid = dim3u{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
            fb.stack.resize(256 * 1024);
            getcontext(&fb.ctx);
            fb.ctx.uc_stack.ss_sp = fb.stack.data();
            fb.ctx.uc_stack.ss_size = fb.stack.size();
            fb.ctx.uc_link = nullptr;
            makecontext(&fb.ctx, entry, 0);
        }
        bool any = true;
        while (any) {
            any = false;
            for (auto& fb : fibers) {
                if (fb.done) continue;
                any = true;
                cur = &fb;
                if (!_setjmp(sched)) {
                    if (!fb.started) {
                        fb.started = true;
                        setcontext(&fb.ctx);
                    }
                    _longjmp(fb.jb, 1);
                }
            }
        }
    }
}
}  // namespace emu

#define threadIdx (emu::cur->tid)
#define blockIdx (emu::blockIdx)
#define blockDim (emu::blockDim)
#define gridDim (emu::gridDim)
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
static inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p = o + v; return o; }
static inline void __threadfence() {}
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

static inline float mma_neg_inf() { return -INFINITY; }
static inline float mma_exp2(float x) { return std::exp2(x); }
static inline float load_cg(const float* p) { return *p; }
static inline unsigned load_cg(const unsigned* p) { return *p; }

namespace emu {
// Dynamic shared memory of the running block (the H100/H200 per-block limit).
alignas(16) inline unsigned char dyn_smem[227 * 1024];

inline bool copies_land_at_issue() {
    static const bool v = [] {
        const char* m = std::getenv("KVW_EMU_CP_ASYNC");
        return m && std::strcmp(m, "issue") == 0;
    }();
    return v;
}
inline void land(const std::vector<Copy>& g) {
    for (const Copy& c : g) std::memcpy(c.dst, c.src, 16);
}
inline void cp_async16(void* dst, const void* src) {
    if (copies_land_at_issue()) std::memcpy(dst, src, 16);
    else cur->open.push_back(Copy{dst, src});
}
inline void cp_async_commit() {
    cur->committed.push_back(std::move(cur->open));
    cur->open.clear();
}
// cp.async.wait_group n: all but the n most recent committed groups land.
inline void cp_async_wait(size_t n) {
    auto& c = cur->committed;
    while (c.size() > n) {
        land(c.front());
        c.erase(c.begin());
    }
}

// One lane's part of a warp-collective ldmatrix / mma.
struct WarpOp { const unsigned char* row; unsigned a[4], b[2]; float c[4]; };
inline WarpOp warp_op[64][32];

inline float bf16_lo(unsigned w) { return __uint_as_float(w << 16); }
inline float bf16_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16: lanes 8i..8i+7 name the
// rows of matrix i; without .trans lane L gets (row L/4, cols 2(L%4), +1) of
// each matrix, with .trans (rows 2(L%4), +1, col L/4).
inline void ldmatrix(unsigned* r, const void* row, bool trans) {
    const unsigned t = flat_tid(), w = t / 32, ln = t % 32;
    warp_op[w][ln].row = static_cast<const unsigned char*>(row);
    warp_barrier(w);
    for (unsigned i = 0; i < 4; ++i) {
        unsigned short e0, e1;
        if (!trans) {
            const unsigned char* p = warp_op[w][8 * i + ln / 4].row;
            std::memcpy(&e0, p + 4 * (ln % 4), 2);
            std::memcpy(&e1, p + 4 * (ln % 4) + 2, 2);
        } else {
            std::memcpy(&e0, warp_op[w][8 * i + 2 * (ln % 4)].row + 2 * (ln / 4), 2);
            std::memcpy(&e1, warp_op[w][8 * i + 2 * (ln % 4) + 1].row + 2 * (ln / 4), 2);
        }
        r[i] = (unsigned)e0 | ((unsigned)e1 << 16);
    }
    warp_barrier(w);
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, lane L = 4g + t:
// A regs {row g, cols 2t,2t+1}, {row g+8, same}, {row g, cols 2t+8,2t+9},
// {row g+8, same}; B regs {rows 2t,2t+1, col g}, {rows 2t+8,2t+9, col g};
// C/D {row g, cols 2t,2t+1}, {row g+8, same}. Low half = lower index.
inline void mma_16816(float* d, const unsigned* a, unsigned b0, unsigned b1) {
    const unsigned t = flat_tid(), w = t / 32, ln = t % 32;
    WarpOp& me = warp_op[w][ln];
    std::memcpy(me.a, a, sizeof me.a);
    me.b[0] = b0;
    me.b[1] = b1;
    std::memcpy(me.c, d, sizeof me.c);
    warp_barrier(w);
    float A[16][16], B[16][8];
    for (unsigned L = 0; L < 32; ++L) {
        const WarpOp& o = warp_op[w][L];
        const unsigned g = L / 4, c = 2 * (L % 4);
        A[g][c] = bf16_lo(o.a[0]);     A[g][c + 1] = bf16_hi(o.a[0]);
        A[g + 8][c] = bf16_lo(o.a[1]); A[g + 8][c + 1] = bf16_hi(o.a[1]);
        A[g][c + 8] = bf16_lo(o.a[2]); A[g][c + 9] = bf16_hi(o.a[2]);
        A[g + 8][c + 8] = bf16_lo(o.a[3]); A[g + 8][c + 9] = bf16_hi(o.a[3]);
        B[c][g] = bf16_lo(o.b[0]);     B[c + 1][g] = bf16_hi(o.b[0]);
        B[c + 8][g] = bf16_lo(o.b[1]); B[c + 9][g] = bf16_hi(o.b[1]);
    }
    const unsigned g = ln / 4, c = 2 * (ln % 4);
    float out[4];
    for (unsigned i = 0; i < 4; ++i) {
        const unsigned row = g + (i / 2) * 8, col = c + (i % 2);
        float s = me.c[i];
        for (unsigned k = 0; k < 16; ++k) s = std::fma(A[row][k], B[k][col], s);
        out[i] = s;
    }
    warp_barrier(w);
    std::memcpy(d, out, sizeof out);
}
}  // namespace emu

#define MMA_SMEM (emu::dyn_smem)
static inline void cp_async16(void* dst, const void* src) { emu::cp_async16(dst, src); }
static inline void cp_async_commit() { emu::cp_async_commit(); }
#define cp_async_wait_ring() emu::cp_async_wait(STAGES - 2)
static inline void cp_async_wait_all() { emu::cp_async_commit(); emu::cp_async_wait(0); }
static inline void ldmatrix_x4(unsigned* r, const void* row) { emu::ldmatrix(r, row, false); }
static inline void ldmatrix_x4_trans(unsigned* r, const void* row) { emu::ldmatrix(r, row, true); }
static inline void mma_bf16_16816(float* d, const unsigned* a, unsigned b0, unsigned b1) { emu::mma_16816(d, a, b0, b1); }
static inline uint4 probe_load(const uint4* p) { return *p; }
