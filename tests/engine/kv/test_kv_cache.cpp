// Block KV cache bookkeeping on the real CPU backend: slots, block reuse, truncation,
// exhaustion, out-of-memory messages, and prefix reuse (published blocks found by their
// tokens, shared, kept idle, evicted least recently released first).
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <span>
#include <vector>

#include "engine/kv/kv_cache.h"
#include "kernels/common/error.h"
#include "test_util.h"

using namespace ember;
using ember::test::TempDir;

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

// Layers of their own shapes (gemma4's sliding and global layers): each pool at its width.
TEST_CASE("per-layer shapes size each layer's pool") {
    KvCacheConfig c = small_config(10);
    c.n_layers = 3;
    c.shapes = {{2, 32}, {1, 64}, {4, 16}};
    REQUIRE_EQ(c.bytes_per_block(), 2ull * 4 * (64 * 2) * 3);  // every layer's rows are 64 wide here
    c.shapes[1] = {2, 64};
    REQUIRE_EQ(c.bytes_per_block(), 2ull * 4 * 2 * (64 + 128 + 64));
    REQUIRE_EQ(c.layer_pool_bytes(1), 10ull * 4 * 128 * 2);
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, c);
    CHECK(kv.layer(1).k.cols == 128);
    CHECK(kv.layer(1).head_dim == 64);
    CHECK(kv.layer(2).n_kv_heads == 4);
    c.shapes.pop_back();
    CHECK_THROWS_WITH_AS(KvCache(*backend, c), doctest::Contains("one shape per layer"), Error);
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
// The scheduler's seam: growth asked of the cache, all or nothing.
TEST_CASE("slots: allocate_slots gives all the slots asked for or says no and takes nothing") {
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, small_config(3));
    const int32_t a = kv.new_sequence();
    REQUIRE_EQ(kv.blocks_to_grow(a, 5), 2);
    const auto slots = kv.allocate_slots(a, 5);
    REQUIRE(slots.has_value());
    REQUIRE_EQ(*slots, std::vector<int32_t>{kv.block_table(a)[0] * 4, kv.block_table(a)[0] * 4 + 1,
                                            kv.block_table(a)[0] * 4 + 2, kv.block_table(a)[0] * 4 + 3,
                                            kv.block_table(a)[1] * 4});
    REQUIRE_EQ(kv.blocks_to_grow(a, 3), 0);  // the second block has 3 places left
    REQUIRE_EQ(kv.room(a), 3 + 4);           // those and the one free block
    REQUIRE_FALSE(kv.can_allocate(a, 8));
    REQUIRE_FALSE(kv.allocate_slots(a, 8).has_value());
    REQUIRE_EQ(kv.length(a), 5);
    REQUIRE_EQ(kv.free_blocks(), 1);
    REQUIRE_EQ(kv.allocate_slots(a, 7)->size(), size_t(7));
    REQUIRE_EQ(kv.used_blocks(), 3);
    REQUIRE_THROWS_AS(kv.allocate_slots(a, -1), Error);
}
TEST_CASE("slots: admission counts the running sequences' growth and what freeing kept ones returns") {
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, small_config(6));
    const int32_t running = kv.new_sequence(), kept = kv.new_sequence();
    kv.append(running, 2);  // 1 block; growing by 7 more takes 2
    kv.append(kept, 8);     // 2 blocks, given back when it is evicted
    const KvCache::Growth growth[] = {{running, 7}};
    const int32_t evictable[] = {kept};
    REQUIRE(kv.admits(4, growth, {}));          // 3 free - 2 = 1 block
    REQUIRE_FALSE(kv.admits(5, growth, {}));    // 2 blocks
    REQUIRE(kv.admits(12, growth, evictable));  // 3 blocks
    REQUIRE_FALSE(kv.admits(13, growth, evictable));
}
TEST_CASE("slots: rollback forgets the last tokens, a fork shares the full blocks") {
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, small_config(8));
    const int32_t a = kv.new_sequence();
    kv.append(a, 10);
    REQUIRE_EQ(kv.rollback(a, 3), 7);
    REQUIRE_EQ(kv.length(a), 7);
    REQUIRE_EQ(kv.block_table(a).size(), size_t(2));
    REQUIRE_THROWS_AS(kv.rollback(a, 8), Error);
    const int32_t f = kv.fork(a);  // shares block 0 (full); block 1 (3 of 4) stays a's
    REQUIRE_EQ(kv.length(f), 4);
    REQUIRE_EQ(kv.block_table(f), std::vector<int32_t>{kv.block_table(a)[0]});
    REQUIRE_EQ(kv.own_blocks(a), 1);
    REQUIRE_EQ(kv.free_blocks(), 6);
    kv.append(f, 1);  // the fork writes a block of its own, never the shared one
    REQUIRE(kv.block_table(f)[1] != kv.block_table(a)[1]);
    REQUIRE_EQ(kv.rollback(a, 7), 0);
    REQUIRE_EQ(kv.free_blocks(), 6);  // block 0 is still the fork's
    kv.free_sequence(f);
    REQUIRE_EQ(kv.free_blocks(), 8);
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

namespace {
// A sequence holding `tokens`, its full blocks published.
int32_t published_sequence(KvCache& kv, const std::vector<int32_t>& tokens) {
    const int32_t s = kv.new_sequence();
    kv.append(s, static_cast<int32_t>(tokens.size()));
    kv.publish(s, tokens);
    return s;
}
std::vector<int32_t> iota_tokens(int n, int first = 100) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    std::iota(t.begin(), t.end(), first);
    return t;
}
}  // namespace

TEST_CASE("prefix reuse: whole published blocks with the same leading tokens are shared") {
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, small_config(8));
    const std::vector<int32_t> tokens = iota_tokens(10);  // blocks [0,4) [4,8) published, [8,10) not
    const int32_t a = published_sequence(kv, tokens);
    REQUIRE_EQ(kv.published_blocks(), 2);
    REQUIRE_EQ(kv.free_blocks(), 5);

    const int32_t b = kv.new_sequence();
    REQUIRE_EQ(kv.attach_prefix(b, tokens), 8);  // the partial third block is never shared
    REQUIRE_EQ(kv.length(b), 8);
    REQUIRE_EQ(kv.block_table(b)[0], kv.block_table(a)[0]);
    REQUIRE_EQ(kv.block_table(b)[1], kv.block_table(a)[1]);
    REQUIRE_EQ(kv.free_blocks(), 5);     // nothing taken
    REQUIRE_EQ(kv.own_blocks(a), 1);     // a's third block only
    const auto slots = kv.append(b, 1);  // b goes on in a block of its own
    REQUIRE_NE(kv.block_table(b)[2], kv.block_table(a)[2]);
    REQUIRE_EQ(slots[0], kv.block_table(b)[2] * 4);

    // A different token anywhere in a block stops the match there; so does a different start.
    std::vector<int32_t> other = tokens;
    other[5] = 7;
    const int32_t c = kv.new_sequence();
    REQUIRE_EQ(kv.attach_prefix(c, other), 4);
    kv.free_sequence(c);
    other[0] = 7;
    const int32_t d = kv.new_sequence();
    REQUIRE_EQ(kv.attach_prefix(d, other), 0);
    REQUIRE_EQ(kv.block_table(d).size(), size_t(0));
    REQUIRE_THROWS_AS(kv.attach_prefix(b, tokens), Error);  // only onto an empty sequence
    REQUIRE_THROWS_AS(kv.publish(b, tokens), Error);        // the tokens must be b's
}

TEST_CASE("prefix reuse: released published blocks stay idle, count as free, and are evicted last-first") {
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, small_config(4));
    const std::vector<int32_t> first = iota_tokens(8), second = iota_tokens(8, 500);
    kv.free_sequence(published_sequence(kv, first));
    REQUIRE_EQ(kv.idle_blocks(), 2);
    REQUIRE_EQ(kv.free_blocks(), 4);
    const int32_t a = kv.new_sequence();
    REQUIRE_EQ(kv.attach_prefix(a, first), 8);  // found although nobody held them
    REQUIRE_EQ(kv.idle_blocks(), 0);
    kv.free_sequence(a);

    // Three blocks wanted, two never used: the third is the idle block released longest ago,
    // which is the first prompt's second block (a sequence lets go of its last block first).
    const int32_t b = kv.new_sequence();
    kv.append(b, 12);
    REQUIRE_EQ(kv.idle_blocks(), 1);
    REQUIRE_EQ(kv.published_blocks(), 1);
    const int32_t c = kv.new_sequence();
    REQUIRE_EQ(kv.attach_prefix(c, first), 4);  // its first block survived
    kv.free_sequence(c);
    kv.free_sequence(b);

    // A full pool of published blocks still serves new sequences.
    kv.free_sequence(published_sequence(kv, second));
    const int32_t e = kv.new_sequence();
    kv.append(e, 16);
    REQUIRE_EQ(kv.free_blocks(), 0);
    REQUIRE_EQ(kv.published_blocks(), 0);
    REQUIRE_THROWS_AS(kv.append(e, 1), Error);
}

TEST_CASE("prefix reuse: truncating into a shared block lets go of it, into an own one unpublishes it") {
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, small_config(8));
    const std::vector<int32_t> tokens = iota_tokens(12);
    const int32_t a = published_sequence(kv, tokens);
    const int32_t b = kv.new_sequence();
    REQUIRE_EQ(kv.attach_prefix(b, tokens), 12);
    REQUIRE_EQ(kv.truncate(b, 6), 4);  // block 1 is a's too: b keeps only block 0
    REQUIRE_EQ(kv.length(b), 4);
    REQUIRE_EQ(kv.block_table(b).size(), size_t(1));
    REQUIRE_EQ(kv.truncate(b, 4), 4);  // at a block boundary nothing more goes

    kv.free_sequence(b);
    REQUIRE_EQ(kv.truncate(a, 6), 6);      // a alone holds block 1 now: it will be written, so unpublished
    REQUIRE_EQ(kv.published_blocks(), 2);  // block 0, and block 2 idle (unreachable past block 1)
    REQUIRE_EQ(kv.idle_blocks(), 1);
    const int32_t c = kv.new_sequence();
    REQUIRE_EQ(kv.attach_prefix(c, tokens), 4);
    // a's new tokens publish under their own chain.
    std::vector<int32_t> grown(tokens.begin(), tokens.begin() + 6);
    grown.insert(grown.end(), {900, 901});
    kv.append(a, 2);
    kv.publish(a, grown);
    const int32_t d = kv.new_sequence();
    REQUIRE_EQ(kv.attach_prefix(d, grown), 8);
}

namespace {
// Block b's bytes, every layer's K then V (the host cache's order).
std::vector<uint8_t> block_bytes(Backend& be, KvCache& kv, int32_t b) {
    std::vector<uint8_t> out;
    for (int l = 0; l < kv.config().n_layers; ++l) {
        for (Tensor* t : {&kv.layer(l).k, &kv.layer(l).v}) {
            const Tensor rows = t->slice_rows(int64_t{b} * kv.config().block_tokens, kv.config().block_tokens);
            std::vector<uint8_t> part(rows.bytes());
            be.download(rows, part.data(), part.size());
            out.insert(out.end(), part.begin(), part.end());
        }
    }
    return out;
}
// Fills block b with bytes that differ per block, layer, half and position.
void fill_block(Backend& be, KvCache& kv, int32_t b, uint8_t tag) {
    for (int l = 0; l < kv.config().n_layers; ++l) {
        for (Tensor* t : {&kv.layer(l).k, &kv.layer(l).v}) {
            Tensor rows = t->slice_rows(int64_t{b} * kv.config().block_tokens, kv.config().block_tokens);
            std::vector<uint8_t> part(rows.bytes());
            for (size_t i = 0; i < part.size(); ++i)
                part[i] = static_cast<uint8_t>(tag * 31 + l * 7 + i + (t == &kv.layer(l).v));
            be.upload(rows, part.data(), part.size());
        }
    }
}
}  // namespace

TEST_CASE("prefix reuse: a host cache keeps evicted published blocks and brings them back byte for byte") {
    auto backend = make_cpu_backend(1);
    KvCacheConfig cfg = small_config(4);
    SUBCASE("one shape") {}
    SUBCASE("per-layer shapes") {
        cfg.n_layers = 3;
        cfg.shapes = {{2, 32}, {1, 128}, {2, 16}};
    }
    KvCache kv(*backend, cfg);
    const uint64_t per_block = kv.config().bytes_per_block();
    const std::vector<int32_t> tokens = iota_tokens(8);
    const auto publish_a = [&] {
        const int32_t a = kv.new_sequence();
        kv.append(a, 8);
        for (int i = 0; i < 2; ++i) fill_block(*backend, kv, kv.block_table(a)[size_t(i)], static_cast<uint8_t>(i + 1));
        kv.publish(a, tokens);
        std::vector<std::vector<uint8_t>> bytes;
        for (int32_t b : kv.block_table(a)) bytes.push_back(block_bytes(*backend, kv, b));
        kv.free_sequence(a);
        return bytes;
    };
    const auto take_whole_pool = [&] {
        const int32_t c = kv.new_sequence();
        kv.append(c, 16);  // a's idle blocks must give their room
        REQUIRE_EQ(kv.published_blocks(), 0);
        kv.free_sequence(c);
    };

    kv.set_host_cache(2 * per_block);
    const auto want = publish_a();
    take_whole_pool();
    REQUIRE_EQ(kv.host_cache()->size(), size_t(2));
    REQUIRE_EQ(kv.host_cache()->bytes(), 2 * per_block);
    const int32_t d = kv.new_sequence();
    REQUIRE_EQ(kv.attach_prefix(d, tokens), 8);
    REQUIRE_EQ(kv.host_cache()->size(), size_t(0));  // moved back into the pool
    REQUIRE_EQ(kv.published_blocks(), 2);
    for (int i = 0; i < 2; ++i) CHECK(block_bytes(*backend, kv, kv.block_table(d)[size_t(i)]) == want[size_t(i)]);
    kv.free_sequence(d);
    const int32_t e = kv.new_sequence();
    REQUIRE_EQ(kv.attach_prefix(e, tokens), 8);  // and published there again
    kv.free_sequence(e);

    // Room for one block: the one evicted last stays, which is a's first (a sequence lets go
    // of its last block first), so the prefix still starts there.
    kv.set_host_cache(per_block + per_block / 2);
    take_whole_pool();
    REQUIRE_EQ(kv.host_cache()->size(), size_t(1));
    const int32_t f = kv.new_sequence();
    REQUIRE_EQ(kv.attach_prefix(f, tokens), 4);
    CHECK(block_bytes(*backend, kv, kv.block_table(f)[0]) == want[0]);
    kv.free_sequence(f);

    // Other tokens find nothing there; no host cache, nothing kept.
    std::vector<int32_t> other = tokens;
    other[1] = 5;
    const int32_t g = kv.new_sequence();
    REQUIRE_EQ(kv.attach_prefix(g, other), 0);
    kv.free_sequence(g);
    kv.set_host_cache(0);
    REQUIRE(kv.host_cache() == nullptr);
}

TEST_CASE("prefix reuse: a disk cache brings published blocks back byte for byte in a new cache") {
    TempDir dir;
    auto backend = make_cpu_backend(1);
    const KvCacheConfig c = small_config(4);
    const std::vector<int32_t> tokens = iota_tokens(8);
    const auto open_store = [&](uint64_t identity) {
        return std::make_unique<DiskPrefixStore>(dir.path(), identity, c.block_tokens, c.bytes_per_block(), 1 << 20);
    };
    std::vector<std::vector<uint8_t>> want;
    {  // the first process: publishes a's two blocks, which are written as they are published
        KvCache kv(*backend, c);
        kv.set_disk_cache(open_store(7));
        const int32_t a = kv.new_sequence();
        kv.append(a, 8);
        for (int i = 0; i < 2; ++i) fill_block(*backend, kv, kv.block_table(a)[size_t(i)], static_cast<uint8_t>(i + 3));
        kv.publish(a, tokens);
        for (int32_t b : kv.block_table(a)) want.push_back(block_bytes(*backend, kv, b));
        kv.disk_cache()->flush();
        REQUIRE_EQ(kv.disk_cache()->size(), size_t(2));
        REQUIRE_EQ(kv.disk_cache()->bytes(), 2 * (c.bytes_per_block() + 48 + 4 * 4));
    }
    {  // the next: the same prefix comes from disk, published in the pool again
        KvCache kv(*backend, c);
        kv.set_disk_cache(open_store(7));
        REQUIRE_EQ(kv.disk_cache()->size(), size_t(2));
        const int32_t d = kv.new_sequence();
        REQUIRE_EQ(kv.attach_prefix(d, tokens), 8);
        REQUIRE_EQ(kv.published_blocks(), 2);
        for (int i = 0; i < 2; ++i) CHECK(block_bytes(*backend, kv, kv.block_table(d)[size_t(i)]) == want[size_t(i)]);
        std::vector<int32_t> other = tokens;
        other[5] = 99;  // the first block matches, the second does not
        kv.free_sequence(d);
        const int32_t e = kv.new_sequence();
        REQUIRE_EQ(kv.attach_prefix(e, other), 4);
        REQUIRE_THROWS_AS(kv.set_disk_cache(open_store(7)), Error);  // blocks are published under its seed
    }
    {  // another identity (model, shape or layout): none of those blocks
        KvCache kv(*backend, c);
        kv.set_disk_cache(open_store(8));
        REQUIRE_EQ(kv.disk_cache()->size(), size_t(0));
        REQUIRE_EQ(kv.attach_prefix(kv.new_sequence(), tokens), 0);
    }
}

// Linear-attention layers (qwen35): a zeroed state slot per live sequence, more slots when
// more sequences live than planned (contents kept), and truncation with no state snapshot
// that keeps nothing unless it keeps everything.
TEST_CASE("recurrent state: a zeroed slot per sequence, no rollback without a snapshot") {
    KvCacheConfig c = small_config(10);
    c.n_recurrent_layers = 2;
    c.recurrent = {4, 24, 1, 2, 8};
    c.state_slots = 1;
    REQUIRE_EQ(c.state_bytes(), 2ull * 1 * 4 * (3 * 24 + 2 * 8 * 8));
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, c);
    REQUIRE(kv.has_recurrent());
    const int32_t a = kv.new_sequence();
    RecurrentLayer& l0 = kv.recurrent(0);
    const std::vector<float> ones(static_cast<size_t>(l0.delta.cols * l0.delta.rows), 1.0f);
    backend->upload(kv.recurrent(0).delta, ones.data(), ones.size() * sizeof(float));  // slot a's state in use
    const int32_t b = kv.new_sequence();  // a second slot: the pool doubles, a's state moves along
    REQUIRE(kv.state_slot(a) != kv.state_slot(b));
    REQUIRE_EQ(kv.recurrent(0).n_slots, 2);
    std::vector<float> got(static_cast<size_t>(kv.recurrent(0).delta.cols * kv.recurrent(0).delta.rows));
    backend->download(kv.recurrent(0).delta, got.data(), got.size() * sizeof(float));
    const size_t slot_floats = got.size() / 2;
    for (size_t i = 0; i < slot_floats; ++i) {
        REQUIRE_EQ(got[static_cast<size_t>(kv.state_slot(a)) * slot_floats + i], 1.0f);
        REQUIRE_EQ(got[static_cast<size_t>(kv.state_slot(b)) * slot_floats + i], 0.0f);  // zeroed for b
    }
    kv.append(a, 10);
    REQUIRE_EQ(kv.truncate(a, 10), 10);  // everything kept: the state stays
    REQUIRE_EQ(kv.truncate(a, 6), 0);    // the state cannot go back to token 6: start over
    kv.append(a, 3);
    REQUIRE_EQ(kv.rollback(a, 1), 0);  // nor can it drop a rejected draft token
    const int32_t fork = kv.fork(a);
    REQUIRE_EQ(kv.length(fork), 0);  // a fork gets blocks, never another's state
    kv.free_sequence(fork);
    backend->download(kv.recurrent(0).delta, got.data(), got.size() * sizeof(float));
    for (size_t i = 0; i < slot_floats; ++i)
        REQUIRE_EQ(got[static_cast<size_t>(kv.state_slot(a)) * slot_floats + i], 0.0f);
    kv.free_sequence(a);
    REQUIRE_EQ(kv.state_slot(kv.new_sequence()), 0);  // a's slot, freed, is taken again
}

namespace {

// Every recurrent layer's rows of one sequence's state slot, set to v or read back.
void fill_state(KvCache& kv, Backend& be, int32_t seq, float v) {
    const int32_t slot = kv.state_slot(seq);
    for (int i = 0; i < kv.config().n_recurrent_layers; ++i) {
        RecurrentLayer& l = kv.recurrent(i);
        const int64_t delta_rows = int64_t{l.n_v_heads} * l.head_dim;
        for (Tensor part : {l.conv.slice_rows(slot * (l.conv_kernel - 1), l.conv_kernel - 1),
                            l.delta.slice_rows(slot * delta_rows, delta_rows)}) {
            const std::vector<float> values(static_cast<size_t>(part.rows * part.cols), v);
            be.upload(part, values.data(), values.size() * sizeof(float));
        }
    }
}
std::vector<float> read_state(KvCache& kv, Backend& be, int32_t seq) {
    const int32_t slot = kv.state_slot(seq);
    std::vector<float> all;
    for (int i = 0; i < kv.config().n_recurrent_layers; ++i) {
        RecurrentLayer& l = kv.recurrent(i);
        const int64_t delta_rows = int64_t{l.n_v_heads} * l.head_dim;
        for (Tensor part : {l.conv.slice_rows(slot * (l.conv_kernel - 1), l.conv_kernel - 1),
                            l.delta.slice_rows(slot * delta_rows, delta_rows)}) {
            std::vector<float> values(static_cast<size_t>(part.rows * part.cols));
            be.download(part, values.data(), values.size() * sizeof(float));
            all.insert(all.end(), values.begin(), values.end());
        }
    }
    return all;
}
bool state_is(KvCache& kv, Backend& be, int32_t seq, float v) {
    const std::vector<float> got = read_state(kv, be, seq);
    return !got.empty() && std::all_of(got.begin(), got.end(), [v](float x) { return x == v; });
}

}  // namespace

// State snapshots (qwen35's prefix reuse): publish() keeps a copy of the state where the
// sequence's length ends on a block; attach_prefix() stops at the last block with one and
// loads it; truncate() goes back to the last one at or before the new length; the budget
// keeps the newest.
TEST_CASE("recurrent state snapshots: prefixes and truncation resume from the last snapshot") {
    KvCacheConfig c = small_config(16);  // 4-token blocks
    c.n_recurrent_layers = 2;
    c.recurrent = {4, 24, 1, 2, 8};
    c.state_slots = 1;
    auto backend = make_cpu_backend(1);
    KvCache kv(*backend, c);
    std::vector<int32_t> tokens(10);
    std::iota(tokens.begin(), tokens.end(), 1);
    const std::span<const int32_t> all(tokens);
    const int32_t a = kv.new_sequence();
    kv.append(a, 4), fill_state(kv, *backend, a, 1.0f), kv.publish(a, all.first(4));   // snapshot "1" at 4
    kv.append(a, 4), fill_state(kv, *backend, a, 2.0f), kv.publish(a, all.first(8));   // snapshot "2" at 8
    kv.append(a, 2), fill_state(kv, *backend, a, 3.0f), kv.publish(a, all.first(10));  // 10: not a block end
    REQUIRE_EQ(kv.state_snapshots(), 2);
    REQUIRE_EQ(kv.state_snapshot_bytes(), 2 * c.state_bytes());

    const int32_t b = kv.new_sequence();
    CHECK_EQ(kv.attach_prefix(b, all), 8);
    CHECK(state_is(kv, *backend, b, 2.0f));
    std::vector<int32_t> other(tokens);
    other[5] = 99;  // diverges inside the second block: resumes after the first
    const int32_t d = kv.new_sequence();
    CHECK_EQ(kv.attach_prefix(d, other), 4);
    CHECK(state_is(kv, *backend, d, 1.0f));

    CHECK_EQ(kv.truncate(a, 9), 8);
    CHECK(state_is(kv, *backend, a, 2.0f));
    CHECK_EQ(kv.truncate(a, 7), 4);
    CHECK(state_is(kv, *backend, a, 1.0f));
    CHECK_EQ(kv.truncate(a, 3), 0);
    CHECK(state_is(kv, *backend, a, 0.0f));

    kv.set_state_snapshot_budget(c.state_bytes());  // room for one: the oldest ("1") goes
    CHECK_EQ(kv.state_snapshots(), 1);
    const int32_t e = kv.new_sequence();
    CHECK_EQ(kv.attach_prefix(e, other), 0);  // block 0's snapshot is gone
    kv.set_state_snapshot_budget(0);
    CHECK_EQ(kv.state_snapshots(), 0);
    CHECK_EQ(kv.state_snapshot_bytes(), 0u);
    const int32_t f = kv.new_sequence();
    CHECK_EQ(kv.attach_prefix(f, all), 0);
}

// The snapshots' bound (issue #40): a Keep snapshot (a prompt's chunk) goes to RAM and disk;
// a Latest one (a decode step) replaces the sequence's previous Latest one in RAM and reaches
// the disk only at end_turn(): a turn stores its prompt's snapshots and one more, and a
// restarted process resumes the follow-up from that one.
TEST_CASE("recurrent state snapshots: decode steps keep only the newest, stored at the turn's end") {
    TempDir dir;
    KvCacheConfig c = small_config(16);  // 4-token blocks
    c.n_recurrent_layers = 2;
    c.recurrent = {4, 24, 1, 2, 8};
    c.state_slots = 1;
    auto backend = make_cpu_backend(1);
    std::vector<int32_t> tokens(16);
    std::iota(tokens.begin(), tokens.end(), 1);
    const std::span<const int32_t> all(tokens);
    const auto open_stores = [&](KvCache& kv) {
        kv.set_disk_cache(
            std::make_unique<DiskPrefixStore>(dir.path(), 7, c.block_tokens, c.bytes_per_block(), 1 << 20));
        kv.set_disk_state_store(
            std::make_unique<DiskPrefixStore>(dir.path(), 8, c.block_tokens, kv.state_bytes_per_snapshot(), 1 << 20));
    };
    {
        KvCache kv(*backend, c);
        open_stores(kv);
        const int32_t a = kv.new_sequence();
        kv.append(a, 4), fill_state(kv, *backend, a, 1.0f), kv.publish(a, all.first(4));  // the prompt: Keep
        using S = KvCache::Snapshot;
        kv.append(a, 4), fill_state(kv, *backend, a, 2.0f), kv.publish(a, all.first(8), S::Latest);
        kv.append(a, 4), fill_state(kv, *backend, a, 3.0f), kv.publish(a, all.first(12), S::Latest);
        kv.append(a, 2), fill_state(kv, *backend, a, 4.0f), kv.publish(a, all.first(14), S::Latest);
        CHECK_EQ(kv.state_snapshots(), 2);  // 1 and 3: 2 was superseded
        kv.disk_state_store()->flush();
        CHECK_EQ(kv.disk_state_store()->size(), 1u);
        const int32_t b = kv.new_sequence();
        CHECK_EQ(kv.attach_prefix(b, all.first(10)), 4);  // 8's snapshot is gone: back to the prompt's
        CHECK(state_is(kv, *backend, b, 1.0f));
        kv.free_sequence(b);
        kv.end_turn(a);
        kv.end_turn(a);       // once only
    }                         // the stores write what is queued
    KvCache kv(*backend, c);  // a restart
    open_stores(kv);
    CHECK_EQ(kv.disk_state_store()->size(), 2u);
    const int32_t d = kv.new_sequence();
    CHECK_EQ(kv.attach_prefix(d, all), 12);
    CHECK(state_is(kv, *backend, d, 3.0f));
}
