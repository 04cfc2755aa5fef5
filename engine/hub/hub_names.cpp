// Checks of remote names, and what GGUF file names say about their contents.
#include "engine/hub/hub_names.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>

#include "engine/gguf/gguf_split.h"
#include "kernels/common/error.h"
#include "kernels/common/format.h"

namespace ember::hub {
namespace {

bool plain_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }

// Shows a hostile name safely in a message: control bytes and NUL become '?'.
std::string printable(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 200)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
    return out;
}

void check_component(std::string_view part, std::string_view whole, const char* what) {
    if (part.empty() || part == "." || part == "..")
        throw Error(std::string(what) + " '" + printable(whole) + "' has an empty, '.' or '..' component");
    if (!std::all_of(part.begin(), part.end(), plain_char))
        throw Error(std::string(what) + " '" + printable(whole) +
                    "' may hold only letters, digits, '-', '_' and '.' (and '/' between owner and name)");
    if (part.front() == '.') throw Error(std::string(what) + " '" + printable(whole) + "' may not start with '.'");
}

std::string upper(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

std::string base_name(std::string_view path) {
    const size_t slash = path.rfind('/');
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

bool ends_with_gguf(std::string_view p) { return p.size() > 5 && upper(p.substr(p.size() - 5)) == ".GGUF"; }

// The quantization labels llama.cpp's tools write into file names (upper case).
bool is_quant_label(std::string_view t) {
    static const char* const kExact[] = {"MXFP4", "BF16", "FP16", "F16", "FP32", "F32", "TQ1_0", "TQ2_0"};
    for (const char* e : kExact)
        if (t == e) return true;
    auto digit_in = [](char c, char lo, char hi) { return c >= lo && c <= hi; };
    if (t.size() >= 5 && t.substr(0, 2) == "IQ" && digit_in(t[2], '1', '4') && t[3] == '_') {
        const std::string_view kind = t.substr(4);
        return kind == "XXS" || kind == "XS" || kind == "NL" || kind == "S" || kind == "M";
    }
    if (t.size() < 4 || t[0] != 'Q' || t[2] != '_') return false;
    if (t.size() == 4)
        return (t[3] == '0' || t[3] == '1') ? digit_in(t[1], '4', '8') : t[3] == 'K' && digit_in(t[1], '2', '8');
    if (t[3] != 'K' || t[4] != '_' || !digit_in(t[1], '2', '6')) return false;
    const std::string_view size = t.substr(5);
    return size == "XL" || size == "S" || size == "M" || size == "L";
}

}  // namespace

void check_repo_id(std::string_view repo) {
    if (repo.empty() || repo.size() > 200) throw Error("repository name must be 1 to 200 characters");
    const size_t slash = repo.find('/');
    if (slash == std::string_view::npos) return check_component(repo, repo, "repository");
    if (repo.find('/', slash + 1) != std::string_view::npos)
        throw Error("repository '" + printable(repo) + "' must be OWNER/NAME (one '/')");
    check_component(repo.substr(0, slash), repo, "repository");
    check_component(repo.substr(slash + 1), repo, "repository");
}

void check_revision(std::string_view revision) {
    if (revision.empty() || revision.size() > 200) throw Error("revision must be 1 to 200 characters");
    check_component(revision, revision, "revision");
}

void check_remote_path(std::string_view path) {
    if (path.empty() || path.size() > 1000) throw Error("file name must be 1 to 1000 characters");
    if (path.find('\0') != std::string_view::npos)
        throw Error("file name '" + printable(path) + "' contains a NUL byte");
    if (path.front() == '/') throw Error("file name '" + printable(path) + "' is an absolute path");
    for (char c : path)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\')
            throw Error("file name '" + printable(path) + "' contains a control character or a backslash");
    size_t start = 0;
    for (;;) {
        const size_t slash = path.find('/', start);
        const std::string_view part = path.substr(start, slash - start);
        if (part.empty() || part == "." || part == "..")
            throw Error("file name '" + printable(path) + "' has an empty, '.' or '..' component");
        if (slash == std::string_view::npos) break;
        start = slash + 1;
    }
}

std::string quant_of(std::string_view file_name) {
    std::string name = base_name(file_name);
    if (auto split = split_name_of(name)) name = split->stem;
    else if (ends_with_gguf(name)) name.resize(name.size() - 5);
    // A label stands between separators ('-' or '.'; '_' may precede it too). The last one
    // wins: "Q8_0-F16"-style names list the weights last.
    std::string found;
    size_t start = 0;
    while (start <= name.size()) {
        size_t end = name.find_first_of("-.", start);
        if (end == std::string::npos) end = name.size();
        const std::string token = upper(std::string_view(name).substr(start, end - start));
        for (size_t at = 0; at < token.size(); at = token.find('_', at) + 1) {
            if (is_quant_label(std::string_view(token).substr(at))) {
                found = token.substr(at);
                break;
            }
            if (token.find('_', at) == std::string::npos) break;
        }
        start = end + 1;
    }
    if (found == "FP16") return "F16";
    if (found == "FP32") return "F32";
    return found;
}

uint64_t ModelChoice::total_bytes() const {
    uint64_t n = 0;
    for (const auto& f : files) n += f.size;
    return n;
}

std::vector<ModelChoice> gguf_choices(const std::vector<RemoteFile>& files) {
    // Group by the name without the split suffix; keep a group only when every part is there.
    std::map<std::string, std::map<uint32_t, RemoteFile>> groups;
    std::map<std::string, uint32_t> counts;
    for (const auto& f : files) {
        if (!ends_with_gguf(f.path) || upper(base_name(f.path)).rfind("MMPROJ", 0) == 0) continue;
        if (auto split = split_name_of(f.path)) {
            const std::string key = split->stem + "#" + std::to_string(split->count);
            groups[key][split->index] = f;
            counts[key] = split->count;
        } else {
            groups[f.path][1] = f;
            counts[f.path] = 1;
        }
    }
    std::vector<ModelChoice> out;
    for (auto& [key, parts] : groups) {
        if (parts.size() != counts[key]) continue;  // a part is missing: not downloadable as a model
        ModelChoice c;
        c.quant = quant_of(parts.begin()->second.path);
        for (auto& [index, f] : parts) c.files.push_back(f);
        out.push_back(std::move(c));
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const ModelChoice& a, const ModelChoice& b) { return a.quant < b.quant; });
    return out;
}

std::string describe_choices(const std::vector<ModelChoice>& choices) {
    std::string s;
    for (const auto& c : choices) {
        if (!s.empty()) s += ", ";
        s += (c.quant.empty() ? base_name(c.files.front().path) : c.quant) + " (" + format_bytes(c.total_bytes());
        if (c.files.size() > 1) s += " in " + std::to_string(c.files.size()) + " parts";
        s += ")";
    }
    return s;
}

namespace {

// The model whose (first) file is `file`, by its path in the repository or its bare name. A
// file whose name carries no quantization is then named by the file ("model.gguf").
ModelChoice choose_file(const std::vector<ModelChoice>& all, std::string_view repo, std::string_view file) {
    std::vector<ModelChoice> match;
    for (const auto& c : all) {
        const std::string& path = c.files.front().path;
        if (path == file || base_name(path) == file) match.push_back(c);
    }
    if (match.empty())
        throw Error("repository '" + std::string(repo) + "' has no model file " + std::string(file) +
                    "; available: " + describe_choices(all));
    if (match.size() > 1) {
        std::string names;
        for (const auto& c : match) names += (names.empty() ? "" : ", ") + c.files.front().path;
        throw Error("repository '" + std::string(repo) + "' has several files named " + std::string(file) + ": " +
                    names + "; name one by its path");
    }
    if (match.front().quant.empty()) match.front().quant = std::string(file);
    return match.front();
}

}  // namespace

ModelChoice choose_quant(const std::vector<RemoteFile>& files, std::string_view repo, std::string_view quant) {
    const std::vector<ModelChoice> all = gguf_choices(files);
    if (all.empty()) throw Error("repository '" + std::string(repo) + "' has no complete GGUF model");
    if (ends_with_gguf(quant)) return choose_file(all, repo, quant);
    std::vector<ModelChoice> match;
    for (const auto& c : all)
        if (!c.quant.empty() && c.quant == upper(quant)) match.push_back(c);
    if (match.empty())
        throw Error("repository '" + std::string(repo) + "' has no " + upper(quant) +
                    " model; available: " + describe_choices(all));
    if (match.size() > 1) {
        std::string names;
        for (const auto& c : match) names += (names.empty() ? "" : ", ") + c.files.front().path;
        throw Error("repository '" + std::string(repo) + "' has several " + upper(quant) + " models: " + names);
    }
    return match.front();
}

std::optional<ContentRange> parse_content_range(std::string_view v) {
    auto number = [&](uint64_t& out) {
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
        if (ec != std::errc() || end == v.data()) return false;
        v.remove_prefix(static_cast<size_t>(end - v.data()));
        return true;
    };
    auto eat = [&](std::string_view s) {
        if (v.substr(0, s.size()) != s) return false;
        v.remove_prefix(s.size());
        return true;
    };
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\r' || v.back() == '\n')) v.remove_suffix(1);
    ContentRange r;
    if (!eat("bytes ") || !number(r.first) || !eat("-") || !number(r.last) || !eat("/")) return std::nullopt;
    if (eat("*")) r.total = 0;
    else if (!number(r.total) || r.last >= r.total) return std::nullopt;
    if (!v.empty() || r.last < r.first) return std::nullopt;
    return r;
}

}  // namespace ember::hub
