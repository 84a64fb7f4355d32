// JSON snapshots: the dict torch.cuda.memory._snapshot() returns, written with json.dump instead of pickle.dump
// (teams that refuse to unpickle files they did not write ask for them, and MemoryViz opens them). simdjson walks the
// text once (Debian's libsimdjson natively; the same release's amalgamated source in WebAssembly) and every value is
// re-encoded as the pickle opcodes Python's pickler writes for it, chunk by chunk, into the same pickle machine and
// snapshot builder a pickle goes through: one loader, with its bounds, checks and answers, for both formats.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "allocscope/result.h"

namespace allocscope::detail {

// Bytes that must be readable (any value) after the JSON text: simdjson reads ahead in blocks.
constexpr size_t kJsonPadding = 64;

// Where the pickle's bytes came from in the JSON: one pair every few KiB of pickle, so an error the pickle machine or
// the builder raises at a pickle offset is said near the JSON byte that produced it.
class JsonOffsets {
 public:
  void add(uint64_t pickle, uint64_t json);
  // The JSON offset of the last sample at or before `pickle` (0 before the first).
  uint64_t json_near(uint64_t pickle) const;

 private:
  std::vector<std::pair<uint64_t, uint64_t>> samples_;  // ascending pickle offsets
};

// Re-encodes `json` (followed by kJsonPadding readable bytes) as a pickle, handed to `sink` in chunks of about 4 MiB.
// `max_depth` bounds nesting (Limits::max_depth). Errors name the JSON's byte offset (Error::in_json). `progress`
// (may be empty) gets (JSON bytes done, total) about every chunk.
Status json_to_pickle(std::span<const uint8_t> json, uint32_t max_depth,
                      const std::function<Status(std::span<const uint8_t>)>& sink, JsonOffsets* offsets,
                      const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace allocscope::detail
