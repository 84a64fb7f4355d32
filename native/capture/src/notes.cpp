// The capture's notes (notes.h): the bootstrap's, then what the environment says of PyTorch's recorder.
#include "notes.h"

#include <cstdlib>
#include <cstring>

namespace allocscope::capture {
namespace {

Setting str_setting(std::string key, std::string value) {
  Setting st;
  st.key = std::move(key);
  st.kind = Setting::Kind::kStr;
  st.s = std::move(value);
  return st;
}

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

// Whether the module map lists PyTorch's CUDA library: the job imported torch with CUDA.
bool loaded_pytorch(const Setting& capture) {
  for (const Setting& c : capture.children)
    if (c.key == "modules")
      for (const Setting& m : c.children)
        if (m.s.find("libc10_cuda.so") != std::string::npos || m.s.find("libtorch_cuda.so") != std::string::npos)
          return true;
  return false;
}

std::string why_no_pytorch_part() {
  if (env_is("ALLOCSCOPE_TORCH_RECORDER", "0")) return "off: ALLOCSCOPE_TORCH_RECORDER=0 was set";
  if (const char* off = std::getenv("ALLOCSCOPE_TORCH_OFF"); off && *off) return std::string("off: ") + off;
  if (env_is("ALLOCSCOPE_TORCH", "1"))
    return "on, but not in this file: a dump of the capture's own (PyTorch's snapshot is merged in at exit and on "
           "out-of-memory)";
  return "off: no Python bootstrap ran (the capture was not started by `allocscope record`)";
}

}  // namespace

void add_notes(Snapshot* snapshot, const Notes& notes, bool merged) {
  for (Setting& cap : snapshot->allocator_settings) {
    if (cap.key != "allocscope_capture" || cap.kind != Setting::Kind::kDict) continue;
    Setting out;
    out.key = "notes";
    out.kind = Setting::Kind::kDict;
    bool torch_said = false;
    for (const auto& [k, v] : notes) {
      torch_said |= k == "torch_recorder";
      out.children.push_back(str_setting(k, v));
    }
    if (merged) {
      // The bootstrap's own word ("on ...") is moot once PyTorch's snapshot is this file's main part.
      std::erase_if(out.children, [](const Setting& c) { return c.key == "torch_recorder"; });
      out.children.push_back(str_setting("torch_recorder", "merged"));
    } else if (!torch_said && loaded_pytorch(cap)) {
      out.children.push_back(str_setting("torch_recorder", why_no_pytorch_part()));
    }
    if (!out.children.empty()) cap.children.push_back(std::move(out));
    return;
  }
}

}  // namespace allocscope::capture
