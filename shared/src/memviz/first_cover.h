// "Which of the intervals added so far was added first and contains x", in O(log n) per call: `trace`'s segment
// lookup without PyTorch's linear scan, so a crafted file with a million segments cannot stall it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>

namespace allocscope::memviz {

class FirstCover {
 public:
  struct Hit {
    uint64_t id;
    uint64_t start;  // start of the interval that owns x
  };

  // Adds [start, start + size) with `id`. Earlier additions win where intervals overlap, so only the parts no
  // earlier interval covers are recorded (a point's answer never changes once covered).
  void add(uint64_t start, uint64_t size, uint64_t id) {
    if (size == 0) return;
    const U128 end = static_cast<U128>(start) + size;  // Python's integers do not wrap
    U128 cur = start, merged_start = start, merged_end = end;
    auto it = covered_.upper_bound(start);
    if (it != covered_.begin() && std::prev(it)->second > start) --it;
    while (it != covered_.end() && it->first < end) {
      if (it->first > cur) pieces_[static_cast<uint64_t>(cur)] = {static_cast<U128>(it->first), id, start};
      cur = std::max(cur, it->second);
      merged_start = std::min<U128>(merged_start, it->first);
      merged_end = std::max(merged_end, it->second);
      it = covered_.erase(it);
    }
    if (cur < end) pieces_[static_cast<uint64_t>(cur)] = {end, id, start};
    covered_[static_cast<uint64_t>(merged_start)] = merged_end;
  }

  // The owner of x, or false.
  bool find(uint64_t x, Hit* hit) const {
    auto it = pieces_.upper_bound(x);
    if (it == pieces_.begin()) return false;
    --it;
    if (static_cast<U128>(x) >= it->second.end) return false;
    *hit = {it->second.id, it->second.owner_start};
    return true;
  }

 private:
  using U128 = unsigned __int128;
  struct Piece {
    U128 end;
    uint64_t id;
    uint64_t owner_start;
  };
  std::map<uint64_t, Piece> pieces_;  // disjoint, each owned by the first interval that covered it
  std::map<uint64_t, U128> covered_;  // union of everything added, merged where overlapping
};

}  // namespace allocscope::memviz
