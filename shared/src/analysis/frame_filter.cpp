// Frame classification for the answers (sites, flame trees, categories): memviz's filter plus a library test.
#include "allocscope/frame_filter.h"

#include "allocscope/memviz.h"

namespace allocscope {

namespace {

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }
bool ends_with(std::string_view s, std::string_view what) {
  return s.size() >= what.size() && s.substr(s.size() - what.size()) == what;
}

}  // namespace

bool is_library_frame(std::string_view name, std::string_view filename) {
  (void)name;
  if (filename.empty() || filename == "??") return true;  // C++ frames without debug info
  if (filename.front() == '<') return true;                // <frozen runpy>, <string>, <stdin>
  // Installed packages and the interpreter's own library say "how", not "who": the user's line that called into
  // them is the answer people need.
  static constexpr std::string_view kLibraryDirs[] = {
      "/site-packages/", "/dist-packages/", "/torch/", "/lib/python", "/lib64/python", "/usr/lib/",
  };
  for (std::string_view d : kLibraryDirs)
    if (contains(filename, d)) return true;
  // C/C++/CUDA sources are framework internals when stacks='all' is recorded.
  static constexpr std::string_view kNativeExt[] = {".cpp", ".cc", ".c", ".h", ".hpp", ".cu", ".cuh"};
  for (std::string_view e : kNativeExt)
    if (ends_with(filename, e)) return true;
  return false;
}

FrameFilter::FrameFilter(const Snapshot& s) {
  const size_t nf = s.frames.size();
  visible_.resize(nf);
  user_.resize(nf);
  for (size_t i = 0; i < nf; ++i) {
    const Frame& f = s.frames[i];
    const std::string_view name = s.str(f.name), file = s.str(f.filename);
    visible_[i] = memviz::frame_filter(name, file) ? 1 : 0;
    user_[i] = visible_[i] && !is_library_frame(name, file) ? 1 : 0;
  }
  const uint32_t ns = s.stacks.size();
  site_.assign(ns, kNoFrame);
  site_user_.assign(ns, 0);
  for (uint32_t id = 0; id < ns; ++id) {
    FrameId first_visible = kNoFrame, engine = kNoFrame;
    for (FrameId f : s.stack(id)) {  // innermost first
      if (f >= nf) continue;          // malformed ids are skipped, never trusted
      if (user_[f]) {
        site_[id] = f;
        site_user_[id] = 1;
        break;
      }
      if (!visible_[f]) continue;
      const std::string_view name = s.str(s.frames[f].name);
      // Without user code, the operator is the best site, not the allocator's own frames.
      if (first_visible == kNoFrame && !contains(name, "Allocator") && name.rfind("c10::", 0) != 0 &&
          !contains(name, "at::detail::") && !contains(name, "empty"))
        first_visible = f;
      // The backward pass runs on the autograd engine's threads: one site for all of it reads better than one
      // per ATen operator.
      if (contains(name, "autograd::Engine::thread_main")) engine = f;
    }
    if (!site_user_[id]) site_[id] = engine != kNoFrame ? engine : first_visible;
  }
}

std::string FrameFilter::format(const Snapshot& s, FrameId f, bool full_filename) {
  if (f >= s.frames.size()) return "<no frames>";
  return memviz::frame_fmt(s, s.frames[f], full_filename);
}

}  // namespace allocscope
