// Runs the CUDA kernels of kernels/cuda/ on the CPU (through emu.h) against
// plain references: decode attention against a double-precision dense
// softmax with the same fail-closed tag rule as kernels/src/cpu.rs, Adler-32
// against a byte-by-byte Adler-32, scrub against zeroing.
//
// Why it exists: CI has no GPU, and the real-hardware check only runs when a
// GPU is lent. The host side below mirrors kernels/src/cuda.rs
// (prepare_decode / launch_decode / finish_decode: GQA chunking, split
// sizing, the refusal encoding), so a change to either side that breaks the
// contract shows up here.
//
// Build and run (scripts/ci/cuda-compile-check.sh does this):
//   g++ -std=c++17 -O2 -I kernels/cuda/emulator -o kvw-cuda-emu
//     kernels/cuda/emulator/check.cpp
//     -x c++ -include emu.h kernels/cuda/paged_decode_attention.cu
//     -x c++ -include emu.h kernels/cuda/page_checksum.cu
//     -x c++ -include emu.h kernels/cuda/page_scrub.cu
//   ./kvw-cuda-emu
#include "emu.h"

#include <algorithm>
#include <numeric>
#include <utility>

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

extern "C" {
#define SPLIT_ARGS                                                                             \
    const u16*, const u32*, const u32*, const u32*, const float*, const u64*, const u64*, u32, \
        u32, u32, u32, u32, u32, u32, float, float*, float*, float*, u32*
void paged_decode_split_g1(SPLIT_ARGS);
void paged_decode_split_g2(SPLIT_ARGS);
void paged_decode_split_g4(SPLIT_ARGS);
void paged_decode_split_g8(SPLIT_ARGS);
void paged_decode_reduce(const float*, const float*, const float*, const u32*, u32, u32, float*);
void adler32_page_partials(const unsigned char*, const u32*, u64, u32*, u32*);
void adler32_combine(const u32*, const u32*, u32, u64, u32*);
void page_scrub(unsigned char*, const u32*, u64);
}

static const int D = 128;  // HEAD_DIM
static const float TOLERANCE = 1e-3f;

struct Rng {
    u64 s;
    u64 next() {
        s += 0x9e3779b97f4a7c15ull;
        u64 z = s;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    float unit() { return (float)(next() >> 40) / (float)(1 << 24) * 2.f - 1.f; }
    size_t below(size_t n) { return next() % n; }
};

static u16 to_bf16(float f) {
    u32 b;
    std::memcpy(&b, &f, 4);
    return (u16)((b + 0x7fff + ((b >> 16) & 1)) >> 16);
}
static float from_bf16(u16 h) {
    u32 b = (u32)h << 16;
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

struct Layout {
    size_t page_size, kv_heads;
    size_t slot() const { return 2 * kv_heads * D; }
    size_t page() const { return page_size * slot(); }
};
struct Req {
    std::vector<u32> table;
    u32 seq;
    std::vector<float> q;
    u64 expected;
};
struct Res {
    bool refused;
    u32 index;
    std::vector<float> out;
};

// Mirrors GpuKernels::{prepare_decode, launch_decode, finish_decode}.
static std::vector<Res> kernel_decode(Layout l, const std::vector<u16>& kv, const std::vector<u64>& tags,
                                      const std::vector<Req>& reqs, int nqh, float scale, bool check,
                                      int sm_count) {
    const int group = nqh / (int)l.kv_heads;
    int chunk = 1;
    for (int c : {8, 4, 2, 1})
        if (group % c == 0) { chunk = c; break; }
    std::vector<u32> flat, offs, seqs;
    std::vector<float> q;
    std::vector<u64> expected;
    size_t max_pages = 0;
    for (const auto& r : reqs) {
        u32 seq = (u32)std::min<size_t>(r.seq, r.table.size() * l.page_size);
        size_t used = (seq + l.page_size - 1) / l.page_size;
        offs.push_back((u32)flat.size());
        seqs.push_back(seq);
        flat.insert(flat.end(), r.table.begin(), r.table.begin() + used);
        q.insert(q.end(), r.q.begin(), r.q.end());
        expected.push_back(r.expected);
        max_pages = std::max(max_pages, used);
    }
    if (flat.empty()) flat.push_back(0);
    size_t per_split = reqs.size() * l.kv_heads * (group / chunk);
    size_t target = std::max<size_t>(1, (sm_count * 16 + per_split - 1) / per_split);
    size_t pps = std::max<size_t>(1, (max_pages + target - 1) / target);
    size_t splits = std::max<size_t>(1, (max_pages + pps - 1) / pps);
    size_t rows = reqs.size() * splits * nqh;
    // Poison the work buffers: every value read must have been written.
    std::vector<float> pm(rows, 1e30f), pl(rows, 1e30f), pa(rows * D, 1e30f);
    std::vector<float> out(reqs.size() * nqh * D, -7.f);
    std::vector<u32> refused(reqs.size(), 0);
    const u64* tag_buf = check ? tags.data() : expected.data();
    const float scale_log2 = scale * 1.4426950408889634f;
    const u32 page_magic = (u32)(((1ull << 32) + l.page_size - 1) / l.page_size);
    auto split = chunk == 1 ? paged_decode_split_g1
               : chunk == 2 ? paged_decode_split_g2
               : chunk == 4 ? paged_decode_split_g4
                            : paged_decode_split_g8;
    emu::launch(dim3u{(unsigned)splits, (unsigned)(l.kv_heads * (group / chunk)), (unsigned)reqs.size()},
                dim3u{128, 1, 1}, [&] {
                    split(kv.data(), flat.data(), offs.data(), seqs.data(), q.data(), tag_buf,
                          expected.data(), check ? 1u : 0u, (u32)l.kv_heads, (u32)group,
                          (u32)l.page_size, page_magic, (u32)pps, (u32)splits, scale_log2, pm.data(), pl.data(),
                          pa.data(), refused.data());
                });
    emu::launch(dim3u{(unsigned)nqh, (unsigned)reqs.size(), 1}, dim3u{(unsigned)D, 1, 1}, [&] {
        paged_decode_reduce(pm.data(), pl.data(), pa.data(), refused.data(), (u32)nqh, (u32)splits,
                            out.data());
    });
    std::vector<Res> res;
    for (size_t i = 0; i < reqs.size(); ++i) {
        if (refused[i] != 0) {
            res.push_back({true, 0xffffffffu - refused[i], {}});
        } else {
            auto b = out.begin() + i * nqh * D;
            res.push_back({false, 0, std::vector<float>(b, b + nqh * D)});
        }
    }
    return res;
}

// Dense softmax attention in double precision; refuses like cpu.rs: the
// first page-table index, among the pages read, whose tag is not the reader's.
static Res reference(Layout l, const std::vector<u16>& kv, const std::vector<u64>& tags, const Req& r,
                     int nqh, float scale, bool check) {
    const int group = nqh / (int)l.kv_heads;
    const u32 seq = (u32)std::min<size_t>(r.seq, r.table.size() * l.page_size);
    const size_t used = (seq + l.page_size - 1) / l.page_size;
    if (check)
        for (size_t i = 0; i < used; ++i)
            if (tags[r.table[i]] != r.expected) return {true, (u32)i, {}};
    auto at = [&](u32 pos, size_t head) {
        return &kv[r.table[pos / l.page_size] * l.page() + (pos % l.page_size) * l.slot() + head * D];
    };
    std::vector<float> out(nqh * D, 0.f);
    for (int qh = 0; qh < nqh; ++qh) {
        const size_t h = qh / group;
        std::vector<double> s(seq);
        double m = -1e300;
        for (u32 p = 0; p < seq; ++p) {
            const u16* k = at(p, h);
            double d = 0;
            for (int j = 0; j < D; ++j) d += (double)r.q[qh * D + j] * from_bf16(k[j]);
            s[p] = d * scale;
            m = std::max(m, s[p]);
        }
        double z = 0;
        std::vector<double> acc(D, 0);
        for (u32 p = 0; p < seq; ++p) {
            const double w = std::exp(s[p] - m);
            const u16* v = at(p, l.kv_heads + h);
            z += w;
            for (int j = 0; j < D; ++j) acc[j] += w * from_bf16(v[j]);
        }
        for (int j = 0; j < D; ++j) out[qh * D + j] = z > 0 ? (float)(acc[j] / z) : 0.f;
    }
    return {false, 0, out};
}

static int check_attention(Rng& rng) {
    int cases = 0, fails = 0;
    double worst = 0;
    const std::pair<size_t, int> shapes[] = {{2, 1}, {2, 2}, {1, 3}, {2, 4}, {2, 8}, {1, 16}};
    for (size_t page_size : {16, 32, 64})
    for (auto [kv_heads, group] : shapes)
    for (int mode = 0; mode < 3; ++mode)  // tags off, on, on with a foreign page read
    for (int sm_count : {1, 4}) {         // few splits, many splits
        const Layout l{page_size, kv_heads};
        const size_t pool_pages = 48;
        std::vector<u16> kv(pool_pages * l.page());
        for (auto& x : kv) x = to_bf16(rng.unit());
        std::vector<u32> perm(pool_pages);
        std::iota(perm.begin(), perm.end(), 0);
        for (size_t i = pool_pages - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
        std::vector<u64> tags(pool_pages, 0);
        std::vector<Req> reqs;
        const int nreq = 1 + (int)rng.below(3);
        const int nqh = (int)kv_heads * group;
        size_t taken = 0;
        for (int i = 0; i < nreq; ++i) {
            const size_t n = 1 + rng.below(14);
            Req r;
            r.table.assign(perm.begin() + taken, perm.begin() + taken + n);
            taken += n;
            switch (rng.below(6)) {
                case 0: r.seq = (u32)(n * page_size + 5); break;  // past the table
                case 1: r.seq = 1; break;
                case 2: r.seq = 0; break;
                default: r.seq = (u32)((n - 1) * page_size + 1 + rng.below(page_size));
            }
            r.expected = 100 + i;
            for (u32 p : r.table) tags[p] = r.expected;
            r.q.resize(nqh * D);
            for (auto& x : r.q) x = rng.unit();
            reqs.push_back(r);
        }
        if (mode == 2) {
            const Req& r = reqs[rng.below(nreq)];
            const size_t used = (std::min<size_t>(r.seq, r.table.size() * page_size) + page_size - 1) / page_size;
            if (used) tags[r.table[rng.below(used)]] = 0xbad;
        }
        const float scale = (cases % 2) ? 1.0f : 1.0f / std::sqrt((float)D);
        const bool check = mode > 0;
        const auto got = kernel_decode(l, kv, tags, reqs, nqh, scale, check, sm_count);
        for (int i = 0; i < nreq; ++i) {
            const Res want = reference(l, kv, tags, reqs[i], nqh, scale, check);
            ++cases;
            if (want.refused || got[i].refused) {
                if (want.refused != got[i].refused || want.index != got[i].index) {
                    ++fails;
                    std::printf("FAIL refusal page=%zu kv=%zu group=%d req=%d: want %d@%u got %d@%u\n",
                                page_size, kv_heads, group, i, want.refused, want.index, got[i].refused,
                                got[i].index);
                }
                continue;
            }
            double err = 0;
            for (size_t j = 0; j < want.out.size(); ++j)
                err = std::max(err, (double)std::fabs(want.out[j] - got[i].out[j]));
            worst = std::max(worst, err);
            if (!(err <= TOLERANCE)) {
                ++fails;
                std::printf("FAIL attention page=%zu kv=%zu group=%d mode=%d req=%d seq=%u err=%g\n",
                            page_size, kv_heads, group, mode, i, reqs[i].seq, err);
            }
        }
    }
    std::printf("attention: %d cases, %d failed, max abs error %.3e (tolerance %.0e)\n", cases, fails,
                worst, TOLERANCE);
    return fails;
}

static u32 adler_serial(u32 h, const unsigned char* p, size_t n) {
    u64 a = h & 0xffff, b = h >> 16;
    for (size_t i = 0; i < n; ++i) {
        a = (a + p[i]) % 65521;
        b = (b + a) % 65521;
    }
    return (u32)((b << 16) | a);
}

static int check_checksum_and_scrub(Rng& rng) {
    int cases = 0, fails = 0;
    for (size_t page_bytes : {48ul, 4096ul, 65536ul, 262144ul}) {
        const size_t npages = 24;
        std::vector<unsigned char> pool(npages * page_bytes);
        for (auto& b : pool) b = (unsigned char)rng.next();
        std::fill(pool.begin(), pool.begin() + page_bytes, 0xff);  // saturated page
        for (size_t len : {1ul, 2ul, 17ul, 40ul}) {
            std::vector<u32> pages(len);
            for (auto& p : pages) p = (u32)rng.below(npages);
            u32 want = 1;
            for (u32 p : pages) want = adler_serial(want, pool.data() + p * page_bytes, page_bytes);
            std::vector<u32> pa(len), pb(len);
            u32 got = 0;
            emu::launch(dim3u{(unsigned)len, 1, 1}, dim3u{256, 1, 1}, [&] {
                adler32_page_partials(pool.data(), pages.data(), page_bytes, pa.data(), pb.data());
            });
            emu::launch(dim3u{1, 1, 1}, dim3u{256, 1, 1},
                        [&] { adler32_combine(pa.data(), pb.data(), (u32)len, page_bytes, &got); });
            ++cases;
            if (got != want) {
                ++fails;
                std::printf("FAIL adler32 page_bytes=%zu pages=%zu: want %08x got %08x\n", page_bytes, len,
                            want, got);
            }
        }
        std::vector<u32> pages = {3, 5, 3, 20};
        auto want = pool;
        for (u32 p : pages) std::fill(want.begin() + p * page_bytes, want.begin() + (p + 1) * page_bytes, 0);
        emu::launch(dim3u{(unsigned)pages.size(), 1, 1}, dim3u{256, 1, 1},
                    [&] { page_scrub(pool.data(), pages.data(), page_bytes); });
        ++cases;
        if (pool != want) {
            ++fails;
            std::printf("FAIL scrub page_bytes=%zu\n", page_bytes);
        }
    }
    std::printf("adler32 + scrub: %d cases, %d failed\n", cases, fails);
    return fails;
}

int main() {
    Rng rng{0x6b7677};
    const int fails = check_attention(rng) + check_checksum_and_scrub(rng);
    std::printf("kvw-cuda-emu: %s\n", fails ? "FAIL" : "OK");
    return fails ? 1 : 0;
}
