// The remote endpoint's URL rules (remote_config.h).
#include "engine/remote/remote_config.h"

#include "kernels/common/error.h"

namespace ember::remote {

std::string api_base(const std::string& base_url) {
    std::string u = base_url;
    if (u.rfind("http://", 0) != 0 && u.rfind("https://", 0) != 0)
        throw Error("the remote URL '" + printable_url(base_url) +
                    "' must start with http:// or https:// (for example http://gpu-box:8000/v1)");
    if (u.find_first_of(" \t\r\n") != std::string::npos)
        throw Error("the remote URL '" + printable_url(base_url) + "' contains white space");
    while (!u.empty() && u.back() == '/') u.pop_back();
    if (u.size() < 3 || u.compare(u.size() - 3, 3, "/v1") != 0) u += "/v1";
    return u;
}

std::string printable_url(const std::string& url) {
    std::string u = url.substr(0, url.find('?'));
    const size_t scheme = u.find("://");
    const size_t host = scheme == std::string::npos ? 0 : scheme + 3;
    const size_t at = u.find('@', host);
    if (at != std::string::npos && at < u.find('/', host)) u.erase(host, at + 1 - host);
    return u;
}

}  // namespace ember::remote
