// The capture's notes as load warnings (capture_notes.h). Notes are untrusted text: they are printed through the
// answers' own escaping, and only string values under 'notes' are read.
#include "snapshot/capture_notes.h"

#include <string>

namespace allocscope::detail {
namespace {

const Setting* notes_of(const Snapshot& s) {
  for (const Setting& cap : s.allocator_settings) {
    if (cap.key != "allocscope_capture" || cap.kind != Setting::Kind::kDict) continue;
    for (const Setting& c : cap.children)
      if (c.key == "notes" && c.kind == Setting::Kind::kDict) return &c;
  }
  return nullptr;
}

// A crafted file's note may be long: a warning line stays readable.
std::string clipped(const std::string& text) { return text.size() > 300 ? text.substr(0, 300) + "..." : text; }

void add(const Setting& notes, bool merged, Snapshot* s) {
  for (const Setting& n : notes.children) {
    if (n.kind != Setting::Kind::kStr) continue;
    if (n.key == "torch_recorder") {
      if (merged || n.s == "merged") continue;
      s->warnings.push_back(
          "no PyTorch tensors in this capture (PyTorch's own recorder: " + clipped(n.s) +
          "): it shows the memory PyTorch's caching allocator reserved, not the tensors in it, so there are no "
          "tensor sizes, categories or PyTorch stacks, and `leaks` judges the pool's growth; `allocscope record` "
          "with its python/ folder beside it merges PyTorch's snapshot in");
      continue;
    }
    s->warnings.push_back("the capture says: " + clipped(n.key) + ": " + clipped(n.s));
  }
}

}  // namespace

void note_capture_notes(Snapshot* s) {
  if (const Setting* n = notes_of(*s)) add(*n, false, s);
  if (s->outside)
    if (const Setting* n = notes_of(*s->outside)) add(*n, true, s);
}

}  // namespace allocscope::detail
