// Test helper for test_storage's crash-safety case: writes a conversation, then streams an
// answer into it forever (saving through StreamSaver as the app does) until it is killed.
// Prints "sent N" once the user turns are written and "saved LEN" after each save, so the
// test knows what must be on disk.
#include <QCoreApplication>
#include <cstdio>

#include "app/storage/store_open.h"
#include "app/storage/stream_saver.h"

using namespace ember::app;

int main(int argc, char** argv) {
    QCoreApplication app(argc, argv);
    if (argc != 2) {
        std::fprintf(stderr, "usage: ember_crash_writer DATA_DIR\n");
        return 2;
    }
    OpenedStore opened = open_conversation_store(QString::fromLocal8Bit(argv[1]));
    ConversationStore& store = *opened.store;
    const Conversation c = store.create_conversation(QStringLiteral("crash test"), QStringLiteral("Be brief."));
    for (int i = 0; i < 3; ++i) {
        store.add_message(c.id, QStringLiteral("user"), QStringLiteral("question %1").arg(i));
        if (i < 2) store.add_message(c.id, QStringLiteral("assistant"), QStringLiteral("answer %1").arg(i));
    }
    std::printf("sent %lld\n", static_cast<long long>(c.id));
    std::fflush(stdout);
    const Message answer = store.add_message(c.id, QStringLiteral("assistant"), {}, MessageState::Streaming);
    // No pause between tokens: the process is always in or near a write when killed.
    StreamSaver saver(store, answer.id, 500, 8);
    for (int i = 0;; ++i) {
        if (saver.append(QStringLiteral("token%1 ").arg(i), 1)) {
            std::printf("saved %lld\n", static_cast<long long>(saver.content().size()));
            std::fflush(stdout);
        }
    }
}
