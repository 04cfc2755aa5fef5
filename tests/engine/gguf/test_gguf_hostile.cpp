// Hostile GGUF headers that used to balloon memory: nested empty arrays, huge declared
// counts, millions of keys or tensors. Each must fail with a clear error while the heap the
// parser takes stays within its documented bound (64 MiB + 2 x the file size), measured by
// counting every operator new of this process.
#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "kernels/common/error.h"
#include "test_data.h"

// ---- heap accounting: live bytes and their peak, over every operator new ----------------
namespace {
std::atomic<int64_t> g_live{0}, g_peak{0};

void* counted_alloc(size_t n) {
    void* p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    const int64_t live =
        g_live.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) + static_cast<int64_t>(malloc_usable_size(p));
    int64_t peak = g_peak.load();
    while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {}
    return p;
}
void counted_free(void* p) {
    if (!p) return;
    g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
    std::free(p);
}
}  // namespace

void* operator new(size_t n) { return counted_alloc(n); }
void* operator new[](size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }

using namespace ember;

namespace {

// Raw GGUF v3 bytes, written field by field (GgufWriter cannot write lies).
struct Raw {
    std::vector<uint8_t> b;
    template <class T>
    Raw& put(T v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        b.insert(b.end(), p, p + sizeof v);
        return *this;
    }
    Raw& str(const std::string& s) {
        put<uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Raw& header(uint64_t n_tensors, uint64_t n_kv) {
        return put<uint32_t>(0x46554747).put<uint32_t>(3).put(n_tensors).put(n_kv);
    }
};

constexpr uint32_t kU8 = 0, kF32Type = 6, kArray = 9;

struct Outcome {
    std::string error;    // "" when the parse succeeded
    int64_t peak_growth;  // heap bytes above the level before the parse, at the worst moment
};

Outcome parse(const std::vector<uint8_t>& bytes) {
    const int64_t before = g_live.load();
    g_peak.store(before);
    Outcome o{"", 0};
    try {
        GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "hostile.gguf");
        o.peak_growth = g_peak.load() - before;  // measured while f is alive
    } catch (const Error& e) {
        o.error = e.what();
        o.peak_growth = g_peak.load() - before;
    }
    return o;
}

int64_t bound(size_t file_size) { return (int64_t{64} << 20) + 2 * static_cast<int64_t>(file_size); }

// One key holding an array of `n` empty u8 arrays (12 bytes each in the file).
std::vector<uint8_t> nested_empty_arrays(uint64_t n) {
    Raw r;
    r.header(0, 1).str("hostile.nested").put<uint32_t>(kArray).put<uint32_t>(kArray).put<uint64_t>(n);
    r.b.reserve(r.b.size() + n * 12);
    for (uint64_t i = 0; i < n; ++i) r.put<uint32_t>(kU8).put<uint64_t>(0);
    return r.b;
}

}  // namespace

TEST_CASE("the heap counter sees the parser's allocations") {
    // A real file, fully parsed: its directory must show up in the count (or the bounds
    // asserted below would prove nothing).
    const std::vector<uint8_t> bytes = nested_empty_arrays(100000);
    const Outcome o = parse(bytes);
    REQUIRE(o.error.empty());
    CHECK(o.peak_growth > 100000 * 48);  // at least one GgufValue per array
}

TEST_CASE("nested empty arrays: refused once they outgrow the bound, never above it") {
    // ~2 MB: parses (well inside 64 MiB), within the bound.
    {
        const auto bytes = nested_empty_arrays(170000);
        const Outcome o = parse(bytes);
        CHECK_MESSAGE(o.error.empty(), o.error);
        CHECK(o.peak_growth <= bound(bytes.size()));
    }
    // ~24 MB of 12-byte arrays would take ~250 MB as parsed values: refused, and the heap
    // never grew past the bound on the way (it used to reach ~10x the file size).
    {
        const auto bytes = nested_empty_arrays(2000000);
        const Outcome o = parse(bytes);
        INFO(o.error);
        CHECK(o.error.find("hostile.nested") != std::string::npos);
        CHECK(o.error.find("MiB of memory") != std::string::npos);
        CHECK(o.peak_growth <= bound(bytes.size()));
        MESSAGE("24 MB of nested empty arrays: peak heap growth ", o.peak_growth >> 20, " MiB before the refusal");
    }
}

TEST_CASE("a byte array larger than its budget fails before anything is reserved") {
    // 20 M u8 items are 20 MB in the file but ~1 GB as parsed values; the old parser reserved
    // that before its value limit stopped it.
    const uint64_t n = 20u << 20;
    Raw r;
    r.header(0, 1).str("hostile.bytes").put<uint32_t>(kArray).put<uint32_t>(kU8).put<uint64_t>(n);
    r.b.resize(r.b.size() + n, 7);
    const Outcome o = parse(r.b);
    INFO(o.error);
    CHECK(o.error.find("metadata 'hostile.bytes': holding the file's metadata would take more than 104 MiB") !=
          std::string::npos);
    CHECK(o.peak_growth < (int64_t{1} << 20));  // nothing but the error text
}

TEST_CASE("declared counts larger than the file fail at once") {
    {
        Raw r;
        r.header(0, 1)
            .str("hostile.count")
            .put<uint32_t>(kArray)
            .put<uint32_t>(kF32Type)
            .put<uint64_t>(uint64_t{1} << 40);
        const Outcome o = parse(r.b);
        CHECK(o.error.find("array length 1099511627776 cannot fit") != std::string::npos);
        CHECK(o.peak_growth < (int64_t{1} << 20));
    }
    {
        Raw r;
        r.header(uint64_t{1} << 50, 0);
        const Outcome o = parse(r.b);
        CHECK(o.error.find("tensor count") != std::string::npos);
    }
}

TEST_CASE("millions of keys or tensors stay within the bound") {
    SUBCASE("keys") {
        const uint64_t n = 1500000;  // 19-byte entries (6-char keys, u8 values), ~28 MB
        Raw r;
        r.header(0, n);
        char key[16];
        for (uint64_t i = 0; i < n; ++i) {
            std::snprintf(key, sizeof key, "%06llx", static_cast<unsigned long long>(i));
            r.str(key).put<uint32_t>(kU8).put<uint8_t>(1);
        }
        const Outcome o = parse(r.b);
        INFO(o.error);
        CHECK(o.error.find("MiB of memory") != std::string::npos);
        CHECK(o.peak_growth <= bound(r.b.size()));
    }
    SUBCASE("tensors") {
        const uint64_t n = 400000;  // 40-byte infos + 32 bytes of data each, ~29 MB
        Raw r;
        r.header(n, 0);
        char name[16];
        for (uint64_t i = 0; i < n; ++i) {
            std::snprintf(name, sizeof name, "t%07llu", static_cast<unsigned long long>(i));
            r.str(name).put<uint32_t>(1).put<uint64_t>(8).put<uint32_t>(0 /*F32*/).put<uint64_t>(i * 32);
        }
        r.b.resize((r.b.size() + 31) / 32 * 32 + n * 32);
        const Outcome o = parse(r.b);
        INFO(o.error);
        CHECK(o.peak_growth <= bound(r.b.size()));
        MESSAGE("400k tensors: ", o.error.empty() ? std::string("parsed") : o.error, ", peak heap growth ",
                o.peak_growth >> 20, " MiB");
    }
}
