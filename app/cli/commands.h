// The `ember` CLI's subcommands. Each takes argv from its own first argument on and returns
// the process exit code; errors are thrown as ember::Error and reported by main().
#pragma once

namespace ember::cli {

int cmd_info(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_synth(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);

// Model library and hub (built where SQLite and libcurl are: EMBER_HAVE_HUB).
int cmd_pull(int argc, char** argv);
int cmd_ls(int argc, char** argv);
int cmd_rm(int argc, char** argv);
int cmd_fit(int argc, char** argv);

// The OpenAI-compatible server and its status (built where cpp-httplib is: EMBER_HAVE_SERVER).
int cmd_serve(int argc, char** argv);
int cmd_ps(int argc, char** argv);

// Remote engines (built where libcurl and nlohmann-json are: EMBER_HAVE_REMOTE): ls, run and
// chat hand their arguments to these when they hold --remote (cmd_remote.cpp).
bool wants_remote(int argc, char** argv);
int cmd_ls_remote(int argc, char** argv);
int cmd_run_remote(int argc, char** argv);
int cmd_chat_remote(int argc, char** argv);

}  // namespace ember::cli
