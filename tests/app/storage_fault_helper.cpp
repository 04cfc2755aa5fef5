// Test helper for test_storage_faults: another process holding the conversation database's
// write lock. `storage_fault_helper lock DB_PATH MS` takes BEGIN EXCLUSIVE, prints
// "locked", holds it MS milliseconds, commits and exits.
#include <QCoreApplication>
#include <QThread>
#include <cstdio>
#include <cstring>

#include "app/storage/sqlite.h"

using namespace ember::app;

int main(int argc, char** argv) {
    QCoreApplication app(argc, argv);
    if (argc != 4 || std::strcmp(argv[1], "lock") != 0) {
        std::fprintf(stderr, "usage: storage_fault_helper lock DB_PATH MS\n");
        return 2;
    }
    Db db = Db::open(QString::fromLocal8Bit(argv[2]));
    db.exec("BEGIN EXCLUSIVE");
    std::printf("locked\n");
    std::fflush(stdout);
    QThread::msleep(static_cast<unsigned long>(std::atol(argv[3])));
    db.exec("COMMIT");
    return 0;
}
