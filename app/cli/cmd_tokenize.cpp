// `ember tokenize MODEL [--ids] [--add-special] [--parse-special] (TEXT | --file F)`
// Prints the token ids on one line (space-separated), or with --pieces one token per line.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "kernels/common/error.h"
#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"

namespace ember::cli {

int cmd_tokenize(int argc, char** argv) {
    Args args(argc, argv, 0, {"--file"}, {"--ids", "--add-special", "--parse-special", "--pieces"});
    const auto& pos = args.positional();
    const auto file = args.get("--file");
    if (pos.empty() || pos.size() != (file ? 1u : 2u))
        throw Error(
            "usage: ember tokenize MODEL [--ids] [--add-special] [--parse-special] [--pieces] (TEXT | --file F)");
    std::string text;
    if (file) {
        std::ifstream in(*file, std::ios::binary);
        if (!in) throw Error(*file + ": cannot open");
        std::ostringstream ss;
        ss << in.rdbuf();
        text = ss.str();
    } else {
        text = pos[1];
    }
    const GgufFile f = GgufFile::open(pos[0]);
    const auto tok = Tokenizer::from_gguf(f);
    const auto ids = tok->encode(text, args.flag("--add-special"), args.flag("--parse-special"));
    if (args.flag("--pieces")) {
        for (int32_t id : ids) std::printf("%6d  '%s'\n", id, tok->token_to_piece(id).c_str());
        return 0;
    }
    // --ids is the default output; the flag exists so scripts can say what they expect.
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
        if (i) line += ' ';
        line += std::to_string(ids[i]);
    }
    std::printf("%s\n", line.c_str());
    return 0;
}

}  // namespace ember::cli
