// "memoryviz" (PyTorch's Active Memory Timeline numbers for a device, for the golden tests and the page's headline)
// and "totals" (the active-bytes curve reduced to min/max per pixel column, for the timeline's outline and minimap).
#include <algorithm>

#include "allocscope/lifetimes.h"
#include "timeline_cache.h"
#include "methods.h"

namespace allocscope::wasm {

const Lifetimes& all_lifetimes(Loaded& f) {
  static const size_t slot = new_cache_slot();
  auto* lt = cached<Lifetimes>(f, slot);
  if (!lt) lt = store(f, slot, std::make_unique<Lifetimes>(build_lifetimes(f.snapshot)));
  return *lt;
}

const DeviceLifetimes* lifetimes_of(Loaded& f, int64_t device) { return all_lifetimes(f).device(device); }

namespace {

Answer memoryviz(const Request& r, std::span<Loaded* const> files) {
  const DeviceLifetimes* lt = lifetimes_of(*files[0], r.i64("device"));
  if (!lt) return Answer::error("no trace for that device");
  const bool with_totals = r.flag("with_totals", true);
  MemoryVizSummary s = memoryviz_summary(*lt, with_totals);  // the count is a golden number too, counted either way
  Answer a;
  a.body = {{"allocations", s.allocations},
            {"peak_active_bytes", s.peak_active_bytes},
            {"final_active_bytes", s.final_active_bytes},
            {"distinct_totals_count", s.distinct_totals_count},
            {"peak_step", lt->peak_step()},
            {"steps", lt->steps()},
            {"warnings", lt->warnings}};
  if (with_totals) {
    std::vector<double> d(s.distinct_totals.begin(), s.distinct_totals.end());
    a.add<double>("distinct_totals", "f64", d);
  }
  return a;
}

// Steps [s0, s1) spread over `width` columns: per column the min and max total, so a million steps draw as an
// exact envelope in a few thousand numbers.
Answer totals(const Request& r, std::span<Loaded* const> files) {
  Loaded& f = *files[0];
  const DeviceLifetimes* lt = lifetimes_of(f, r.i64("device"));
  if (!lt) return Answer::error("no trace for that device");
  const double n = lt->steps();
  double s0 = std::clamp(r.f64("s0", 0), 0.0, n), s1 = std::clamp(r.f64("s1", n), 0.0, n);
  if (s1 <= s0) s1 = std::min(n, s0 + 1);
  const int width = static_cast<int>(std::clamp<int64_t>(r.i64("width", 1000), 1, 16384));
  std::vector<float> lo(width, 0), hi(width, 0);
  uint64_t window_max = 0;
  for (int c = 0; c < width; ++c) {
    uint32_t a = static_cast<uint32_t>(s0 + (s1 - s0) * c / width);
    uint32_t b = std::max(a + 1, static_cast<uint32_t>(s0 + (s1 - s0) * (c + 1) / width));
    b = std::min<uint32_t>(b, lt->steps());
    if (a >= b) a = b - 1;
    auto [mn, mx] = std::minmax_element(lt->total.begin() + a, lt->total.begin() + b);
    lo[c] = static_cast<float>(*mn);
    hi[c] = static_cast<float>(*mx);
    window_max = std::max(window_max, *mx);
  }
  Answer ans;
  ans.body = {{"s0", s0}, {"s1", s1}, {"steps", lt->steps()}, {"window_max", window_max},
              {"max", lt->total.empty() ? 0 : *std::max_element(lt->total.begin(), lt->total.end())}};
  ans.add<float>("lo", "f32", lo);
  ans.add<float>("hi", "f32", hi);
  return ans;
}

const RegisterMethod r1({"memoryviz", memoryviz});
const RegisterMethod r2({"totals", totals});

}  // namespace
}  // namespace allocscope::wasm
