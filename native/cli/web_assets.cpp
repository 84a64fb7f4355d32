// Locating the viewer's pages and wasm build for the `view` and `plot` verbs.
#include "web_assets.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

namespace allocscope::cli {

const char* const kViewerCsp =
    "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self' blob:; connect-src 'self'; "
    "img-src 'self' data: blob:; style-src 'self'; font-src 'none'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-src 'none'";

static bool is_file(const std::string& p) {
  struct stat st{};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::optional<std::string> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const char* mime_type(const std::string& path) {
  auto ends = [&](const char* s) {
    const std::string suffix(s);
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js") || ends(".mjs")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".wasm")) return "application/wasm";
  if (ends(".json")) return "application/json";
  if (ends(".svg")) return "image/svg+xml";
  if (ends(".png")) return "image/png";
  if (ends(".md") || ends(".txt")) return "text/plain; charset=utf-8";
  return "application/octet-stream";
}

// The folder of this program (for an installed layout: PREFIX/bin), or "".
static std::string self_dir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  const std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

std::optional<WebAssets> find_web_assets(const std::string& web_root, std::string* why) {
  const std::string src = ALLOCSCOPE_SOURCE_DIR;
  const std::vector<std::string> builds = {src + "/build/wasm", src + "/build/wasm-web"};
  std::vector<std::string> pages_candidates;
  if (!web_root.empty()) {
    pages_candidates.push_back(web_root);
  } else {
    // Installed (cmake --install, or the Python package's copy of a prefix): PREFIX/share/allocscope/site.
    if (const std::string dir = self_dir(); !dir.empty()) pages_candidates.push_back(dir + "/../share/allocscope/site");
    for (const auto& b : builds) pages_candidates.push_back(b + "/site");
    pages_candidates.push_back(src + "/web");
  }
  for (const auto& pages : pages_candidates) {
    if (!is_file(pages + "/index.html")) continue;
    WebAssets a;
    a.pages = pages;
    if (is_file(pages + "/allocscope.wasm") && is_file(pages + "/allocscope.js")) {
      a.wasm = pages;
    } else {
      for (const auto& b : builds)
        if (is_file(b + "/wasm/allocscope.wasm") && is_file(b + "/wasm/allocscope.js")) {
          a.wasm = b + "/wasm";
          break;
        }
    }
    if (a.wasm.empty()) {
      *why = "found the viewer's pages in " + pages +
             " but no WebAssembly build (allocscope.js + allocscope.wasm); build it with "
             "`cmake --preset wasm && cmake --build --preset wasm`, or pass --web-root build/wasm/site";
      return std::nullopt;
    }
    if (is_file(pages + "/examples/resnet50_train.pickle")) a.examples = pages + "/examples";
    else if (is_file(src + "/tests/fixtures/resnet50_train.pickle")) a.examples = src + "/tests/fixtures";
    return a;
  }
  *why = web_root.empty() ? "cannot find the viewer (web/index.html) under " + src + "; pass --web-root DIR"
                          : "--web-root " + web_root + " has no index.html";
  return std::nullopt;
}

}  // namespace allocscope::cli
