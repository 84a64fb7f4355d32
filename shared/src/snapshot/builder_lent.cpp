// Reading the capture's lent windows ('allocscope_lent', lent_frames.h) from an untrusted file: whatever is not a
// window is counted and left out, and never stops the load (PyTorch's tools never read the key).
#include "snapshot/builder.h"

namespace allocscope::detail {

namespace {

// Windows a file may name: a job's backward() and collective calls, a ring of them kept by the capture. More is a
// crafted file, whose load must stay linear in what PyTorch's tools read.
constexpr size_t kMaxLentWindows = 1'000'000;

bool int_value(const Value& v, int64_t* out) {
  if (v.tag != Tag::kInt && v.tag != Tag::kUInt) return false;
  if (v.tag == Tag::kUInt && v.payload > static_cast<uint64_t>(INT64_MAX)) return false;
  *out = static_cast<int64_t>(v.payload);
  return true;
}

}  // namespace

void Builder::read_lent(const pickle::Reader& r, const Value& list, std::vector<LentWindow>* out) {
  if (list.tag != Tag::kList && list.tag != Tag::kTuple) {
    s_->warnings.push_back("'allocscope_lent' is a " + type_of(list) +
                           "; expected a list of windows: no Python line was lent to entries without one");
    return;
  }
  StringId start_key = 0, end_key = 0, kind_key = 0, stack_key = 0;
  // Keys that appear nowhere in the file are held by no dict (and not interned: the table is the file's).
  const bool keyed = s_->strings.find("start_us", &start_key) && s_->strings.find("end_us", &end_key) &&
                     s_->strings.find("stack", &stack_key);
  if (!s_->strings.find("kind", &kind_key)) kind_key = UINT32_MAX;
  uint64_t left_out = 0;
  std::vector<FrameId> frames;
  for (const Value& wv : r.items(list)) {
    if (out->size() >= kMaxLentWindows || !keyed || wv.tag != Tag::kDict) {
      ++left_out;
      continue;
    }
    LentWindow w;
    int seen = 0;
    bool bad = false;
    auto items = r.items(wv);
    for (size_t i = 0; i + 1 < items.size() && !bad; i += 2) {
      const Value& k = items[i];
      const Value& v = items[i + 1];
      if (k.tag != Tag::kStr) continue;  // unknown keys are a later writer's: ignored
      const StringId key = static_cast<StringId>(k.payload);
      if (key == start_key) {
        bad = !int_value(v, &w.start_us), seen |= 1;
      } else if (key == end_key) {
        bad = !int_value(v, &w.end_us), seen |= 2;
      } else if (key == kind_key) {
        if (v.tag == Tag::kStr) w.kind = static_cast<StringId>(v.payload);
      } else if (key == stack_key) {
        // Frames, innermost first: each item a frame dict the stream already made a frame of.
        if (v.tag != Tag::kList && v.tag != Tag::kTuple) {
          bad = true;
          break;
        }
        frames.clear();
        for (const Value& f : r.items(v)) {
          if (f.tag != Tag::kHandle || f.aux != kFrameHandle) {
            bad = true;
            break;
          }
          frames.push_back(static_cast<FrameId>(f.payload));
        }
        if (!bad) w.stack = s_->stacks.intern(frames), seen |= 4;
      }
    }
    if (bad || seen != 7 || w.stack == 0 || w.end_us < w.start_us) {
      ++left_out;
      continue;
    }
    out->push_back(w);
  }
  if (left_out)
    s_->warnings.push_back(std::to_string(left_out) +
                           " lent window(s) in 'allocscope_lent' were left out (not a dict with int start_us <= "
                           "end_us and a list of frames as stack, or past " +
                           std::to_string(kMaxLentWindows) + " windows)");
}

}  // namespace allocscope::detail
