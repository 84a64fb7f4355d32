// Plumbing (not a verb) of the PyTorch drop-in verbs: folded text on stdout or an SVG file via -o.
#include "verb_memviz_common.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "allocscope/flamegraph.h"
#include "allocscope/loader.h"

namespace allocscope::cli {

bool write_text_file(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int saved = errno;
  if (std::fclose(f) != 0 || !ok) {
    if (!ok) errno = saved;
    return false;
  }
  return true;
}

int emit_folded(const Args& args, const std::string& folded, const std::string& title) {
  const bool to_file = args.has("o") || args.has("output");
  const std::string out = args.has("o") ? args.get("o") : args.get("output");
  if (to_file && out.empty()) return fail("-o needs a file name");
  if (!to_file) {
    std::fwrite(folded.data(), 1, folded.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  flamegraph::Options options;
  options.title = title;
  if (!write_text_file(out, flamegraph::render_svg(folded, options)))
    return fail("cannot write " + out + ": " + std::strerror(errno));
  return 0;
}

}  // namespace allocscope::cli
