// GGUF reader/writer: round trips, the real model files, and a corruption suite (truncation,
// random byte flips, hand-built hostile headers) that must only ever produce ember::Error.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <sstream>

#include "kernels/common/error.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "test_data.h"

using namespace ember;

namespace {

// Raw little-endian byte builder for hand-made (often hostile) files.
struct Bytes {
    std::vector<uint8_t> b;
    template <class T>
    Bytes& put(T v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        b.insert(b.end(), p, p + sizeof v);
        return *this;
    }
    Bytes& str(const std::string& s) {
        put<uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
        return put<uint32_t>(0x46554747).put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
    }
    Bytes& pad(size_t align) {
        while (b.size() % align) b.push_back(0);
        return *this;
    }
};

GgufWriter sample_writer(uint32_t alignment = 32) {
    GgufWriter w(alignment);
    w.set("general.architecture", GgufValue::str("llama"));
    w.set("general.name", GgufValue::str("unit-test model ü€"));
    w.set("t.u8", {GgufType::U8, uint64_t{200}});
    w.set("t.i8", {GgufType::I8, int64_t{-100}});
    w.set("t.u16", {GgufType::U16, uint64_t{65000}});
    w.set("t.i16", {GgufType::I16, int64_t{-32000}});
    w.set("t.u32", GgufValue::u32(4000000000u));
    w.set("t.i32", GgufValue::i32(-2000000000));
    w.set("t.u64", GgufValue::u64(1ull << 60));
    w.set("t.i64", {GgufType::I64, int64_t{-(1ll << 60)}});
    w.set("t.f32", GgufValue::f32(1.5f));
    w.set("t.f64", {GgufType::F64, 2.25});
    w.set("t.bool", GgufValue::boolean(true));
    w.set("t.strings",
          GgufValue::array(GgufType::STRING, {GgufValue::str("a"), GgufValue::str(""), GgufValue::str("ccc")}));
    w.set("t.nested",
          GgufValue::array(GgufType::ARRAY, {GgufValue::array(GgufType::I32, {GgufValue::i32(1), GgufValue::i32(2)}),
                                             GgufValue::array(GgufType::I32, {})}));
    w.set("t.empty", GgufValue::array(GgufType::F32, {}));
    std::vector<uint8_t> a(4 * 3 * 2);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i);
    w.add_tensor("a", DType::F32, {3, 2}, a);
    std::vector<uint8_t> q(34 * 2, 7);
    w.add_tensor("q", DType::Q8_0, {64}, q);
    w.add_tensor("z", DType::F16, {5}, std::vector<uint8_t>(10, 9));
    return w;
}

// Parsing must either succeed or throw ember::Error naming the file: never anything else.
bool parses(const std::vector<uint8_t>& bytes, std::string* error = nullptr) {
    try {
        GgufFile::parse(bytes.data(), bytes.size(), "mem.gguf");
        return true;
    } catch (const Error& e) {
        if (std::string(e.what()).rfind("mem.gguf: ", 0) != 0)
            throw std::runtime_error("error lacks file name: " + std::string(e.what()));
        if (error) *error = e.what();
        return false;
    }
}

void expect_error(const std::vector<uint8_t>& bytes, const char* fragment) {
    std::string err;
    REQUIRE_MESSAGE(!parses(bytes, &err), fragment);
    REQUIRE_MESSAGE(err.find(fragment) != std::string::npos, "expected '" << fragment << "' in: " << err);
}

}  // namespace

TEST_CASE("round trip all value types") {
    const auto bytes = sample_writer().to_bytes();
    const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "rt");
    REQUIRE_EQ(f.version(), 3u);
    REQUIRE_EQ(f.architecture(), std::string("llama"));
    REQUIRE_EQ(f.get_string("general.name"), std::string("unit-test model ü€"));
    REQUIRE_EQ(f.get_u64("t.u8"), 200ull);
    REQUIRE_EQ(f.get("t.i8").as_i64(), -100ll);
    REQUIRE_EQ(f.get_u64("t.u16"), 65000ull);
    REQUIRE_EQ(f.get("t.i16").as_i64(), -32000ll);
    REQUIRE_EQ(f.get_u64("t.u32"), 4000000000ull);
    REQUIRE_EQ(f.get("t.i32").as_i64(), -2000000000ll);
    REQUIRE_EQ(f.get_u64("t.u64"), 1ull << 60);
    REQUIRE_EQ(f.get("t.i64").as_i64(), -(1ll << 60));
    REQUIRE_EQ(f.get_f64("t.f32"), 1.5);
    REQUIRE_EQ(f.get_f64("t.f64"), 2.25);
    REQUIRE_EQ(*f.opt_bool("t.bool"), true);
    REQUIRE_EQ(f.get_string_array("t.strings"), (std::vector<std::string>{"a", "", "ccc"}));
    const auto& nested = f.get("t.nested").as_array();
    REQUIRE_EQ(nested.items.size(), size_t(2));
    REQUIRE_EQ(nested.items[0].as_array().items[1].as_i64(), 2ll);
    REQUIRE_EQ(nested.items[1].as_array().items.size(), size_t(0));
    REQUIRE_EQ(f.get("t.empty").as_array().elem_type, GgufType::F32);
    REQUIRE_EQ(f.metadata_order().front(), std::string("general.architecture"));
    // Typed lookups name the key when the kind is wrong.
    REQUIRE_THROWS_AS(f.get_string("t.u8"), Error);
    REQUIRE_THROWS_AS(f.get_u64("t.i8"), Error);
    REQUIRE_THROWS_AS(f.get("missing.key"), Error);

    REQUIRE_EQ(f.tensors().size(), size_t(3));
    const auto& a = f.tensor("a");
    REQUIRE_EQ(a.dims, (std::vector<uint64_t>{3, 2}));
    REQUIRE_EQ(a.n_bytes, 24ull);
    REQUIRE_EQ(a.rows(), 2ull);
    REQUIRE_EQ(int(a.data[5]), 5);
    REQUIRE_EQ(f.tensor("q").n_bytes, 68ull);
    REQUIRE_EQ(int(f.tensor("q").data[67]), 7);
    REQUIRE_EQ(int(f.tensor("z").data[9]), 9);
    for (const auto& t : f.tensors()) REQUIRE_EQ((t.data - bytes.data()) % 32, 0);
    REQUIRE(f.find_tensor("nope") == nullptr);
    REQUIRE_THROWS_AS(f.tensor("nope"), Error);
}

TEST_CASE("custom alignment") {
    const auto bytes = sample_writer(256).to_bytes();
    const GgufFile f = GgufFile::parse(bytes.data(), bytes.size(), "al");
    REQUIRE_EQ(f.alignment(), 256ull);
    REQUIRE_EQ(f.data_offset() % 256, 0ull);
    for (const auto& t : f.tensors()) REQUIRE_EQ(t.offset % 256, 0ull);
}

TEST_CASE("writer rejects bad tensors") {
    GgufWriter w;
    REQUIRE_THROWS_AS(w.add_tensor("x", DType::Q8_0, {33}, std::vector<uint8_t>(34)), Error);
    REQUIRE_THROWS_AS(w.add_tensor("x", DType::F32, {4}, std::vector<uint8_t>(15)), Error);
    REQUIRE_THROWS_AS(w.add_tensor("x", DType::F32, {}, {}), Error);
}

TEST_CASE("write file atomically") {
    test::TempDir dir;
    const std::string path = dir.file("m.gguf");
    GgufWriter w = sample_writer();
    w.add_tensor_lazy("lazy", DType::F32, {4}, [](uint8_t* dst, size_t n) { std::memset(dst, 0x41, n); });
    w.write_file(path);
    REQUIRE(!std::filesystem::exists(path + ".tmp"));
    const GgufFile f = GgufFile::open(path);
    REQUIRE_EQ(int(f.tensor("lazy").data[15]), 0x41);
    REQUIRE_EQ(f.file_size(), uint64_t(std::filesystem::file_size(path)));
    REQUIRE_THROWS_AS(w.write_file(dir.file("no/such/dir/m.gguf")), Error);
    REQUIRE_THROWS_AS(GgufFile::open(dir.file("absent.gguf")), Error);
    REQUIRE_THROWS_AS(GgufFile::open(dir.path()), Error);  // a directory
}

// The map for CPU weights: 2 MiB-aligned, same bytes as a plain map, whatever the page cache
// held (a just-written file's 4 KiB folios are dropped and read back), small files unaffected.
TEST_CASE("huge page map") {
    test::TempDir dir;
    const std::string path = dir.file("pattern.bin");
    std::vector<uint8_t> bytes((size_t{9} << 20) + 12345);
    std::mt19937 rng(5);
    for (auto& b : bytes) b = uint8_t(rng());
    {
        const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        REQUIRE(fd >= 0);
        REQUIRE_EQ(::write(fd, bytes.data(), bytes.size()), ssize_t(bytes.size()));
        REQUIRE_EQ(::fsync(fd), 0);  // clean pages, so the cache can be dropped
        REQUIRE_EQ(::close(fd), 0);
    }
    for (int round = 0; round < 2; ++round) {  // 4 KiB folios first, then whatever round 0 left
        MappedFile m(path, /*huge_pages=*/true);
        REQUIRE_EQ(m.size(), bytes.size());
        REQUIRE_EQ(reinterpret_cast<uintptr_t>(m.data()) % (uintptr_t{2} << 20), uintptr_t{0});
        REQUIRE(std::memcmp(m.data(), bytes.data(), bytes.size()) == 0);
        REQUIRE(m.huge_mapped_bytes() <= m.size());
        test::info("round %d: %zu of %zu bytes on 2 MiB pages", round, m.huge_mapped_bytes(), m.size());
    }

    // The 2 MiB of address space reserved around the map is given back: no mapping is left
    // behind after the map goes. Counted are the mappings a MappedFile could leave: ones of the
    // file, and anonymous ones up to 16 MiB (a reservation, or its tail, around this 9 MiB file).
    // ASan's allocator keeps its regions at [0x600000000000, 0x640000000000) and splits them as
    // it goes: those are not ours.
    const auto n_maps = [&path] {
        std::istringstream maps(test::read_file("/proc/self/maps"));
        long n = 0;
        for (std::string line; std::getline(maps, line);) {
            unsigned long lo = 0, hi = 0;
            if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2) continue;
            const unsigned long size = hi - lo;
            const bool anonymous = line.find('/') == std::string::npos && line.find('[') == std::string::npos;
            const bool asan_heap = lo >= 0x600000000000ul && hi <= 0x640000000000ul;
            if (line.find(path) != std::string::npos || (anonymous && !asan_heap && size <= (16ul << 20))) ++n;
        }
        return n;
    };
    const auto before = n_maps();
    for (int i = 0; i < 20; ++i) REQUIRE_EQ(MappedFile(path, true).size(), bytes.size());
    REQUIRE_EQ(n_maps(), before);

    const std::string smol = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(smol);
    const GgufFile plain = GgufFile::open(smol), huge = GgufFile::open(smol, /*huge_pages=*/true);
    REQUIRE_EQ(huge.tensors().size(), plain.tensors().size());
    const GgufTensor& a = plain.tensor("blk.3.ffn_down.weight");
    const GgufTensor& b = huge.tensor("blk.3.ffn_down.weight");
    REQUIRE(std::memcmp(a.data, b.data, a.n_bytes) == 0);

    const std::string stories = test::testdata(test::kStories);  // < 4 MiB: mapped as usual
    EMBER_REQUIRE_FILE(stories);
    REQUIRE_EQ(MappedFile(stories, true).size(), MappedFile(stories).size());
}

TEST_CASE("real models") {
    struct Expect {
        std::string path;
        const char* arch;
        size_t tensors;
        size_t vocab;
    };
    const Expect models[] = {
        {test::testdata(test::kStories), "llama", 48, 512},
        {test::test_model(test::kSmolLM2), "llama", 272, 49152},
        {test::test_model(test::kGemma3), "gemma3", 236, 262144},
    };
    for (const auto& m : models) {
        EMBER_REQUIRE_FILE(m.path);
        const GgufFile f = GgufFile::open(m.path);
        REQUIRE_EQ(f.architecture(), std::string(m.arch));
        REQUIRE_EQ(f.tensors().size(), m.tensors);
        REQUIRE_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), m.vocab);
        uint64_t end = 0;
        for (const auto& t : f.tensors()) end = std::max(end, f.data_offset() + t.offset + t.n_bytes);
        REQUIRE(end <= f.file_size());
    }
    const GgufFile smol = GgufFile::open(test::test_model(test::kSmolLM2));
    REQUIRE_EQ(smol.get_u64("llama.block_count"), 30ull);
    REQUIRE_EQ(smol.tensor("blk.0.attn_q.weight").type, DType::Q4_1);
    REQUIRE_EQ(smol.tensor("blk.0.attn_q.weight").dims, (std::vector<uint64_t>{576, 576}));
    REQUIRE(smol.opt_string("tokenizer.chat_template")->find("<|im_start|>") != std::string::npos);
}

TEST_CASE("truncation everywhere") {
    // Every prefix of a small file, and strided prefixes of stories260K (1.2 MB).
    const auto bytes = sample_writer().to_bytes();
    int failures = 0;
    for (size_t n = 0; n < bytes.size(); ++n) {
        std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
        failures += !parses(cut);
    }
    REQUIRE(failures > int(bytes.size()) - 64);  // only cuts inside trailing padding may pass

    const std::string stories = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(stories);
    MappedFile map(stories);
    std::vector<uint8_t> whole(map.data(), map.data() + map.size());
    for (size_t n = 0; n < whole.size(); n += (n < 40000 ? 97 : 9973)) {
        std::vector<uint8_t> cut(whole.begin(), whole.begin() + n);
        std::string err;
        REQUIRE(!parses(cut, &err));
    }
}

TEST_CASE("random byte flips") {
    const auto bytes = sample_writer().to_bytes();
    std::mt19937_64 rng(1234);
    int rejected = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        auto m = bytes;
        const int flips = 1 + int(rng() % 4);
        for (int k = 0; k < flips; ++k) m[rng() % m.size()] ^= uint8_t(1u << (rng() % 8));
        rejected += !parses(m);
    }
    REQUIRE(rejected > 1000);  // many flips hit counts/lengths/types and must be caught
}

TEST_CASE("hostile headers") {
    expect_error({}, "bad magic");
    expect_error(Bytes().put<uint32_t>(0x46554748).put<uint32_t>(3).b, "bad magic");
    expect_error(Bytes().header(0, 0, 1).b, "version 1 is not supported");
    expect_error(Bytes().header(0, 0, 7).b, "unsupported GGUF version 7");
    expect_error(Bytes().header(0, 0, 0x03000000).b, "big-endian");
    expect_error(Bytes().header(1ull << 62, 0).b, "tensor count");
    expect_error(Bytes().header(0, 1ull << 40).b, "metadata count");
    expect_error(Bytes().header(0, 1).put<uint64_t>(1ull << 63).put<uint64_t>(0).b, "absurd");
    expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(8).put<uint64_t>(1000).b, "truncated");
    expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(99).b, "unknown value type 99");
    expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(1ull << 60).b,
                 "array length");
    expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0).b,
                 "unknown array element type");
    expect_error(Bytes().header(0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2).b, "bool value 2");
    expect_error(Bytes().header(0, 1).str("").put<uint32_t>(4).put<uint32_t>(1).b, "empty key");
    expect_error(
        Bytes().header(0, 2).str("k").put<uint32_t>(4).put<uint32_t>(1).str("k").put<uint32_t>(4).put<uint32_t>(1).b,
        "duplicate metadata key");
    {  // arrays nested 6 deep
        Bytes b;
        b.header(0, 1).str("deep").put<uint32_t>(9);
        for (int i = 0; i < 6; ++i) b.put<uint32_t>(9).put<uint64_t>(1);
        b.put<uint32_t>(4).put<uint64_t>(0);
        expect_error(b.b, "nested too deeply");
    }
    for (uint32_t al : {0u, 3u, 48u}) {
        expect_error(Bytes().header(0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(al).b,
                     "general.alignment");
    }
    expect_error(Bytes().header(0, 1).str("general.alignment").put<uint32_t>(10).put<uint64_t>(32).b,
                 "must be a uint32");
}

namespace {
// One tensor info record followed by `data_bytes` of data, for tensor-level attacks.
std::vector<uint8_t> one_tensor(std::vector<uint64_t> dims, uint32_t type, uint64_t offset, size_t data_bytes,
                                uint32_t n_dims_override = 0) {
    Bytes b;
    b.header(1, 0).str("t").put<uint32_t>(n_dims_override ? n_dims_override : uint32_t(dims.size()));
    for (auto d : dims) b.put<uint64_t>(d);
    b.put<uint32_t>(type).put<uint64_t>(offset);
    b.pad(32);
    b.b.resize(b.b.size() + data_bytes);
    return b.b;
}
}  // namespace

TEST_CASE("hostile tensors") {
    REQUIRE(parses(one_tensor({8}, 0, 0, 32)));
    expect_error(one_tensor({8}, 0, 0, 31), "beyond the end of the file");
    expect_error(one_tensor({8}, 0, 32, 32), "beyond the end of the file");
    expect_error(one_tensor({8}, 0, 1ull << 62, 32), "beyond the end of the file");
    expect_error(one_tensor({8}, 0, 16, 64), "not aligned");
    expect_error(one_tensor({8}, 200, 0, 32), "unknown tensor type 200");
    expect_error(one_tensor({8}, 4, 0, 32), "unknown tensor type 4");  // removed Q4_2
    expect_error(one_tensor({33}, 8, 0, 64), "not a multiple of the Q8_0 block size");
    expect_error(one_tensor({1ull << 32, 1ull << 32, 1ull << 32}, 0, 0, 32), "overflows");
    expect_error(one_tensor({1ull << 63}, 0, 0, 32), "overflows");
    expect_error(one_tensor({8, 0}, 0, 0, 32), "dimension 1 is zero");
    expect_error(one_tensor({}, 0, 0, 32, 0), "0 dimensions");
    expect_error(one_tensor({1, 1, 1, 1, 1}, 0, 0, 32), "5 dimensions");
    {  // two tensors sharing bytes
        Bytes b;
        b.header(2, 0);
        b.str("a").put<uint32_t>(1).put<uint64_t>(16).put<uint32_t>(0).put<uint64_t>(0);
        b.str("b").put<uint32_t>(1).put<uint64_t>(8).put<uint32_t>(0).put<uint64_t>(32);
        b.pad(32);
        b.b.resize(b.b.size() + 128);
        expect_error(b.b, "overlap");
    }
    {  // duplicate names
        Bytes b;
        b.header(2, 0);
        b.str("a").put<uint32_t>(1).put<uint64_t>(8).put<uint32_t>(0).put<uint64_t>(0);
        b.str("a").put<uint32_t>(1).put<uint64_t>(8).put<uint32_t>(0).put<uint64_t>(32);
        b.pad(32);
        b.b.resize(b.b.size() + 64);
        expect_error(b.b, "duplicate tensor name");
    }
}
