#include <algorithm>
#include <cstdint>

#include "allocscope/preview.h"

namespace allocscope {
namespace {
int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? INT64_MAX : INT64_MIN;
  return sum;
}
}  // namespace

PreviewCurve::PreviewCurve(uint32_t max_columns) : max_columns_(std::max<uint32_t>(2, max_columns & ~1u)) {
  low_.reserve(max_columns_);
  high_.reserve(max_columns_);
}

// Pairs of columns become one: the lowest of the two lows, the highest of the two highs.
void PreviewCurve::halve() {
  const size_t n = low_.size();
  size_t out = 0;
  for (size_t i = 0; i < n; i += 2, ++out) {
    const bool pair = i + 1 < n;
    low_[out] = pair ? std::min(low_[i], low_[i + 1]) : low_[i];
    high_[out] = pair ? std::max(high_[i], high_[i + 1]) : high_[i];
  }
  low_.resize(out);
  high_.resize(out);
  per_column_ *= 2;
}

void PreviewCurve::extend(const EventColumns& events) {
  const uint64_t end = events.size_rows();
  for (; rows_ < end; ++rows_) {
    const Action a = events.action[rows_];
    // Sizes come from the file: hostile ones near 2^64 must not wrap the level (a preview, so it saturates).
    const int64_t size = static_cast<int64_t>(std::min<uint64_t>(events.size[rows_], uint64_t{1} << 62));
    if (a == Action::kAlloc) level_ = saturating_add(level_, size);
    else if (a == Action::kFreeCompleted) level_ = saturating_add(level_, -size);
    if (level_ > highest_) highest_ = level_, highest_row_ = rows_ + 1;
    uint64_t column = rows_ / per_column_;
    if (column == max_columns_) halve(), column = rows_ / per_column_;
    if (column == low_.size()) {
      low_.push_back(level_);
      high_.push_back(level_);
    } else {
      low_.back() = std::min(low_.back(), level_);
      high_.back() = std::max(high_.back(), level_);
    }
  }
}

}  // namespace allocscope
