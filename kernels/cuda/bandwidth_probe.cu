// A read-only streaming kernel: the bandwidth a kernel that only reads the
// KV bytes, once, with the decode kernels' own load instruction, reaches.
//
// Why it exists: the decode goal is stated against a device-to-device copy
// (read + write). A pure read over the same bytes is the other ceiling:
// decode reads as much as this kernel and writes almost nothing, so decode
// GB/s over stream_read GB/s says how much of the reachable read rate the
// decode kernels leave on the table.
//
// Every thread XORs the 32-bit words it read and writes its own sink word,
// so no load can be dropped and the host can check that every byte was
// read (the XOR of the sink equals the XOR of the buffer).
//
// Self-contained for NVRTC: no includes.

typedef unsigned int u32;
typedef unsigned long long u64;

#define PROBE_THREADS 256
#define PROBE_UNROLL 4

#ifndef KVW_HOST_EMULATION
__device__ __forceinline__ uint4 probe_load(const uint4* p) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
}
#endif

// grid: any number of blocks (persistent: a few per SM); n16 = 16-byte words.
extern "C" __global__ void __launch_bounds__(PROBE_THREADS) stream_read(const uint4* __restrict__ src,
                                                                        u64 n16,
                                                                        u32* __restrict__ sink) {
    const u64 stride = (u64)gridDim.x * PROBE_THREADS;
    u64 i = (u64)blockIdx.x * PROBE_THREADS + threadIdx.x;
    u32 x = 0;
    for (; i + (PROBE_UNROLL - 1) * stride < n16; i += PROBE_UNROLL * stride) {
        uint4 w[PROBE_UNROLL];
#pragma unroll
        for (int u = 0; u < PROBE_UNROLL; ++u) w[u] = probe_load(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < PROBE_UNROLL; ++u) x ^= w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
    }
    for (; i < n16; i += stride) {
        const uint4 w = probe_load(src + i);
        x ^= w.x ^ w.y ^ w.z ^ w.w;
    }
    sink[(u64)blockIdx.x * PROBE_THREADS + threadIdx.x] = x;
}
