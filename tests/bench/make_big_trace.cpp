// make_big_trace IN OUT REPEAT: a snapshot whose trace is IN's busiest device's trace REPEAT times over (the 10M-event
// input of tests/bench: `make_big_trace tests/fixtures/gpt2_big_1M.pickle.gz /tmp/big10M.pickle 10`), written with
// the project's writer (OUT ending in .gz is gzipped). Each repetition's addresses move past the previous one's and
// its times follow it, so no address is alive twice; what a repetition leaves alive stays alive (the memory steps up
// once per repetition), which keeps every event consistent. The final segments are the last repetition's.
// With DEVICES (default 1), devices 0..DEVICES-1 each get that whole trace and segments (a multi-GPU process), to
// measure the per-device analyses on several cores.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "allocscope/loader.h"
#include "allocscope/writer.h"

using namespace allocscope;

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr,
                 "usage: make_big_trace IN.pickle[.gz] OUT.pickle[.gz] REPEAT [DEVICES]\n"
                 "Repeats IN's busiest device trace REPEAT times (addresses moved, times following) into OUT, on\n"
                 "DEVICES devices (default 1) that each get the whole trace.\n");
    return argc == 2 && std::string(argv[1]) == "--help" ? 0 : 2;
  }
  const int repeat = std::atoi(argv[3]);
  const int devices = argc == 5 ? std::atoi(argv[4]) : 1;
  if (devices < 1 || devices > 16) return std::fprintf(stderr, "make_big_trace: DEVICES must be 1..16\n"), 2;
  if (repeat < 1 || repeat > 1000) return std::fprintf(stderr, "make_big_trace: REPEAT must be 1..1000\n"), 2;
  auto in = load_snapshot_file(argv[1]);
  if (!in.ok()) return std::fprintf(stderr, "make_big_trace: %s: %s\n", argv[1], in.error().describe().c_str()), 1;
  Snapshot s = std::move(in).value();
  const DeviceTrace* busiest = nullptr;
  for (const DeviceTrace& d : s.devices)
    if (!busiest || d.count() > busiest->count()) busiest = &d;
  if (!busiest || !busiest->count()) return std::fprintf(stderr, "make_big_trace: %s has no trace\n", argv[1]), 1;
  const uint32_t b = busiest->begin, n = busiest->count();
  const int64_t device = busiest->device;

  uint64_t lo = UINT64_MAX, hi = 0;
  for (uint32_t i = b; i < b + n; ++i)
    if (s.events.action[i] != Action::kOom && s.events.action[i] != Action::kSnapshot) {
      lo = std::min(lo, s.events.addr[i]);
      hi = std::max(hi, s.events.addr[i] + s.events.size[i]);
    }
  for (const Segment& seg : s.segments) lo = std::min(lo, seg.address), hi = std::max(hi, seg.address + seg.total_size);
  const uint64_t shift = (hi - lo + (1ull << 30)) & ~((1ull << 30) - 1);  // whole GiB past everything used
  const int64_t span = s.events.time_us[b + n - 1] - s.events.time_us[b] + 1000;

  EventColumns out;
  const size_t rows = static_cast<size_t>(n) * repeat;
  out.action.reserve(rows), out.addr.reserve(rows), out.size.reserve(rows), out.stream.reserve(rows);
  out.time_us.reserve(rows), out.stack.reserve(rows), out.compile_context.reserve(rows), out.user_metadata.reserve(rows);
  const bool layouts = !s.events.layout.empty();
  if (layouts) out.layout.reserve(rows);
  for (int k = 0; k < repeat; ++k) {
    for (uint32_t i = b; i < b + n; ++i) {
      const Action a = s.events.action[i];
      const bool moves = a != Action::kOom && a != Action::kSnapshot;  // an oom's addr is device_free
      out.action.push_back(a);
      out.addr.push_back(moves ? s.events.addr[i] + k * shift : s.events.addr[i]);
      out.size.push_back(s.events.size[i]);
      out.stream.push_back(s.events.stream[i]);
      out.time_us.push_back(s.events.time_us[i] + k * span);
      out.stack.push_back(s.events.stack[i]);
      out.compile_context.push_back(s.events.compile_context[i]);
      out.user_metadata.push_back(s.events.user_metadata[i]);
      if (layouts) out.layout.push_back(s.events.layout[i]);
    }
    std::fprintf(stderr, "\rmake_big_trace: repetition %d/%d", k + 1, repeat);
  }
  std::fprintf(stderr, "\n");
  s.events = std::move(out);
  for (DeviceTrace& d : s.devices) {
    d.begin = d.end = 0;
    if (d.device == device) d.end = static_cast<uint32_t>(rows);
  }
  // Only the repeated device keeps a trace; every device keeps its final segments, the repeated one's moved to
  // where the last repetition left them.
  for (Segment& seg : s.segments)
    if (seg.device == device) seg.address += (repeat - 1) * shift;
  for (const Segment& seg : s.segments)
    if (seg.device == device)
      for (uint32_t k = 0; k < seg.num_blocks; ++k) s.blocks[seg.first_block + k].address += (repeat - 1) * shift;
  if (devices > 1) {
    // The same trace and segments on devices 0..devices-1 (rows copied; one device's rows after another's).
    EventColumns& e = s.events;
    for (int k = 1; k < devices; ++k)
      for (size_t i = 0; i < rows; ++i) e.append_row(e, i);
    s.devices.clear();
    for (int k = 0; k < devices; ++k)
      s.devices.push_back(DeviceTrace{k, static_cast<uint32_t>(k * rows), static_cast<uint32_t>((k + 1) * rows)});
    std::vector<Segment> segs;
    std::vector<Block> blocks;
    for (int k = 0; k < devices; ++k)
      for (const Segment& seg : s.segments) {
        if (seg.device != device) continue;
        Segment c = seg;
        c.device = k;
        c.first_block = static_cast<uint32_t>(blocks.size());
        for (uint32_t j = 0; j < seg.num_blocks; ++j) blocks.push_back(s.blocks[seg.first_block + j]);
        segs.push_back(c);
      }
    s.segments = std::move(segs);
    s.blocks = std::move(blocks);
  }
  // A plain pickle streams to the file as it is written (100 repetitions are 18 GB); a .gz is made whole.
  const std::string out_path = argv[2];
  if (out_path.size() > 3 && out_path.compare(out_path.size() - 3, 3, ".gz") == 0) {
    const Status st = write_snapshot_file(s, out_path);
    if (!st.ok()) return std::fprintf(stderr, "make_big_trace: %s\n", st.error().describe().c_str()), 1;
  } else {
    FILE* f = std::fopen(out_path.c_str(), "wb");
    if (!f) return std::fprintf(stderr, "make_big_trace: cannot write %s\n", argv[2]), 1;
    bool ok = true;
    pickle::Writer w;
    w.stream_to([&](std::span<const uint8_t> b) { ok = ok && std::fwrite(b.data(), 1, b.size(), f) == b.size(); });
    write_snapshot_value(s, &w);
    if (std::fclose(f) != 0 || !ok) return std::fprintf(stderr, "make_big_trace: writing %s failed\n", argv[2]), 1;
  }
  std::fprintf(stderr, "make_big_trace: %s: %zu events on each of %d device(s)\n", argv[2], rows, devices);
  return 0;
}
