// Byte counts typed by people: "24GiB", "24G", "512MiB", "1.5 TB", "8000000000". Used for
// the fit planner's budgets (`ember fit --vram 24GiB --ram 32GiB`, the app's settings).
#pragma once
#include <cstdint>
#include <string_view>

namespace ember::fit {

// A number (integer or decimal) and an optional unit, case-insensitive, spaces allowed
// between: B; K, KB, KiB; M, MB, MiB; G, GB, GiB; T, TB, TiB. Like the tools this replaces
// (llama.cpp, Ollama, `free -g`), K/M/G/T and their -B and -iB spellings all mean powers of
// 1024: a card sold as "24 GB" has 24 GiB. Throws ember::Error naming `what` (the option)
// and the text for anything else (empty, negative, unknown unit, more than 2^64 bytes).
uint64_t parse_byte_size(std::string_view text, std::string_view what);

}  // namespace ember::fit
