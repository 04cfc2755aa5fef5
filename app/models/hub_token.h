// The Hugging Face access token the app keeps (typed on the model manager page), for gated
// repositories. Stored as one line in <data dir>/hf_token, mode 0600: written to a temporary
// file created 0600 and renamed over it, so it is never readable by others, not even for an
// instant. Precedence: this token when set, else HF_TOKEN from the environment (what the CLI
// uses). The token is never logged, never part of a message, and never shown back whole
// (hint(): its first 3 and last 4 characters); engine/hub sends it only to the hub endpoint's
// own origin, never along a redirect to another host (the storage CDN).
#pragma once
#include <QString>
#include <string>

#include "engine/hub/hub_client.h"

namespace ember::app {

class HubToken {
public:
    // Reads `file` when it exists (a missing or unreadable file: no token).
    explicit HubToken(QString file);

    bool stored() const { return !token_.empty(); }
    // Where the hub's token comes from now: "settings", "HF_TOKEN" or "" (anonymous).
    QString source() const;
    // "hf_…wxyz" of the token in use, "" without one.
    QString hint() const;
    // Stores `token` (surrounding blanks trimmed); an empty one deletes the file. Throws
    // ember::Error for a token with characters no HTTP header may carry, or when the file
    // cannot be written; the message never holds the token.
    void set(const QString& token);
    // HF_ENDPOINT / HF_TOKEN from the environment, with the stored token over HF_TOKEN.
    hub::HubConfig config() const;

private:
    QString file_;
    std::string token_;
};

}  // namespace ember::app
