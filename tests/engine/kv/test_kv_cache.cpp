// Block KV cache bookkeeping on the real CPU backend: slots, block reuse, truncation,
// exhaustion and out-of-memory messages.
#include <QtTest>

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

class TestKvCache : public QObject {
    Q_OBJECT
private slots:
    void sizesFromConfig() {
        const KvCacheConfig c = small_config(10);
        QCOMPARE(c.bytes_per_block(), 2ull * 2 * 4 * (64 * 2));  // K+V, layers, tokens, f16 row
        QCOMPARE(KvCacheConfig::blocks_for(4096, 2, 16), 512);
        auto backend = make_cpu_backend(1);
        KvCache kv(*backend, c);
        QCOMPARE(backend->memory().bytes[static_cast<int>(MemoryKind::KvCache)] >= c.total_bytes(), true);
    }
    void slotsFollowBlockTable() {
        auto backend = make_cpu_backend(1);
        KvCache kv(*backend, small_config(8));
        const int32_t a = kv.new_sequence(), b = kv.new_sequence();
        const auto sa = kv.append(a, 6);  // blocks: 2
        const auto sb = kv.append(b, 3);  // blocks: 1
        QCOMPARE(kv.block_table(a).size(), size_t(2));
        QCOMPARE(kv.block_table(b).size(), size_t(1));
        for (int i = 0; i < 6; ++i) QCOMPARE(sa[size_t(i)], kv.block_table(a)[size_t(i / 4)] * 4 + i % 4);
        QCOMPARE(sb[0], kv.block_table(b)[0] * 4);
        QCOMPARE(kv.free_blocks(), 5);
        const auto more = kv.append(a, 2);  // fills block 2 exactly: no new block
        QCOMPARE(more[1], kv.block_table(a)[1] * 4 + 3);
        QCOMPARE(kv.free_blocks(), 5);
    }
    void truncateFreesWholeBlocks() {
        auto backend = make_cpu_backend(1);
        KvCache kv(*backend, small_config(8));
        const int32_t a = kv.new_sequence();
        kv.append(a, 13);
        QCOMPARE(kv.free_blocks(), 4);
        kv.truncate(a, 5);
        QCOMPARE(kv.length(a), 5);
        QCOMPARE(kv.free_blocks(), 6);
        kv.free_sequence(a);
        QCOMPARE(kv.free_blocks(), 8);
        QVERIFY_THROWS_EXCEPTION(Error, kv.length(a));
    }
    void exhaustionIsAClearErrorAndChangesNothing() {
        auto backend = make_cpu_backend(1);
        KvCache kv(*backend, small_config(2));
        const int32_t a = kv.new_sequence();
        kv.append(a, 7);
        try {
            kv.append(a, 2);
            QFAIL("no error");
        } catch (const Error& e) {
            QVERIFY(std::string(e.what()).find("KV cache full") != std::string::npos);
        }
        QCOMPARE(kv.length(a), 7);
    }
    void outOfMemoryNamesTheSizes() {
        auto backend = make_cpu_backend(1);
        KvCacheConfig c = small_config(1);
        c.n_kv_heads = 1 << 20;  // ~ 2^20 * 32 * 2 bytes per token row: far beyond host memory
        c.block_tokens = 1 << 16;
        c.n_blocks = 1 << 10;
        try {
            KvCache kv(*backend, c);
            QFAIL("no error");
        } catch (const Error& e) {
            const std::string m = e.what();
            QVERIFY2(m.find("cannot allocate the KV cache") != std::string::npos, m.c_str());
            QVERIFY2(m.find("reduce the context length") != std::string::npos, m.c_str());
        }
        QCOMPARE(backend->memory().bytes[static_cast<int>(MemoryKind::KvCache)], 0ull);
    }
};

QTEST_APPLESS_MAIN(TestKvCache)
#include "test_kv_cache.moc"
