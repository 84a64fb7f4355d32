// Private helpers shared by the memviz outputs: cached frame filtering/formatting and Python-style integers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocscope/snapshot.h"

namespace allocscope::memviz {

// Formats stacks the way `_write_blocks` does, caching per frame and per stack (blocks share few distinct stacks).
class StackFormatter {
 public:
  explicit StackFormatter(const Snapshot& s);
  // `frames_fragment`: "<non-python>" for an empty stack, else the kept frames outermost first, joined by ';'.
  const std::string& fragment(StackId stack);

 private:
  const std::string* frame(FrameId id);  // nullptr when `_frame_filter` drops it
  const Snapshot& s_;
  std::vector<int8_t> frame_state_;  // 0 unknown, 1 kept, -1 dropped
  std::vector<std::string> frame_text_;
  std::vector<int8_t> stack_done_;
  std::vector<std::string> stack_text_;
};

// `_write_blocks` for one segment: appends "{prefix};{state};{fragment} {requested}\n" per block, plus a
// "{prefix};{state};<gaps> {size - requested}\n" line when the two differ.
void write_blocks(const Snapshot& s, StackFormatter* fmt, const std::string& prefix, const Segment& seg,
                  std::string* out);

// `_block_extra`'s size: requested_size, or for a 2.0 block without 'frames' its first history entry's real_size.
uint64_t block_extra_size(const Snapshot& s, const Block& b);

// Python's str(int) for the integer types snapshots hold.
inline std::string py_int(int64_t v) { return std::to_string(v); }
inline std::string py_int(uint64_t v) { return std::to_string(v); }

}  // namespace allocscope::memviz
