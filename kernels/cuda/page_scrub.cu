// Zero the KV pages named in an index array.
//
// Why this file exists: engines do not zero freed KV pages, which is what let
// a request in the PD-disaggregation incident read bytes an earlier tenant
// left behind. The scrub defense zeroes pages when they are freed; this is
// its device side, equal to `kernels/src/cpu.rs::scrub_pages`.
//
// grid: one block per listed page (grid.x may be large); 256 threads store
// 16 bytes each per step. Pages must be a multiple of 16 bytes. A page listed
// twice is simply zeroed twice.
//
// Self-contained for NVRTC: no includes.

typedef unsigned int u32;
typedef unsigned long long u64;

extern "C" __global__ void __launch_bounds__(256) page_scrub(
    unsigned char* __restrict__ pool,
    const u32* __restrict__ pages,
    u64 page_bytes) {
    uint4* page = reinterpret_cast<uint4*>(pool + (u64)pages[blockIdx.x] * page_bytes);
    const u64 chunks = page_bytes / 16;
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
    for (u64 c = threadIdx.x; c < chunks; c += blockDim.x) page[c] = zero;
}
