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

// Returns the HTML, or "" with *why on failure.
std::string build_report(const WebAssets& assets, const std::vector<EmbeddedSnapshot>& files, std::string* why);

// Exposed for tests: one module's import/export lines rewritten into the bundle's registry form.
std::string bundle_modules(const std::string& pages_dir, const std::string& entry, std::string* why);

}  // namespace allocscope::cli
