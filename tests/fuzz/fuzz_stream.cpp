// libFuzzer target: SnapshotStream fed the pickle in fuzzer-chosen chunk sizes (the last input byte picks them) must
// agree with load_snapshot on the whole buffer: what loads whole loads streamed and writes the same bytes; what fails
// streamed fails whole. (Offsets may differ: only the whole-buffer reader can check a FRAME's claimed length against
// the end of the input up front, so it may report a truncation earlier; the streamed error must still be in range.)
#include <cstdint>
#include <span>
#include <string>

#include "allocscope/writer.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint32_t param = data[size - 1];
  std::span<const uint8_t> pickle(data, size - 1);
  if (allocscope::is_gzip(pickle)) return 0;  // the stream takes inflated bytes only
  const auto opt = fuzz::small_options();
  auto whole = allocscope::load_snapshot(pickle, opt);

  allocscope::SnapshotStream stream(opt, param & 1 ? pickle.size() : 0);
  allocscope::Status fed;
  size_t at = 0;
  for (uint32_t i = 0; at < pickle.size() && fed.ok(); ++i) {
    // Chunk sizes 1..param+1 in a pattern that changes every chunk, so splits land inside every kind of argument.
    const size_t n = 1 + ((param * (i + 1) * 2654435761u) >> 24) % (param + 1);
    const size_t take = std::min(n, pickle.size() - at);
    fed = stream.feed(pickle.subspan(at, take));
    at += take;
  }
  if (!fed.ok()) {
    fuzz::check_error(fed.error(), pickle.size());
    if (whole.ok()) {
      std::fprintf(stderr, "stream: %s\n", fed.error().describe().c_str());
      fuzz::die("the stream failed where load_snapshot loaded");
    }
    return 0;
  }
  auto streamed = stream.finish();
  const bool frame_claim = !whole.ok() && whole.error().message.find("FRAME") != std::string::npos;
  if (whole.ok() != streamed.ok() && !(frame_claim && streamed.ok())) {
    std::fprintf(stderr, "whole: %s\nstream: %s\n", whole.ok() ? "ok" : whole.error().describe().c_str(),
                 streamed.ok() ? "ok" : streamed.error().describe().c_str());
    fuzz::die("stream and whole-buffer loads disagree");
  }
  if (!streamed.ok()) {
    fuzz::check_error(streamed.error(), pickle.size());
    return 0;
  }
  if (!whole.ok()) return 0;  // a FRAME claiming more than the file holds, before a complete pickle
  fuzz::check_model(streamed.value());
  FUZZ_CHECK(allocscope::write_snapshot(whole.value()) == allocscope::write_snapshot(streamed.value()));
  return 0;
}
