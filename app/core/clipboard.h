// The system clipboard for QML (Qt Quick has no clipboard API of its own). Also lets the
// input box check a paste's size before inserting it, so a 1 MB paste is cut to the
// message limit instead of being laid out in full first.
#pragma once
#include <QObject>

namespace ember::app {

class Clipboard : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;
    Q_INVOKABLE void setText(const QString& text);
    Q_INVOKABLE QString text() const;
    Q_INVOKABLE int length() const;
};

}  // namespace ember::app
