// Block KV cache bookkeeping on the real CPU backend: slots, block reuse, truncation,
// exhaustion and out-of-memory messages.
#include <doctest/doctest.h>

#include "engine/kv/kv_cache.h"
#include "kernels/common/error.h"

using namespace ember;

namespace {
KvCacheConfig small_config(int32_t n_blocks) {
    KvCacheConfig c;
    c.n_layers = 2;
    c.n_kv_heads = 2;
    c.head_dim = 32;
    c.block_tokens = 4;
    c.n_blocks = n_blocks;
    return c;
}
}  // namespace

TEST_CASE("sizes from config") {
    const KvCacheConfig c = small_config(10);
    REQUIRE_EQ(c.bytes_per_block(), 2ull * 2 * 4 * (64 * 2));  // K+V, layers, tokens, f16 row
    REQUIRE_EQ(KvCacheConfig::blocks_for(4096, 2, 16), 512);
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, c);
    REQUIRE_EQ(backend->memory().bytes[static_cast<int>(MemoryKind::KvCache)] >= c.total_bytes(), true);
}
TEST_CASE("slots follow block table") {
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, small_config(8));
    const int32_t a = kv.new_sequence(), b = kv.new_sequence();
    const auto sa = kv.append(a, 6);  // blocks: 2
    const auto sb = kv.append(b, 3);  // blocks: 1
    REQUIRE_EQ(kv.block_table(a).size(), size_t(2));
    REQUIRE_EQ(kv.block_table(b).size(), size_t(1));
    for (int i = 0; i < 6; ++i) REQUIRE_EQ(sa[size_t(i)], kv.block_table(a)[size_t(i / 4)] * 4 + i % 4);
    REQUIRE_EQ(sb[0], kv.block_table(b)[0] * 4);
    REQUIRE_EQ(kv.free_blocks(), 5);
    const auto more = kv.append(a, 2);  // fills block 2 exactly: no new block
    REQUIRE_EQ(more[1], kv.block_table(a)[1] * 4 + 3);
    REQUIRE_EQ(kv.free_blocks(), 5);
}
TEST_CASE("truncate frees whole blocks") {
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, small_config(8));
    const int32_t a = kv.new_sequence();
    kv.append(a, 13);
    REQUIRE_EQ(kv.free_blocks(), 4);
    kv.truncate(a, 5);
    REQUIRE_EQ(kv.length(a), 5);
    REQUIRE_EQ(kv.free_blocks(), 6);
    kv.free_sequence(a);
    REQUIRE_EQ(kv.free_blocks(), 8);
    REQUIRE_THROWS_AS(kv.length(a), Error);
}
TEST_CASE("exhaustion is a clear error and changes nothing") {
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, small_config(2));
    const int32_t a = kv.new_sequence();
    kv.append(a, 7);
    try {
        kv.append(a, 2);
        FAIL("no error");
    } catch (const Error& e) {
        REQUIRE(std::string(e.what()).find("KV cache full") != std::string::npos);
    }
    REQUIRE_EQ(kv.length(a), 7);
}
TEST_CASE("out of memory names the sizes") {
    auto backend = make_cpu_backend(1);
    KvCacheConfig c = small_config(1);
    c.n_kv_heads = 1 << 20;  // ~ 2^20 * 32 * 2 bytes per token row: far beyond host memory
    c.block_tokens = 1 << 16;
    c.n_blocks = 1 << 10;
    try {
        KvCache kv(*backend, c);
        FAIL("no error");
    } catch (const Error& e) {
        const std::string m = e.what();
        REQUIRE_MESSAGE(m.find("cannot allocate the KV cache") != std::string::npos, m.c_str());
        REQUIRE_MESSAGE(m.find("reduce the context length") != std::string::npos, m.c_str());
    }
    REQUIRE_EQ(backend->memory().bytes[static_cast<int>(MemoryKind::KvCache)], 0ull);
}
