// Adler-32 over a list of KV pages, in list order, equal to the CPU
// reference `kernels/src/cpu.rs::adler32_pages`.
//
// Why this file exists: SGLang PR #39500 (`--disaggregation-enable-kv-checksum`,
// https://github.com/sgl-project/sglang/pull/39500) has prefill send an
// Adler-32 of the transferred pages with the final chunk and decode verify it
// before batching. Computed byte by byte on one thread that is a serial pass
// over gigabytes; here every page is summed in parallel and the per-page sums
// are combined with Adler-32's length-weighted rule.
//
// Adler-32 of bytes d_1..d_n, starting from (A, B) = (1, 0):
//   A' = A + sum d_i                       (mod 65521)
//   B' = B + n * A + sum (n - i + 1) d_i   (mod 65521)
// so a page contributes a = sum d_i and b = sum (n - i + 1) d_i computed from
// zero, independently of every other page. For K pages of n bytes each, with
// page k contributing (a_k, b_k):
//   A = 1 + sum_k a_k
//   B = sum_k b_k + n * (K + sum_k (K - 1 - k) a_k)
// (all mod 65521), and the checksum is (B << 16) | A.
//
// Kernels:
//   * `adler32_page_partials`: one block per listed page, writes (a_k, b_k).
//   * `adler32_combine`: one block, folds the partials into the checksum.
// Pages must be a multiple of 16 bytes (true for every head_dim multiple of 4).
//
// Self-contained for NVRTC: no includes.

typedef unsigned int u32;
typedef unsigned long long u64;

#define ADLER_MOD 65521ull
#define THREADS 256

__device__ __forceinline__ u64 block_sum(u64 v, u64* scratch) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) v += __shfl_down_sync(0xffffffffu, v, off);
    const u32 warp = threadIdx.x / 32;
    const u32 lane = threadIdx.x % 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    u64 total = 0;
    if (threadIdx.x == 0) {
        for (u32 w = 0; w < blockDim.x / 32; ++w) total += scratch[w];
    }
    __syncthreads();
    return total;  // valid in thread 0 only
}

// Sum of bytes and sum of (byte index within the 4-byte word) * byte.
__device__ __forceinline__ void word_sums(u32 w, u32& s, u32& t) {
    const u32 b0 = w & 0xffu;
    const u32 b1 = (w >> 8) & 0xffu;
    const u32 b2 = (w >> 16) & 0xffu;
    const u32 b3 = w >> 24;
    s = b0 + b1 + b2 + b3;
    t = b1 + 2u * b2 + 3u * b3;
}

// grid: num_pages blocks; block: THREADS threads.
extern "C" __global__ void __launch_bounds__(THREADS) adler32_page_partials(
    const unsigned char* __restrict__ pool,
    const u32* __restrict__ pages,
    u64 page_bytes,
    u32* __restrict__ part_a,
    u32* __restrict__ part_b) {
    __shared__ u64 scratch[THREADS / 32];
    const u32 k = blockIdx.x;
    const uint4* page = reinterpret_cast<const uint4*>(pool + (u64)pages[k] * page_bytes);
    const u64 chunks = page_bytes / 16;

    // Byte i (0-based) of the page has weight n - i. Chunk c covers bytes
    // 16c .. 16c + 15: its weighted sum is (n - 16c) * S - T with S the byte
    // sum and T = sum j * d_{16c + j}. Fits u64 for pages up to ~1 GB.
    u64 a = 0;
    u64 b = 0;
    for (u64 c = threadIdx.x; c < chunks; c += THREADS) {
        const uint4 v = page[c];
        u32 s0, t0, s1, t1, s2, t2, s3, t3;
        word_sums(v.x, s0, t0);
        word_sums(v.y, s1, t1);
        word_sums(v.z, s2, t2);
        word_sums(v.w, s3, t3);
        const u32 s = s0 + s1 + s2 + s3;
        const u32 t = t0 + (t1 + 4u * s1) + (t2 + 8u * s2) + (t3 + 12u * s3);
        a += s;
        b += (page_bytes - 16ull * c) * (u64)s - (u64)t;
    }
    a = block_sum(a, scratch);
    b = block_sum(b, scratch);
    if (threadIdx.x == 0) {
        part_a[k] = (u32)(a % ADLER_MOD);
        part_b[k] = (u32)(b % ADLER_MOD);
    }
}

// grid: 1 block of THREADS threads. Writes the checksum to out[0].
extern "C" __global__ void __launch_bounds__(THREADS) adler32_combine(
    const u32* __restrict__ part_a,
    const u32* __restrict__ part_b,
    u32 num_pages,
    u64 page_bytes,
    u32* __restrict__ out) {
    __shared__ u64 scratch[THREADS / 32];
    const u64 K = num_pages;
    u64 sa = 0;
    u64 sb = 0;
    u64 sw = 0;
    for (u32 k = threadIdx.x; k < num_pages; k += THREADS) {
        const u64 ak = part_a[k];
        sa += ak;
        sb += part_b[k];
        // (K - 1 - k) < 2^32 and a_k < 2^16: reduce each term before adding.
        sw += (((K - 1 - k) % ADLER_MOD) * ak) % ADLER_MOD;
    }
    sa = block_sum(sa % ADLER_MOD, scratch);
    sb = block_sum(sb % ADLER_MOD, scratch);
    sw = block_sum(sw % ADLER_MOD, scratch);
    if (threadIdx.x == 0) {
        const u64 A = (1ull + sa) % ADLER_MOD;
        const u64 weight = (K % ADLER_MOD + sw % ADLER_MOD) % ADLER_MOD;
        const u64 B = (sb % ADLER_MOD + ((page_bytes % ADLER_MOD) * weight) % ADLER_MOD) % ADLER_MOD;
        out[0] = (u32)((B << 16) | A);
    }
}
