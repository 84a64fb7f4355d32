// `allocscope state FILE --event E`: the caching allocator's segments and blocks at one point of the trace.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "allocscope/allocator_state.h"
#include "allocscope/memviz.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

int run_state(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"device", "event", "step"});
  for (const auto& [name, value] : args.options)
    if (name != "device" && name != "event" && name != "step" && name != "json" && name != "blocks")
      return fail("state: unknown option --" + name);
  if (args.positional.size() != 1)
    return fail("usage: allocscope state FILE [--device N] [--event E | --step S] [--blocks] [--json]");
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  // Default: the first device the file has (a list-only file of rank 1 holds only device 1).
  const Lifetimes all = build_lifetimes(s);
  int64_t device = all.devices.empty() ? 0 : all.devices.front().device;
  int64_t step = -1;  // default: the end
  uint32_t v = 0;
  bool device_given = false;
  if (!device_option("state", args, args.positional[0], all, &device, &device_given)) return 1;
  if (args.has("event") && args.has("step")) return fail("state: give --event or --step, not both");
  if (args.has("event")) {
    if (!parse_count(args.get("event"), &v)) return fail("state: --event needs an event index (0, 1, ...)");
    step = static_cast<int64_t>(v) + 1;  // the state right after event E
  }
  if (args.has("step")) {
    if (!parse_count(args.get("step"), &v)) return fail("state: --step needs a step number (0, 1, ...)");
    step = v;
  }
  const DeviceLifetimes lt = build_device_lifetimes(s, device);
  if (all.devices.empty()) return no_device("state", args.positional[0], all, "", args.has("json"));
  if (step < 0) step = lt.event_count;
  if (step > static_cast<int64_t>(lt.event_count))
    return fail("state: the trace of device " + std::to_string(device) + " has " + std::to_string(lt.event_count) +
                " events (steps 0.." + std::to_string(lt.event_count) + ")");
  const SegmentTimeline seg = build_segment_timeline(s, device);
  const AllocatorStateIndex index(s, lt, seg);
  AllocatorState a;
  index.at(static_cast<uint32_t>(step), &a);

  if (args.has("json")) {
    nlohmann::json segs = nlohmann::json::array();
    for (size_t k = 0; k < a.segment_addr.size(); ++k) {
      nlohmann::json blocks = nlohmann::json::array();
      for (uint32_t b = a.segment_first_block[k]; b < a.segment_first_block[k] + a.segment_num_blocks[k]; ++b)
        blocks.push_back({{"addr", a.block_addr[b]},
                          {"size", a.block_size[b]},
                          {"size_known", static_cast<bool>(a.block_size_known[b])},
                          {"requested_size", a.block_requested[b]},
                          {"pending_free", static_cast<bool>(a.block_pending_free[b])}});
      segs.push_back({{"addr", a.segment_addr[k]},
                      {"size", a.segment_size[k]},
                      {"stream", a.segment_stream[k]},
                      {"expandable", static_cast<bool>(a.segment_expandable[k])},
                      {"allocated", a.segment_allocated[k]},
                      {"requested", a.segment_requested[k]},
                      {"blocks", blocks}});
    }
    nlohmann::json out = {{"device", device},
                          {"step", step},
                          {"reserved_bytes", a.reserved_bytes},
                          {"allocated_bytes", a.allocated_bytes},
                          {"requested_bytes", a.requested_bytes},
                          {"pending_free_bytes", a.pending_free_bytes},
                          {"rounding_waste_bytes", a.rounding_waste_bytes},
                          {"inactive_bytes", a.inactive_bytes},
                          {"segments", segs}};
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  auto fs = [](uint64_t v) { return memviz::format_size(v); };
  std::printf("device %lld after %lld of %u events: %zu segments, %zu active blocks\n", static_cast<long long>(device),
              static_cast<long long>(step), lt.event_count, a.segment_addr.size(), a.block_addr.size());
  if (a.pending_free_bytes)
    std::printf("  reserved %s = allocated %s + pending free %s + cached free %s\n", fs(a.reserved_bytes).c_str(),
                fs(a.allocated_bytes).c_str(), fs(a.pending_free_bytes).c_str(), fs(a.inactive_bytes).c_str());
  else
    std::printf("  reserved %s = allocated %s + cached free %s\n", fs(a.reserved_bytes).c_str(),
                fs(a.allocated_bytes).c_str(), fs(a.inactive_bytes).c_str());
  std::printf("  requested %s, rounding waste %s, pending free %s\n", fs(a.requested_bytes).c_str(),
              fs(a.rounding_waste_bytes).c_str(), fs(a.pending_free_bytes).c_str());
  for (size_t k = 0; k < a.segment_addr.size(); ++k) {
    std::printf("  segment 0x%llx %s%s: %u blocks, %s allocated\n", static_cast<unsigned long long>(a.segment_addr[k]),
                fs(a.segment_size[k]).c_str(), a.segment_expandable[k] ? " (expandable)" : "",
                a.segment_num_blocks[k], fs(a.segment_allocated[k]).c_str());
    if (!args.has("blocks")) continue;
    for (uint32_t b = a.segment_first_block[k]; b < a.segment_first_block[k] + a.segment_num_blocks[k]; ++b)
      std::printf("    block 0x%llx %s%s (requested %s)%s\n", static_cast<unsigned long long>(a.block_addr[b]),
                  fs(a.block_size[b]).c_str(), a.block_size_known[b] ? "" : "~", fs(a.block_requested[b]).c_str(),
                  a.block_pending_free[b] ? " pending free" : "");
  }
  return 0;
}

const RegisterVerb kRegister({
    "state",
    "the allocator's segments and blocks at any event (pending frees, rounding waste)",
    "usage: allocscope state FILE [--device N] [--event E | --step S] [--blocks] [--json]\n\n"
    "The caching allocator's state right after event E (default: the end of the trace), rebuilt from the\n"
    "trace and the final segments: segments (expandable ones merged as PyTorch shows them), active blocks,\n"
    "blocks waiting for free_completed, and rounding waste (block size minus requested size). Block sizes the\n"
    "final segments do not know are estimated and marked '~': the request rounded up to 512 bytes, plus, for a\n"
    "request over 1 MiB, the gap of at most 1 MiB after it that PyTorch does not split off (docs/timeline.md).\n"
    "An estimate is a lower bound and can grow at a later step, once a neighbour shows where the block ends.\n\n"
    "  --device N   device ordinal (default: the first device the file has); --device host: the file's\n"
    "               pinned host memory (PyTorch 2.14+)\n"
    "  --event E    state after device event E (0-based); --step S is the state after S events\n"
    "  --blocks     list each segment's blocks\n"
    "  --json       machine-readable output\n",
    run_state,
    41,
});

}  // namespace
}  // namespace allocscope::cli
