// libFuzzer target: load_snapshot on raw bytes (gzip input is inflated with a small limit), then the model's
// internal consistency.
#include <cstdint>
#include <span>

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  allocscope::LoadOptions options = fuzz::small_options();
  // Half the inputs load a window of their traces (snapshot/trace_window.h), placed by the input's last bytes: the
  // rows it holds back and moves must leave a model as consistent as a whole load's.
  if (size >= 4 && (data[size - 1] & 1)) {
    options.window.unit = (data[size - 1] & 2) ? allocscope::TraceWindow::Unit::kTimeUs : allocscope::TraceWindow::Unit::kStep;
    options.window.from = data[size - 2];
    options.window.to = (data[size - 1] & 4) ? INT64_MAX : options.window.from + data[size - 3];
  }
  auto r = allocscope::load_snapshot(std::span<const uint8_t>(data, size), options);
  if (!r.ok()) {
    // gzip errors name offsets in the compressed input, parse errors in the inflated one (at most max_inflated).
    fuzz::check_error(r.error(), allocscope::is_gzip({data, size}) ? (4u << 20) : size);
    return 0;
  }
  fuzz::check_model(r.value());
  return 0;
}
