// The quantization choice (engine/fit/quant_choice.h) and what it stands on: budgets typed by
// people, the prefix parse of a GGUF header (a remote file's first bytes), and the decision
// table for 1B, 8B and 70B-shaped repositories (synthetic tensor tables: only headers are
// built, no multi-GB files) at 8, 24 and 80 GiB of VRAM (and a few smaller cards), 64 GiB of
// RAM, and several target contexts.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/fit/byte_size.h"
#include "engine/fit/quant_choice.h"
#include "engine/gguf/gguf_split.h"
#include "engine/models/synthetic.h"
#include "kernels/common/error.h"
#include "test_data.h"

using namespace ember;

namespace {

constexpr uint64_t GiB = uint64_t{1} << 30, MiB = uint64_t{1} << 20;

std::vector<uint8_t> file_bytes(const std::string& path) {
    const std::string s = test::read_file(path);
    return {s.begin(), s.end()};
}

// A PrefixReader over in-memory files; zeros past the stored bytes (a header-only file stands
// for a multi-GB one), and a count of the calls.
struct MemoryRepo {
    std::map<std::string, std::vector<uint8_t>> files;
    int reads = 0;
    fit::PrefixReader reader() {
        return [this](const std::string& path, uint64_t n) {
            ++reads;
            const auto& f = files.at(path);
            std::vector<uint8_t> out(static_cast<size_t>(n), 0);
            std::memcpy(out.data(), f.data(), std::min<size_t>(f.size(), out.size()));
            return out;
        };
    }
};

}  // namespace

TEST_CASE("budgets parse in the units people write") {
    CHECK(fit::parse_byte_size("24GiB", "--vram") == 24 * GiB);
    CHECK(fit::parse_byte_size("24G", "--vram") == 24 * GiB);
    CHECK(fit::parse_byte_size("24 GB", "--vram") == 24 * GiB);
    CHECK(fit::parse_byte_size("512MiB", "--vram") == 512 * MiB);
    CHECK(fit::parse_byte_size("1.5t", "--ram") == 3 * (uint64_t{1} << 39));
    CHECK(fit::parse_byte_size("8000000000", "--ram") == 8000000000ull);
    CHECK(fit::parse_byte_size("0", "--vram") == 0);
    for (const char* bad : {"", "GiB", "-1G", "24X", "24 GiBs", "1e3G", "99999999999T", "1.2.3G"}) {
        INFO("input '", bad, "'");
        try {
            fit::parse_byte_size(bad, "--vram");
            FAIL("accepted");
        } catch (const Error& e) {
            const std::string msg = e.what();
            CHECK(msg.find("--vram") != std::string::npos);
            CHECK(msg.find("24GiB") != std::string::npos);  // says what a good value looks like
        }
    }
}

// Every prefix of a real file: either the full header (the same table the full parse gives)
// or a request for more bytes that the parse then needs; following the requests reaches the
// header in few steps.
TEST_CASE("prefix parse asks for exactly what a truncated header lacks") {
    const std::string path = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(path);
    const std::vector<uint8_t> bytes = file_bytes(path);
    const GgufFile full = GgufFile::parse(bytes.data(), bytes.size(), path);
    // Every length up to 4 KiB (the fixed header and the first keys), then samples: each
    // asks for more than it has, never more than the file.
    for (size_t n = 0; n < full.data_offset(); n = n < 4096 ? n + 1 : n + 65521) {
        const GgufPrefix p = GgufFile::parse_prefix(bytes.data(), n, bytes.size(), path);
        REQUIRE(!p.file);
        REQUIRE(p.need_bytes > n);
        REQUIRE(p.need_bytes <= bytes.size());
    }
    // The header ends where the tensor data starts (less the alignment padding).
    REQUIRE(GgufFile::parse_prefix(bytes.data(), full.data_offset(), bytes.size(), path).file);
    CHECK(!GgufFile::parse_prefix(bytes.data(), full.data_offset() - 32, bytes.size(), path).file);
    const size_t smallest_whole = full.data_offset();
    int steps = 0;
    size_t n = 16;
    for (;;) {
        ++steps;
        const GgufPrefix p = GgufFile::parse_prefix(bytes.data(), n, bytes.size(), path);
        if (p.file) {
            REQUIRE(p.file->tensors().size() == full.tensors().size());
            for (size_t i = 0; i < full.tensors().size(); ++i) {
                CHECK(p.file->tensors()[i].name == full.tensors()[i].name);
                CHECK(p.file->tensors()[i].n_bytes == full.tensors()[i].n_bytes);
                CHECK(p.file->tensors()[i].data == nullptr);
            }
            CHECK(p.file->get_string("general.architecture") == "llama");
            break;
        }
        // As read_header does: what it asks for, and at least twice as much as before (the
        // request is a lower bound; strings are longer than their smallest encoding).
        n = std::max(static_cast<size_t>(p.need_bytes), 2 * n);
    }
    test::info("SmolLM2 header: %zu bytes, reached in %d steps from 16 bytes", smallest_whole, steps);
    CHECK(steps < 40);
}

TEST_CASE("prefix parse rejects bad headers instead of asking for more") {
    const std::string path = test::testdata(test::kStories);
    EMBER_REQUIRE_FILE(path);
    std::vector<uint8_t> bytes = file_bytes(path);
    std::vector<uint8_t> bad = bytes;
    bad[0] = 'X';
    CHECK_THROWS_AS(GgufFile::parse_prefix(bad.data(), 64, bad.size(), "bad"), Error);
    // A tensor count no file of this size could hold: an error, not a request for petabytes.
    bad = bytes;
    const uint64_t huge = uint64_t{1} << 60;
    std::memcpy(bad.data() + 8, &huge, 8);
    CHECK_THROWS_AS(GgufFile::parse_prefix(bad.data(), 64, bad.size(), "bad"), Error);
    // An array whose first string claims nearly the whole file leaves no room for the other
    // items: an error, not a request for more.
    {
        std::vector<uint8_t> h;
        auto put = [&](uint64_t v, int n) {
            for (int i = 0; i < n; ++i) h.push_back(static_cast<uint8_t>(v >> (8 * i)));
        };
        const uint64_t file_size = uint64_t{1} << 20;
        put(0x46554747, 4), put(3, 4), put(0, 8), put(1, 8);              // magic, v3, 0 tensors, 1 key
        put(1, 8), h.push_back('a'), put(9, 4), put(8, 4), put(1000, 8);  // "a": 1000 strings
        put(file_size - 200, 8);                                          // the first one's length
        h.resize(8192, 0);
        try {
            GgufFile::parse_prefix(h.data(), h.size(), file_size, "hostile");
            FAIL("accepted");
        } catch (const Error& e) {
            CHECK(std::string(e.what()).find("run past the end of the file") != std::string::npos);
        }
    }
    // A prefix longer than the file is a caller error.
    CHECK_THROWS_AS(GgufFile::parse_prefix(bytes.data(), bytes.size(), bytes.size() - 1, "x"), Error);
}

namespace {

const char* const kSchemes[] = {"F16", "Q8_0", "Q6_K", "Q5_K", "Q4_K_M", "Q4_K", "Q4_0"};

// As on the hub, a 70B's biggest files exist only split (-00001-of-00002.gguf, ...): 70B
// Q8_0 (~70 GiB) and F16 in two parts each.
bool is_split(const std::string& shape, const std::string& scheme) {
    return shape == "llama-3-70b" && (scheme == "Q8_0" || scheme == "F16");
}

// A repository of one shape in every scheme (headers only, the sizes of the real files).
// Built once per shape (a 128k-token vocabulary takes a while).
MemoryRepo repository(const std::string& shape, std::vector<fit::ListedFile>& listing) {
    static std::map<std::string, std::pair<MemoryRepo, std::vector<fit::ListedFile>>> cache;
    if (auto it = cache.find(shape); it != cache.end()) {
        listing = it->second.second;
        return it->second.first;
    }
    MemoryRepo repo;
    for (const char* scheme : kSchemes) {
        if (is_split(shape, scheme)) {
            const auto parts = synthetic_split_headers(synthetic_shape(shape), scheme, 2);
            for (uint32_t i = 0; i < parts.size(); ++i) {
                const std::string path = split_part_name(shape + "-" + scheme, i + 1, 2);
                listing.push_back({path, parts[i].file_size});
                repo.files[path] = parts[i].bytes;
            }
            continue;
        }
        SyntheticHeader h = synthetic_header(synthetic_shape(shape), scheme);
        const std::string path = shape + "-" + scheme + ".gguf";
        listing.push_back({path, h.file_size});
        repo.files[path] = std::move(h.bytes);
    }
    listing.push_back({shape + "-BF16-00001-of-00002.gguf", 1000});  // part 2 missing: not plannable
    listing.push_back({"README.md", 100});                           // not a model: ignored
    cache[shape] = {repo, listing};
    return repo;
}

struct Row {
    const char* shape;
    uint64_t vram_gib;
    int64_t ctx;
    const char* quant;  // the chosen file's quantization ("" = none)
    fit::Placement placement;
    int64_t chosen_ctx;
};

}  // namespace

TEST_CASE("decision table: 1B, 8B, 70B x 8, 24, 80 GiB x contexts") {
    const Row rows[] = {
#include "decision_table.inc"
    };
    std::map<std::string, std::pair<std::vector<fit::Candidate>, MemoryRepo>> repos;
    for (const char* shape : {"llama-3.2-1b", "llama-3-8b", "llama-3-70b"}) {
        std::vector<fit::ListedFile> listing;
        MemoryRepo repo = repository(shape, listing);
        auto candidates = fit::read_candidates(listing, repo.reader());
        REQUIRE(candidates.size() == std::size(kSchemes) + 1);  // README skipped
        repos[shape] = {std::move(candidates), std::move(repo)};
    }
    for (const Row& r : rows) {
        fit::ChoiceOptions o;
        o.fit.n_ctx = r.ctx;
        const fit::Budget b{r.vram_gib * GiB, 64 * GiB, false};
        const fit::QuantChoice c = fit::choose_quant(repos.at(r.shape).first, b, o);
        test::info("%-13s %3llu GiB ctx %6lld -> %s", r.shape, static_cast<unsigned long long>(r.vram_gib),
                   static_cast<long long>(r.ctx), c.reason.c_str());
        INFO(r.shape, " ", r.vram_gib, " GiB, ctx ", r.ctx, ": ", c.reason);
        if (!*r.quant) {
            CHECK(!c.chosen);
            continue;
        }
        REQUIRE(c.chosen);
        CHECK(c.ranked[*c.chosen].quant == r.quant);
        CHECK(c.plan->placement == r.placement);
        CHECK(c.plan->n_ctx == r.chosen_ctx);
        CHECK(c.reason.rfind(std::string(r.quant) + ":", 0) == 0);
        // A split model is chosen as a whole: its first part names it, its size is all parts'.
        const auto split = split_name_of(c.ranked[*c.chosen].path);
        CHECK(split.has_value() == is_split(r.shape, r.quant));
        if (split) CHECK(split->index == 1);
    }
}

// No GPU: the smallest file of Q4_K_M or better (the CPU is bandwidth-bound); and when not
// even the smallest file fits anywhere, no choice, and the reason says what it needs.
TEST_CASE("no GPU, and nothing fits") {
    std::vector<fit::ListedFile> listing;
    MemoryRepo repo = repository("llama-3-8b", listing);
    const auto candidates = fit::read_candidates(listing, repo.reader());
    const fit::ChoiceOptions o;
    const fit::QuantChoice cpu = fit::choose_quant(candidates, fit::Budget{0, 32 * GiB, false}, o);
    REQUIRE(cpu.chosen);
    CHECK(cpu.ranked[*cpu.chosen].quant == "Q4_K_M");
    CHECK(cpu.plan->placement == fit::Placement::Cpu);
    CHECK(cpu.reason.find("no GPU") != std::string::npos);
    const fit::QuantChoice none = fit::choose_quant(candidates, fit::Budget{2 * GiB, 2 * GiB, false}, o);
    CHECK(!none.chosen);
    CHECK(none.reason.rfind("nothing fits", 0) == 0);
    // Every file is still ranked, best first, with its own plan or why it was skipped.
    REQUIRE(none.ranked.size() == candidates.size());
    CHECK(none.ranked.front().quant == "F16");
    CHECK(none.ranked.back().note.find("part 2 of 2 of this split model is missing") != std::string::npos);
}

TEST_CASE("the choice reads remote headers in few round trips") {
    std::vector<fit::ListedFile> listing;
    MemoryRepo repo = repository("llama-3-70b", listing);
    const auto candidates = fit::read_candidates(listing, repo.reader());
    // A 128k-token vocabulary makes the header megabytes: 1 MiB first, then what it asks.
    // The second parts of the two split models hold no tokenizer: one read each.
    CHECK(repo.reads <= 3 * static_cast<int>(std::size(kSchemes)) + 2);
    for (const auto& c : candidates)
        if (c.model) CHECK(c.model->config.n_layers == 80);
    std::vector<fit::ListedFile> broken{{"broken.gguf", 4096}};
    MemoryRepo junk;
    junk.files["broken.gguf"] = std::vector<uint8_t>(4096, 0x41);
    const auto bad = fit::read_candidates(broken, junk.reader());
    REQUIRE(bad.size() == 1);
    CHECK(!bad[0].model);
    CHECK(bad[0].skipped.find("not a GGUF") != std::string::npos);
}

// A split model's candidate: the joined tensor table of its parts is the single file's, its
// size the sum of the parts; the parts beyond the first are not candidates of their own.
TEST_CASE("a split model is one candidate with the single file's plan") {
    const SyntheticShape shape = synthetic_shape("llama-3-8b");
    MemoryRepo repo;
    std::vector<fit::ListedFile> listing;
    const SyntheticHeader whole = synthetic_header(shape, "Q8_0");
    listing.push_back({"whole-Q8_0.gguf", whole.file_size});
    repo.files["whole-Q8_0.gguf"] = whole.bytes;
    uint64_t split_bytes = 0;
    const auto parts = synthetic_split_headers(shape, "Q8_0", 3);
    for (uint32_t i = 0; i < 3; ++i) {
        const std::string path = split_part_name("split-Q8_0", i + 1, 3);
        listing.push_back({path, parts[i].file_size});
        repo.files[path] = parts[i].bytes;
        split_bytes += parts[i].file_size;
    }
    const auto candidates = fit::read_candidates(listing, repo.reader());
    REQUIRE(candidates.size() == 2);
    const fit::Candidate &a = candidates[0], &b = candidates[1];
    REQUIRE(a.model);
    REQUIRE(b.model);
    CHECK(b.path == "split-Q8_0-00001-of-00003.gguf");
    CHECK(b.size == split_bytes);
    CHECK(b.model->file_bytes == split_bytes);
    // Three headers (the tokenizer only in the first) and the split keys: a little larger.
    CHECK(split_bytes > whole.file_size);
    CHECK(split_bytes < whole.file_size + 3 * MiB);
    REQUIRE(b.model->tensors.size() == a.model->tensors.size());
    for (size_t i = 0; i < a.model->tensors.size(); ++i) {
        CHECK(b.model->tensors[i].name == a.model->tensors[i].name);
        CHECK(b.model->tensors[i].bytes == a.model->tensors[i].bytes);
    }
    CHECK(b.model->config.n_layers == 32);
    CHECK(b.model->quant == "Q8_0");
    const fit::Budget budget{24 * GiB, 64 * GiB, false};
    const fit::FitPlan pa = fit::plan(*a.model, fit::FitOptions{8192, 1, 512, DType::F16}, budget);
    const fit::FitPlan pb = fit::plan(*b.model, fit::FitOptions{8192, 1, 512, DType::F16}, budget);
    CHECK(pb.gpu.total() == pa.gpu.total());
    // Parts out of place: a missing part, or a part that is not what its name says.
    std::vector<fit::ListedFile> gap{listing[1], listing[3]};  // parts 1 and 3 of 3
    const auto missing = fit::read_candidates(gap, repo.reader());
    REQUIRE(missing.size() == 1);
    CHECK(!missing[0].model);
    CHECK(missing[0].skipped.find("part 2 of 3") != std::string::npos);
    MemoryRepo swapped = repo;
    swapped.files["split-Q8_0-00002-of-00003.gguf"] = parts[2].bytes;
    const auto bad = fit::read_candidates(listing, swapped.reader());
    REQUIRE(bad.size() == 2);
    CHECK(!bad[1].model);  // part 3 where part 2 belongs: its split.no, or its tensor bounds, say so
    CHECK(!bad[1].skipped.empty());
}
