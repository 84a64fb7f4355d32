// Bytes alive after every step, for any table of intervals with birth_step/death_step/size (allocations, segments).
#pragma once

#include <cstdint>
#include <vector>

namespace allocscope::detail {

// A difference array over steps, then a prefix sum; unsigned wrap-around cancels exactly.
template <typename Table>
std::vector<uint64_t> step_totals(const Table& t, uint32_t steps) {
  std::vector<uint64_t> delta(static_cast<size_t>(steps) + 2, 0);
  for (uint32_t i = 0; i < t.count(); ++i) {
    delta[t.birth_step(i)] += t.size[i];
    delta[t.death_step(i)] -= t.size[i];
  }
  std::vector<uint64_t> total(static_cast<size_t>(steps) + 1);
  uint64_t acc = 0;
  for (uint32_t st = 0; st <= steps; ++st) total[st] = acc += delta[st];
  return total;
}

}  // namespace allocscope::detail
