// A chat whose history grows by whole exchanges, for the context overflow tests
// (test_scheduler, test_context_roll): a system prompt, `exchanges` user/assistant pairs that
// differ only in their number, and a new question.
#pragma once
#include <string>
#include <vector>

#include "engine/template/chat_template.h"

namespace ember::test {

inline std::vector<ChatMessage> long_chat(int exchanges) {
    std::vector<ChatMessage> m{{"system", "You are a helpful assistant who answers in one short sentence."}};
    for (int i = 0; i < exchanges; ++i) {
        m.push_back({"user", "Tell me something about the number " + std::to_string(i) + ", please."});
        m.push_back({"assistant", "The number " + std::to_string(i) + " is a fine number to think about."});
    }
    m.push_back({"user", "Which number did we talk about last?"});
    return m;
}

}  // namespace ember::test
