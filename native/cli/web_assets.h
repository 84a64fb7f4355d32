// Where the viewer's files are (web/ pages and the wasm build) for `allocscope view` and `allocscope plot`.
#pragma once

#include <optional>
#include <string>

namespace allocscope::cli {

struct WebAssets {
  std::string pages;  // folder with index.html, app.js, views/ ... (web/ or an assembled site/)
  std::string wasm;   // folder with allocscope.js + allocscope.wasm
  std::string examples;  // folder with the example snapshot ("" when none)
};

// `web_root` (from --web-root; may be empty) is a folder with index.html: an assembled site (build/wasm/site) or
// web/ itself. Without it: the assembled sites of the source tree's wasm builds, then its web/ folder. The wasm
// files are looked for beside the pages, then in the source tree's wasm builds. On failure `*why` says what to do.
std::optional<WebAssets> find_web_assets(const std::string& web_root, std::string* why);

// Whole file, or nullopt.
std::optional<std::string> slurp(const std::string& path);

// Content-Type for a file name.
const char* mime_type(const std::string& path);

// The Content-Security-Policy the viewer declares in its <meta> tag, also sent as a header (workers take theirs from
// the response, not the page).
extern const char* const kViewerCsp;

}  // namespace allocscope::cli
