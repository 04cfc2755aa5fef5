// nlohmann-json (Debian's nlohmann-json3-dev, header-only) for the hub's answers; its
// exceptions become ember::Error here so that callers see one error type.
#include "engine/hub/hub_json.h"

#include <nlohmann/json.hpp>

#include "kernels/common/error.h"

namespace ember::hub {
namespace {

using nlohmann::json;

json parse_array(std::string_view text, const char* what) {
    json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw Error(std::string(what) + ": the server's answer is not valid JSON");
    if (!j.is_array()) throw Error(std::string(what) + ": the server's answer is not a JSON array");
    return j;
}

uint64_t count_field(const json& o, const char* key) {
    const auto it = o.find(key);
    if (it == o.end() || !it->is_number_unsigned()) return 0;
    return it->get<uint64_t>();
}

bool is_sha256_hex(const std::string& s) {
    if (s.size() != 64) return false;
    for (char c : s)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

}  // namespace

std::vector<ModelSummary> parse_search_response(std::string_view text) {
    const json j = parse_array(text, "model search");
    std::vector<ModelSummary> out;
    for (const json& e : j) {
        if (!e.is_object()) continue;
        const auto id = e.find("id");
        if (id == e.end() || !id->is_string()) continue;
        ModelSummary m;
        m.id = id->get<std::string>();
        m.downloads = count_field(e, "downloads");
        m.likes = count_field(e, "likes");
        if (const auto tags = e.find("tags"); tags != e.end() && tags->is_array())
            for (const json& t : *tags)
                if (t.is_string()) m.tags.push_back(t.get<std::string>());
        out.push_back(std::move(m));
    }
    return out;
}

std::vector<RemoteFile> parse_tree_response(std::string_view text) {
    const json j = parse_array(text, "file list");
    std::vector<RemoteFile> out;
    for (const json& e : j) {
        if (!e.is_object()) throw Error("file list: an entry is not a JSON object");
        const auto type = e.find("type");
        if (type != e.end() && type->is_string() && type->get<std::string>() != "file") continue;
        const auto path = e.find("path");
        if (path == e.end() || !path->is_string()) throw Error("file list: an entry has no path");
        RemoteFile f;
        f.path = path->get<std::string>();
        check_remote_path(f.path);
        const auto size = e.find("size");
        if (size == e.end() || !size->is_number_unsigned()) throw Error("file list: '" + f.path + "' has no size");
        f.size = size->get<uint64_t>();
        if (const auto lfs = e.find("lfs"); lfs != e.end() && lfs->is_object()) {
            const auto oid = lfs->find("oid");
            if (oid == lfs->end() || !oid->is_string() || !is_sha256_hex(oid->get<std::string>()))
                throw Error("file list: '" + f.path + "' has an LFS entry without a SHA-256 object id");
            f.sha256 = oid->get<std::string>();
            const auto lfs_size = lfs->find("size");
            if (lfs_size != lfs->end() && lfs_size->is_number_unsigned()) f.size = lfs_size->get<uint64_t>();
        }
        out.push_back(std::move(f));
    }
    return out;
}

}  // namespace ember::hub
