// Measures heap use of one call: the test binary replaces global operator new/delete with counting versions, so a
// test can assert that loading a hostile input allocated at most a bounded number of bytes.
#pragma once

#include <cstdint>

namespace hostile {

// While a Meter lives, the peak of live heap bytes above its start is recorded; an allocation that would take the
// live bytes more than `cap` above the start throws std::bad_alloc instead of being made, so a runaway allocation
// fails the test quickly instead of exhausting the machine.
class Meter {
 public:
  explicit Meter(int64_t cap = int64_t{1} << 30);
  ~Meter();
  Meter(const Meter&) = delete;
  Meter& operator=(const Meter&) = delete;
  int64_t peak_bytes() const;  // highest live bytes above the start so far

 private:
  int64_t start_;
  int64_t saved_peak_;
  int64_t saved_cap_;
};

}  // namespace hostile
