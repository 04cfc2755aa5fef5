// `ember tokenize MODEL [--ids] (TEXT | --file F)` — lands with the tokenizer.
#include "app/cli/commands.h"
#include "engine/core/error.h"

namespace ember::cli {
int cmd_tokenize(int, char**) { throw Error("tokenize: not built yet"); }
}  // namespace ember::cli
