// The served model's facts for Ollama's model endpoints, from its GGUF header.
#include "engine/server/ollama_models.h"

#include <sys/stat.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/core/checksum.h"
#include "engine/gguf/gguf.h"
#include "engine/models/model_info.h"
#include "kernels/common/error.h"

namespace ember::server {
namespace {

using json = nlohmann::json;

std::string rfc3339(std::time_t t) {
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string modified_at(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw Error(path + ": cannot read the file's modification time");
    return rfc3339(st.st_mtime);
}

std::string header_digest(const GgufFile& f) {
    std::ifstream in(f.path(), std::ios::binary);
    std::vector<char> head(static_cast<size_t>(f.data_offset()));
    if (!in.read(head.data(), static_cast<std::streamsize>(head.size())))
        throw Error(f.path() + ": cannot read the file's header");
    const uint64_t size = f.file_size();
    char hex[17];
    std::snprintf(
        hex, sizeof hex, "%016llx",
        static_cast<unsigned long long>(checksum64(head.data(), head.size(), checksum64(&size, sizeof size))));
    return hex;
}

json scalar(const GgufValue& v) {
    switch (v.type) {
        case GgufType::STRING:
            return v.as_string();
        case GgufType::BOOL:
            return v.as_bool();
        case GgufType::ARRAY:
            return nullptr;
        case GgufType::F32:
        case GgufType::F64:
            return v.as_f64();
        case GgufType::I8:
        case GgufType::I16:
        case GgufType::I32:
        case GgufType::I64:
            return v.as_i64();
        default:
            return v.as_u64();
    }
}

json model_info(const GgufFile& f, const ModelInfo& info) {
    json out = json::object();
    for (const auto& [key, value] : f.metadata())
        if (key != "tokenizer.chat_template") out[key] = scalar(value);
    out["general.parameter_count"] = info.n_params;
    return out;
}

}  // namespace

ServedModel describe_served_model(const std::string& model, const std::string& path) {
    const GgufFile f = GgufFile::open(path);
    const ModelInfo info = describe_model(f);
    ServedModel m;
    m.name = model + ":latest";
    m.path = path;
    m.size = std::filesystem::file_size(path);
    m.modified_at = modified_at(path);
    m.digest = header_digest(f);
    m.details = {{"parent_model", ""},
                 {"format", "gguf"},
                 {"family", info.architecture},
                 {"families", json::array({info.architecture})},
                 {"parameter_size", format_param_count(info.n_params)},
                 {"quantization_level", info.file_type}};
    m.model_info = model_info(f, info);
    m.chat_template = f.opt_string("tokenizer.chat_template").value_or("");
    m.context_length = info.context_length.value_or(0);
    return m;
}

bool model_name_matches(std::string_view asked, std::string_view served) {
    constexpr std::string_view latest = ":latest";
    if (asked.size() > latest.size() && asked.substr(asked.size() - latest.size()) == latest)
        asked.remove_suffix(latest.size());
    return asked == served;
}

}  // namespace ember::server
