// Bytes alive after every step, for any table of intervals with birth_step/death_step/size (allocations, segments).
#pragma once

#include <cstdint>
#include <vector>

namespace allocscope::detail {

// A difference array over steps, then a prefix sum in the same buffer (one 8 MB array for 1M steps, not two: the
// second cost as many page faults as the sum itself); unsigned wrap-around cancels exactly.
template <typename Table>
std::vector<uint64_t> step_totals(const Table& t, uint32_t steps) {
  std::vector<uint64_t> total(static_cast<size_t>(steps) + 2, 0);
  for (uint32_t i = 0; i < t.count(); ++i) {
    total[t.birth_step(i)] += t.size[i];
    total[t.death_step(i)] -= t.size[i];
  }
  total.pop_back();  // deaths at steps + 1 (never) only balance the books
  uint64_t acc = 0;
  for (uint64_t& x : total) x = acc += x;
  return total;
}

}  // namespace allocscope::detail
