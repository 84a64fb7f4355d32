// The self-contained report of `allocscope plot`: the viewer's ES modules inlined into one module script, the
// worker and wasm embedded (base64), the snapshots embedded, and a CSP that allows only those inline scripts (by
// hash) and no network at all.
#pragma once

#include <string>
#include <vector>

#include "web_assets.h"

namespace allocscope::cli {

struct EmbeddedSnapshot {
  std::string name;   // shown in the viewer
  std::string bytes;  // as the viewer reads them (gzip is fine: the worker inflates it)
};

// A snapshot file as the report embeds it: gzipped (snapshots compress ~10x; the page inflates them with
// DecompressionStream), named by its file name. False with *why when it cannot be read.
bool embed_snapshot_file(const std::string& path, EmbeddedSnapshot* out, std::string* why);

// A window of the files (`plot --from A --to B`, Python's load(from_step=, to_step=)): the page loads only it, as
// the served page's ?from=&to=. Both empty: whole files.
struct ReportWindow {
  std::string from, to;
};

// Returns the HTML, or "" with *why on failure (a window that does not parse, as parse_trace_window says).
std::string build_report(const WebAssets& assets, const std::vector<EmbeddedSnapshot>& files, std::string* why,
                         const ReportWindow& window = {});

// Exposed for tests: one module's import/export lines rewritten into the bundle's registry form.
std::string bundle_modules(const std::string& pages_dir, const std::string& entry, std::string* why);

}  // namespace allocscope::cli
