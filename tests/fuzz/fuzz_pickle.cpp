// libFuzzer target: the pickle machine alone (no consumer), then every accessor over whatever root it built.
#include <cstdint>
#include <span>

#include "allocscope/pickle.h"
#include "fuzz_common.h"

namespace {
// Walks the tree the reader built (bounded: depth and item budget), using items/find/str/repr like the loader does.
void walk(const allocscope::pickle::Reader& r, const allocscope::pickle::Value& v, int depth, size_t* budget) {
  if (depth > 32 || *budget == 0) return;
  --*budget;
  if (v.tag == allocscope::pickle::Tag::kStr) (void)r.str(v).size();
  if (!v.is_container()) return;
  (void)r.offset_of(v);
  auto items = r.items(v);
  if (v.tag == allocscope::pickle::Tag::kDict && items.size() >= 2 && items[0].tag == allocscope::pickle::Tag::kStr)
    (void)r.find(v, static_cast<allocscope::StringId>(items[0].payload));
  for (const auto& c : items) walk(r, c, depth + 1, budget);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  allocscope::StringTable strings;
  allocscope::pickle::Reader reader(&strings, fuzz::small_options().limits);
  auto root = reader.run(std::span<const uint8_t>(data, size));
  if (!root.ok()) {
    fuzz::check_error(root.error(), size);
    return 0;
  }
  size_t budget = 100000;
  walk(reader, root.value(), 0, &budget);
  (void)allocscope::pickle::repr(reader, root.value());
  return 0;
}
