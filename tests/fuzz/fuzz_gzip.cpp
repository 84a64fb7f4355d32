// libFuzzer target: gunzip with a small max_out (never more output than the limit, errors with offsets), then load
// what inflated.
#include <cstdint>
#include <span>

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint64_t kMaxOut = 1u << 20;
  auto g = allocscope::gunzip(std::span<const uint8_t>(data, size), kMaxOut);
  if (!g.ok()) {
    fuzz::check_error(g.error(), size);
    return 0;
  }
  FUZZ_CHECK(g->size() <= kMaxOut);
  auto r = allocscope::load_snapshot(g.value(), fuzz::small_options());
  if (!r.ok()) {
    fuzz::check_error(r.error(), g->size());
    return 0;
  }
  fuzz::check_model(r.value());
  return 0;
}
