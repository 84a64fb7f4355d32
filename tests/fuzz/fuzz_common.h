// Shared by the fuzz targets: small limits (so the fuzzer's own memory stays bounded) and a model consistency check
// that turns an inconsistent Snapshot into a crash the fuzzer can report.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "allocscope/loader.h"

namespace fuzz {

inline allocscope::LoadOptions small_options() {
  allocscope::LoadOptions o;
  o.max_inflated_bytes = 4u << 20;
  o.limits.max_stack = 1u << 16;
  o.limits.max_marks = 1u << 10;
  o.limits.max_depth = 128;
  o.limits.max_memo = 1u << 16;
  o.limits.max_container_items = 1u << 20;
  return o;
}

[[noreturn]] inline void die(const char* what) {
  std::fprintf(stderr, "fuzz check failed: %s\n", what);
  std::abort();
}
#define FUZZ_CHECK(cond) \
  do {                   \
    if (!(cond)) ::fuzz::die(#cond); \
  } while (0)

inline size_t setting_bytes(const allocscope::Setting& st) {
  size_t n = sizeof st + st.key.capacity() + st.s.capacity() + st.children.capacity() * sizeof st;
  for (const auto& c : st.children) n += setting_bytes(c) - sizeof c;
  return n;
}

// Every index in the model must point inside its table (views and the writer index with them unchecked), and the
// model's size must stay a bounded multiple of the pickle's: anything superlinear (an object expanded at every
// memo reference) trips this long before it trips the fuzzer's RSS limit.
inline void check_model(const allocscope::Snapshot& s) {
  size_t model = s.memory_bytes();
  for (const auto& st : s.allocator_settings) model += setting_bytes(st);
  if (model > 512 * s.source_bytes + (1u << 20)) {
    std::fprintf(stderr, "model of %zu bytes from a %llu-byte pickle\n", model,
                 static_cast<unsigned long long>(s.source_bytes));
    die("model size is not linear in the input");
  }
  const auto& e = s.events;
  const size_t rows = e.size_rows();
  FUZZ_CHECK(e.addr.size() == rows && e.size.size() == rows && e.stream.size() == rows);
  FUZZ_CHECK(e.time_us.size() == rows && e.stack.size() == rows);
  FUZZ_CHECK(e.compile_context.size() == rows && e.user_metadata.size() == rows);
  for (const auto& d : s.devices) FUZZ_CHECK(d.begin <= d.end && d.end <= rows);
  for (size_t i = 0; i < rows; ++i) {
    FUZZ_CHECK(e.stack[i] < s.stacks.size());
    FUZZ_CHECK(e.compile_context[i] < s.strings.size() && e.user_metadata[i] < s.strings.size());
    FUZZ_CHECK(static_cast<int>(e.action[i]) < allocscope::kActionCount);
  }
  for (uint32_t st = 0; st < s.stacks.size(); ++st)
    for (auto f : s.stack(st)) FUZZ_CHECK(f < s.frames.size());
  for (const auto& f : s.frames) FUZZ_CHECK(f.name < s.strings.size() && f.filename < s.strings.size());
  for (const auto& seg : s.segments) {
    FUZZ_CHECK(uint64_t{seg.first_block} + seg.num_blocks <= s.blocks.size());
    FUZZ_CHECK(seg.stack < s.stacks.size() && seg.segment_type < s.strings.size());
  }
  for (const auto& b : s.blocks) FUZZ_CHECK(b.stack < s.stacks.size());
  for (const auto& a : s.annotations) FUZZ_CHECK(a.name < s.strings.size());
}

// Errors must say something and, when they name an offset, name one inside the input.
inline void check_error(const allocscope::Error& e, size_t input_size) {
  FUZZ_CHECK(!e.message.empty());
  FUZZ_CHECK(e.offset == allocscope::Error::kNoOffset || e.offset <= input_size);
}

}  // namespace fuzz
