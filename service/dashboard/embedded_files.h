// The dashboard page's files, embedded in the server binary at build time
// (cmake/embed_files.cmake): every index.html, *.js and *.css of web/
// (node_modules and tests excluded) and uPlot's uPlot.iife.min.js and
// uPlot.min.css from web/node_modules/uplot/dist/.

#ifndef DEBUGPLANE_SERVICE_DASHBOARD_EMBEDDED_FILES_H_
#define DEBUGPLANE_SERVICE_DASHBOARD_EMBEDDED_FILES_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace debugplane::service::dashboard {

struct EmbeddedFile {
  absl::string_view path;     // Relative to /dashboard/, e.g. "index.html", "uPlot.min.css".
  absl::string_view content;  // The file's bytes.
  absl::string_view sha256;   // Hex digest of the content (its ETag).
};

// Every embedded file. Static storage; thread-safe.
absl::Span<const EmbeddedFile> EmbeddedDashboardFiles();

}  // namespace debugplane::service::dashboard

#endif  // DEBUGPLANE_SERVICE_DASHBOARD_EMBEDDED_FILES_H_
