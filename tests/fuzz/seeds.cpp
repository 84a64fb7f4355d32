// Writes the fuzz seed corpus from tests/fixtures: usage `fuzz_seeds FIXTURES_DIR OUT_DIR` makes OUT_DIR/pickle (raw
// pickles for the pickle, loader and round-trip targets) and OUT_DIR/gzip (gzip files for the gzip target).
// Every seed stays under 64 KiB so the fuzzer spends its time on many small inputs.
#include <cstdio>
#include <memory>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "allocscope/loader.h"
#include "allocscope/writer.h"

namespace fs = std::filesystem;
using allocscope::Snapshot;
using Bytes = std::vector<uint8_t>;

namespace {

constexpr size_t kMaxSeed = 64 << 10;
size_t g_count = 0, g_bytes = 0;

void put(const fs::path& dir, const std::string& name, const Bytes& b) {
  if (b.empty() || b.size() > kMaxSeed) return;
  std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(b.data()),
                                                    static_cast<std::streamsize>(b.size()));
  ++g_count, g_bytes += b.size();
}

// A valid, small copy of a real snapshot: the first rows of each device and the first segments with their blocks.
Snapshot trimmed(const Snapshot& s, uint32_t rows_per_device, size_t segments) {
  Snapshot t = s;  // keeps strings, frames, stacks and settings; the writer emits only what is referenced
  allocscope::EventColumns e;
  t.devices.clear();
  for (const auto& d : s.devices) {
    allocscope::DeviceTrace nd{d.device, static_cast<uint32_t>(e.size_rows()), 0};
    for (uint32_t i = d.begin; i < d.end && i < d.begin + rows_per_device; ++i) e.append_row(s.events, i);
    nd.end = static_cast<uint32_t>(e.size_rows());
    t.devices.push_back(nd);
  }
  t.events = std::move(e);
  t.segments.clear();
  t.blocks.clear();
  for (size_t i = 0; i < s.segments.size() && i < segments; ++i) {
    allocscope::Segment seg = s.segments[i];
    seg.first_block = static_cast<uint32_t>(t.blocks.size());
    auto bl = s.blocks_of(s.segments[i]);
    for (size_t k = 0; k < bl.size() && k < 8; ++k) t.blocks.push_back(bl[k]);
    seg.num_blocks = static_cast<uint32_t>(t.blocks.size() - seg.first_block);
    t.segments.push_back(seg);
  }
  // A merged snapshot's outside part (outside.h), trimmed the same way.
  if (s.outside) t.outside = std::make_shared<Snapshot>(trimmed(*s.outside, rows_per_device, segments));
  return t;
}

// A literal's bytes, embedded NULs included.
template <size_t N>
Bytes lit(const char (&s)[N]) {
  return Bytes(s, s + N - 1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fuzz_seeds FIXTURES_DIR OUT_DIR\n");
    return 2;
  }
  const fs::path fixtures = argv[1], out = argv[2];
  const fs::path pk = out / "pickle", gz = out / "gzip";
  fs::remove_all(pk), fs::remove_all(gz);
  fs::create_directories(pk), fs::create_directories(gz);
  auto put_both = [&](const std::string& name, const Bytes& b) {
    put(pk, name, b);
    auto z = allocscope::gzip(b, 6);
    if (z.ok()) put(gz, name + ".gz", z.value());
  };

  for (const char* name : {"linear_seed.pickle", "oom.pickle", "ddp_rank1.pickle", "expandable_segments.pickle",
                           "resnet18_grad_bug.pickle", "gpt2_cpp.pickle.gz", "transformer_leak.pickle",
                           "capture_merged/nccl.pickle.gz"}) {
    auto raw = allocscope::read_file((fixtures / name).string());
    if (!raw.ok()) {
      std::fprintf(stderr, "%s\n", raw.error().describe().c_str());
      return 1;
    }
    Bytes pickle = raw.value();
    if (allocscope::is_gzip(pickle)) pickle = allocscope::gunzip(raw.value()).value();
    const std::string base = fs::path(name).stem().stem().string();
    if (pickle.size() <= 16 << 10) put_both(base + ".whole", pickle);
    for (size_t cut : {size_t{1} << 10, size_t{4} << 10, size_t{16} << 10})  // truncations: real structure, no STOP
      if (cut < pickle.size()) put(pk, base + ".cut" + std::to_string(cut), Bytes(pickle.begin(), pickle.begin() + cut));
    auto snap = allocscope::load_snapshot(pickle);
    if (!snap.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, snap.error().describe().c_str());
      return 1;
    }
    for (auto [rows, segs] : {std::pair<uint32_t, size_t>{4, 1}, {32, 3}, {128, 6}}) {
      Bytes w = allocscope::write_snapshot(trimmed(snap.value(), rows, segs));
      put_both(base + ".trim" + std::to_string(rows), w);
    }
  }

  // A page PyTorch's trace_plot wrote (it carries the snapshot as base64 in a JSON list): the loader opens it.
  if (auto page = allocscope::read_file((fixtures / "pages/linear_seed.trace_plot.html").string()); page.ok())
    put_both("page_trace_plot", page.value());

  // JSON snapshots (json.dump of oom.pickle and ddp_rank0.pickle): whole, and cut, so the JSON reader is fuzzed too.
  if (auto json = allocscope::read_file((fixtures / "json/oom.json").string()); json.ok()) {
    put_both("json_oom.whole", json.value());
    for (size_t cut : {size_t{700}, size_t{9000}})
      put_both("json_oom.cut" + std::to_string(cut), Bytes(json->begin(), json->begin() + std::min(cut, json->size())));
  }
  if (auto gz = allocscope::read_file((fixtures / "json/ddp_rank0.json.gz").string()); gz.ok())
    if (auto json = allocscope::gunzip(gz.value()); json.ok())
      put_both("json_ddp_rank0.cut", Bytes(json->begin(), json->begin() + std::min<size_t>(60000, json->size())));

  // Hand-made pickles for opcodes the fixtures do not use (protocol 0 text, protocol 5 buffers, sets, tuples).
  put_both("p0_dict", lit("(dp0\nVdevice_traces\np1\n(lp2\n(lp3\n(dp4\nVaction\np5\nValloc\np6\nsVsize\np7\nI512\n"
                          "sVaddr\np8\nL140207261220864L\nsVtime_us\np9\nF1.5\nsVframes\np10\n(lp11\n(dp12\nVname\n"
                          "p13\nVf\np14\nsVfilename\np15\nVx.py\np16\nsVline\np17\nI3\nsaasaas."));
  put_both("p1_segments", lit("]q\x00(}q\x01(X\x07\x00\x00\x00" "addressq\x02J\x00\x10\x00\x00X\n\x00\x00\x00total_size"
                              "q\x03M\x00\x02X\x06\x00\x00\x00" "blocksq\x04]q\x05}q\x06(X\x04\x00\x00\x00sizeq\x07M\x00"
                              "\x02X\x05\x00\x00\x00stateq\x08X\x10\x00\x00\x00" "active_allocatedq\tuaua."));
  put_both("p5_misc", Bytes{0x80, 0x05, 0x95, 0x18, 0, 0, 0, 0, 0, 0, 0, 0x8f, 0x28, 'K', 1, 'K', 2, 0x90, 0x96, 3, 0,
                            0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 0x98, 0x86, 0x8b, 1, 0, 0, 0, 0x7f, 0x85, '.'});
  std::printf("fuzz seeds: %zu files, %zu bytes in %s\n", g_count, g_bytes, out.string().c_str());
  return 0;
}
