#include "app/desktop/open_model_file.h"

#include <QFileInfo>
#include <QUrl>
#include <spdlog/spdlog.h>

#include "app/desktop/app_context.h"

namespace ember::app {

namespace {

// A file manager may pass a file:// URL (an Exec line with %U); everything else is a path.
QString absolute_path(const QString& arg, const QDir& cwd) {
    QString path = arg;
    if (arg.startsWith(QStringLiteral("file://"))) path = QUrl(arg).toLocalFile();
    return QDir::cleanPath(cwd.absoluteFilePath(path));
}

}  // namespace

void LaunchOptions::add_to(QCommandLineParser& parser) const {
    parser.addOptions({model, default_model, quit_after});
    parser.addPositionalArgument(QStringLiteral("file"), QStringLiteral("A GGUF model file to open."),
                                 QStringLiteral("[FILE.gguf]"));
}

LaunchRequest read_launch_request(const QCommandLineParser& parser, const LaunchOptions& options, const QDir& cwd) {
    LaunchRequest r;
    r.default_model = parser.isSet(options.default_model);
    if (parser.isSet(options.model)) r.model_file = absolute_path(parser.value(options.model), cwd);
    const QStringList files = parser.positionalArguments();
    if (!files.isEmpty()) r.model_file = absolute_path(files.last(), cwd);
    return r;
}

QStringList handover_arguments(const LaunchRequest& request) {
    if (!request.model_file.isEmpty()) return {QStringLiteral("--model"), request.model_file};
    if (request.default_model) return {QStringLiteral("--default-model")};
    return {};
}

void open_model_file(AppContext& ctx, const QString& path) {
    spdlog::info("Opening the model file {}", path.toStdString());
    // Into the model library too (referenced in place, checked on a worker thread), so it is
    // listed on the Models page next time; the load does not wait for that.
    ctx.library.importFile(path);
    ctx.models.load(path);
}

bool open_launch_request(AppContext& ctx, const LaunchRequest& request) {
    if (!request.model_file.isEmpty()) open_model_file(ctx, request.model_file);
    else if (request.default_model) ctx.models.loadBuiltin();
    else return false;
    return true;
}

}  // namespace ember::app
