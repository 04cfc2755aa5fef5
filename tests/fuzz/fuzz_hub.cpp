// libFuzzer target for what the hub client reads from a server: the model search and file
// tree JSON, Content-Range headers, and remote file names (checked before they become local
// paths). The first byte picks the reader; any input must be accepted or refused with
// ember::Error, and an accepted file name must be one the library can hold.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/gguf/gguf_split.h"
#include "engine/hub/hub_json.h"
#include "engine/hub/hub_names.h"
#include "kernels/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    try {
        switch (data[0] % 4) {
            case 0:
                for (const auto& f : ember::hub::parse_tree_response(text)) {
                    // Whatever the parser accepts passed check_remote_path: never absolute, never "..".
                    const std::string p = "/" + f.path + "/";
                    if (f.path.empty() || f.path.front() == '/' || p.find("/../") != std::string::npos)
                        __builtin_trap();
                    (void)ember::hub::quant_of(f.path);
                }
                (void)ember::hub::gguf_choices(ember::hub::parse_tree_response(text));
                break;
            case 1:
                (void)ember::hub::parse_search_response(text);
                break;
            case 2:
                if (const auto r = ember::hub::parse_content_range(text))
                    if (r->last < r->first || (r->total && r->last >= r->total)) __builtin_trap();
                break;
            case 3:
                ember::hub::check_remote_path(text);
                (void)ember::split_name_of(text);
                (void)ember::hub::quant_of(text);
                break;
        }
    } catch (const ember::Error&) {}
    return 0;
}
