// Snapshot loader entry points: gzip detection, the pickle machine driven by the builder, files.
#include "allocscope/loader.h"

#include <fstream>

#include "snapshot/builder.h"

namespace allocscope {

bool is_gzip(std::span<const uint8_t> b) { return b.size() >= 2 && b[0] == 0x1f && b[1] == 0x8b; }

Result<Snapshot> load_snapshot(std::span<const uint8_t> bytes, const LoadOptions& options) {
  std::vector<uint8_t> inflated;
  if (is_gzip(bytes)) {
    std::function<void(uint64_t, uint64_t)> p;
    if (options.progress) p = [&](uint64_t d, uint64_t t) { options.progress("inflate", d, t); };
    auto g = gunzip(bytes, options.max_inflated_bytes, p);
    if (!g.ok()) return g.error();
    inflated = std::move(g).value();
    bytes = inflated;
  }
  if (bytes.empty()) return Error{"the file is empty; expected a pickled memory snapshot", 0};
  Snapshot snap;
  snap.source_bytes = bytes.size();
  {
    // Real snapshots spend ~160 bytes of pickle per trace entry; reserving avoids regrowing the columns (page
    // faults dominated otherwise). Excess capacity is released after loading.
    const size_t guess = std::min<size_t>(bytes.size() / 128, UINT32_MAX);
    EventColumns& e = snap.events;
    e.action.reserve(guess), e.addr.reserve(guess), e.size.reserve(guess), e.stream.reserve(guess);
    e.time_us.reserve(guess), e.stack.reserve(guess), e.compile_context.reserve(guess);
    e.user_metadata.reserve(guess);
  }
  detail::Builder builder(&snap);
  pickle::Reader reader(&snap.strings, options.limits);
  std::function<void(uint64_t, uint64_t)> p;
  if (options.progress) p = [&](uint64_t d, uint64_t t) { options.progress("parse", d, t); };
  auto root = reader.run(bytes, &builder, p);
  if (!root.ok()) return root.error();
  ALLOCSCOPE_RETURN_IF_ERROR(builder.finish(reader, root.value()));
  EventColumns& e = snap.events;
  if (e.action.capacity() > e.action.size() + e.action.size() / 4 + 1024) {
    e.action.shrink_to_fit(), e.addr.shrink_to_fit(), e.size.shrink_to_fit(), e.stream.shrink_to_fit();
    e.time_us.shrink_to_fit(), e.stack.shrink_to_fit(), e.compile_context.shrink_to_fit();
    e.user_metadata.shrink_to_fit();
  }
  return snap;
}

Result<std::vector<uint8_t>> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return Error{"cannot open '" + path + "'"};
  const std::streamoff n = f.tellg();
  if (n < 0) return Error{"cannot read '" + path + "'"};
  std::vector<uint8_t> data(static_cast<size_t>(n));
  f.seekg(0);
  if (n && !f.read(reinterpret_cast<char*>(data.data()), n)) return Error{"cannot read '" + path + "'"};
  return data;
}

Result<Snapshot> load_snapshot_file(const std::string& path, const LoadOptions& options) {
  auto data = read_file(path);
  if (!data.ok()) return data.error();
  return load_snapshot(data.value(), options);
}

}  // namespace allocscope
