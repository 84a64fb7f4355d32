// A made-up snapshot the worker runs through the load and the first view's answers while the start page waits for a
// file. V8 runs WebAssembly in a baseline tier first and optimises a function only after it has run a while, so the
// first real file used to parse at about 60% of the speed of the second (Chromium, the 1M-event file: 443 ms of
// parsing, then 250 ms; ready 1.07 s, then 0.62-0.69 s). The bytes are written by the project's writer (PyTorch's C++
// pickler's layout) from a trace shaped like training: allocations of a few dozen sizes from a few dozen stacks, most
// freed a few hundred events later, in one segment.
#include <emscripten/emscripten.h>

#include <cstdint>
#include <string>
#include <vector>

#include "allocscope/snapshot.h"
#include "allocscope/writer.h"

namespace {

allocscope::Snapshot made_up(uint32_t allocations) {
  using namespace allocscope;
  Snapshot s;
  // 24 stacks of 12 frames (Python files and lines, then C++ frames), as a model's layers make them.
  std::vector<StackId> stacks;
  for (int k = 0; k < 24; ++k) {
    std::vector<FrameId> ids;
    for (int f = 0; f < 12; ++f) {
      const std::string file = f < 6 ? "/work/model_" + std::to_string(f) + ".py" : "??";
      const std::string name = f < 6 ? "forward_" + std::to_string(k % 6) : "at::native::op_" + std::to_string(f);
      s.frames.push_back({s.strings.intern(name), s.strings.intern(file), f < 6 ? 10 * k + f : 0});
      ids.push_back(static_cast<FrameId>(s.frames.size() - 1));
    }
    stacks.push_back(s.stacks.intern(ids));
  }
  const uint64_t base = 0x7f0000000000, span = uint64_t{1} << 30;
  s.has_device_traces = true;
  s.devices.push_back({0, 0, 0});
  EventColumns& e = s.events;
  auto event = [&](Action a, uint64_t addr, uint64_t size, StackId stack) {
    e.action.push_back(a), e.addr.push_back(addr), e.size.push_back(size), e.stream.push_back(0);
    e.time_us.push_back(1700000000000000 + static_cast<int64_t>(e.action.size()));
    e.stack.push_back(stack), e.compile_context.push_back(0), e.user_metadata.push_back(0);
  };
  event(Action::kSegmentAlloc, base, span, stacks[0]);
  // Live allocations in a ring of 256 slots, each slot its own address range: slot i's allocation is freed when the
  // ring comes back to it.
  constexpr uint32_t kSlots = 256;
  std::vector<uint64_t> live(kSlots, 0);
  const uint64_t slot_span = span / kSlots;
  for (uint32_t i = 0; i < allocations; ++i) {
    const uint32_t slot = i % kSlots;
    const uint64_t addr = base + slot * slot_span;
    if (live[slot]) {
      event(Action::kFreeRequested, addr, live[slot], stacks[(i + 7) % stacks.size()]);
      event(Action::kFreeCompleted, addr, live[slot], stacks[(i + 7) % stacks.size()]);
    }
    live[slot] = 512 * (1 + (i * 2654435761u) % 4096);  // up to 2 MiB, within the slot
    event(Action::kAlloc, addr, live[slot], stacks[i % stacks.size()]);
  }
  for (uint32_t slot = 0; slot < kSlots; ++slot)
    if (live[slot]) {
      event(Action::kFreeRequested, base + slot * slot_span, live[slot], stacks[0]);
      event(Action::kFreeCompleted, base + slot * slot_span, live[slot], stacks[0]);
    }
  s.devices[0].end = static_cast<uint32_t>(e.size_rows());
  // The segment as the snapshot was taken: everything freed, one inactive block.
  Segment seg;
  seg.address = base, seg.total_size = span, seg.segment_type = s.strings.intern("large"), seg.stack = stacks[0];
  seg.first_block = 0, seg.num_blocks = 1;
  s.segments.push_back(seg);
  s.blocks.push_back({base, span, 0, BlockState::kInactive, 0});
  return s;
}

std::vector<uint8_t> g_bytes;

}  // namespace

extern "C" {

// Writes the made-up snapshot of `allocations` allocations (~3 trace entries each) and returns its size in bytes;
// as_warm_up_data() is where they are until as_warm_up_free().
EMSCRIPTEN_KEEPALIVE double as_warm_up_pickle(uint32_t allocations) {
  g_bytes = allocscope::write_snapshot(made_up(allocations));
  return static_cast<double>(g_bytes.size());
}
EMSCRIPTEN_KEEPALIVE const uint8_t* as_warm_up_data() { return g_bytes.data(); }
EMSCRIPTEN_KEEPALIVE void as_warm_up_free() { std::vector<uint8_t>().swap(g_bytes); }

}  // extern "C"
