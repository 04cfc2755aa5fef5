#include "app/core/clipboard.h"

#include <QClipboard>
#include <QGuiApplication>

namespace ember::app {

void Clipboard::setText(const QString& text) { QGuiApplication::clipboard()->setText(text); }
QString Clipboard::text() const { return QGuiApplication::clipboard()->text(); }
int Clipboard::length() const { return static_cast<int>(QGuiApplication::clipboard()->text().size()); }

}  // namespace ember::app
