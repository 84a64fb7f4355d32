// Builds small hand-made snapshots for edge cases the real fixtures lack (several devices, odd names, MEM hits).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "allocscope/snapshot.h"

namespace clitest {

class SnapshotBuilder {
 public:
  // A stack from (name, filename, line) frames, innermost first (the order snapshots store).
  allocscope::StackId stack(const std::vector<std::tuple<std::string, std::string, int64_t>>& frames) {
    std::vector<allocscope::FrameId> ids;
    for (const auto& [name, file, line] : frames) {
      s.frames.push_back({s.strings.intern(name), s.strings.intern(file), line});
      ids.push_back(static_cast<allocscope::FrameId>(s.frames.size() - 1));
    }
    return s.stacks.intern(ids);
  }
  // Appends a segment whose blocks are {size, requested, state, stack}.
  void segment(uint64_t address, int64_t stream, uint64_t allocated_size,
               const std::vector<std::tuple<uint64_t, uint64_t, allocscope::BlockState, allocscope::StackId>>& blocks) {
    allocscope::Segment seg;
    seg.address = address;
    seg.stream = stream;
    seg.allocated_size = allocated_size;
    seg.first_block = static_cast<uint32_t>(s.blocks.size());
    uint64_t offset = 0;
    for (const auto& [size, requested, state, stack] : blocks) {
      s.blocks.push_back({address + offset, size, requested, state, stack});
      offset += size;
    }
    seg.total_size = offset;
    seg.num_blocks = static_cast<uint32_t>(blocks.size());
    s.segments.push_back(seg);
  }
  // Starts the trace of the next device ordinal; events appended after belong to it.
  void device() {
    s.has_device_traces = true;
    const auto row = static_cast<uint32_t>(s.events.size_rows());
    s.devices.push_back({static_cast<int64_t>(s.devices.size()), row, row});
  }
  // A START annotation (e.g. "Optimizer.step#SGD.step") just before the next event: an iteration boundary.
  void annotate(const std::string& name) {
    s.annotations.push_back({true, s.strings.intern(name), static_cast<int64_t>(s.devices.size()) - 1,
                             1000 + static_cast<int64_t>(s.events.size_rows()) + 1});
  }
  void event(allocscope::Action a, uint64_t addr, uint64_t size, allocscope::StackId stack = 0,
             const std::string& compile_context = "N/A") {
    auto& e = s.events;
    e.action.push_back(a);
    e.addr.push_back(addr);
    e.size.push_back(size);
    e.stream.push_back(0);
    e.time_us.push_back(1000 + static_cast<int64_t>(e.action.size()));
    e.stack.push_back(stack);
    e.compile_context.push_back(s.strings.intern(compile_context));
    e.user_metadata.push_back(0);
    s.devices.back().end = static_cast<uint32_t>(e.size_rows());
  }

  allocscope::Snapshot s;
};

}  // namespace clitest
