// libFuzzer target: load_snapshot on raw bytes (gzip input is inflated with a small limit), then the model's
// internal consistency.
#include <cstdint>
#include <span>

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = allocscope::load_snapshot(std::span<const uint8_t>(data, size), fuzz::small_options());
  if (!r.ok()) {
    // gzip errors name offsets in the compressed input, parse errors in the inflated one (at most max_inflated).
    fuzz::check_error(r.error(), allocscope::is_gzip({data, size}) ? (4u << 20) : size);
    return 0;
  }
  fuzz::check_model(r.value());
  return 0;
}
