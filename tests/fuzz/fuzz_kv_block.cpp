// libFuzzer target for the prefix cache's disk tier (engine/kv/disk_prefix_store.h): block files
// are read back from a folder anything may have written to (a crash mid-write, another
// version, a damaged disk). Any input must parse or be refused, and the store must read it as
// a block or a miss (deleting it) without crashing.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/core/log.h"
#include "engine/kv/disk_prefix_store.h"

namespace {
// The sizes the header claims when small enough (so that a valid file parses), else 4 and 64.
void expected_sizes(const uint8_t* data, size_t size, uint32_t& tokens, uint64_t& payload) {
    tokens = 4;
    payload = 64;
    if (size < 40) return;
    std::memcpy(&tokens, data + 12, 4);
    std::memcpy(&payload, data + 32, 8);
    tokens %= 64;
    if (payload > (1u << 16)) payload = 64;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const bool quiet = (ember::set_log_sink({}), true);  // a damaged file is logged each time
    (void)quiet;
    uint32_t tokens = 0;
    uint64_t payload = 0;
    expected_sizes(data, size, tokens, payload);
    std::string why;
    const auto f = ember::parse_block_file({data, size}, tokens, payload, &why);
    if (f && (f->tokens.size() != tokens || f->payload.size() != payload)) __builtin_trap();

    // The same bytes as block 1 of a store's folder, read back through the store.
    static const std::filesystem::path root = "/tmp/ember-fuzz-kv-" + std::to_string(::getpid());
    const std::filesystem::path folder = root / "0000000000000001";
    std::filesystem::create_directories(folder);
    std::ofstream(folder / "0000000000000001.kvb", std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    ember::DiskPrefixStore store(root, 1, tokens, payload, 1 << 20);
    const std::vector<int32_t> want = f ? f->tokens : std::vector<int32_t>(tokens);
    const auto e = store.get(1, f ? f->parent : 0, want);
    if (e && (!f || e->bytes.size() != payload)) __builtin_trap();
    return 0;
}
