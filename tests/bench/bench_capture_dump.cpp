// CPU benchmark of the capture recorder: hook cost with and without native stacks (no CUDA: the recorder is driven
// directly) and the dump of 100k events with native stacks from 1024 distinct call paths (symbolize + write).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "allocscope/writer.h"
#include "recorder.h"
#include "snapshot_builder.h"

using namespace allocscope;
using namespace allocscope::capture;

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

uint64_t g_next = 0x10000;
bool g_hooks = true;  // false: time the harness alone (the call paths), to subtract it

__attribute__((noinline)) void leaf(Recorder& r) {
  if (!g_hooks) {
    asm volatile("");
    return;
  }
  Site s;
  s.api = Api::kMemAllocAsync;
  const uint64_t a = g_next += 0x1000;
  r.on_alloc(s, a, 1 << 20, SegmentKind::kAsync, 0);
  r.on_free(s, a, 0, true, 0);
}

// Ten levels, each with two distinct functions, chosen by the bits of `path`: 1024 distinct stacks.
template <int L>
__attribute__((noinline)) void level_a(Recorder& r, unsigned path);
template <int L>
__attribute__((noinline)) void level_b(Recorder& r, unsigned path);
template <int L>
void next(Recorder& r, unsigned path) {
  if constexpr (L == 0) {
    leaf(r);
  } else {
    if (path & 1) level_a<L - 1>(r, path >> 1);
    else level_b<L - 1>(r, path >> 1);
  }
}
template <int L>
void level_a(Recorder& r, unsigned path) {
  next<L>(r, path);
  asm volatile("");
}
template <int L>
void level_b(Recorder& r, unsigned path) {
  next<L>(r, path);
  asm volatile("");
}

__attribute__((noinline)) void deep(Recorder& r, int depth, unsigned path) {
  if (depth <= 0) return next<10>(r, path);
  deep(r, depth - 1, path);
  asm volatile("");
}

}  // namespace

int main() {
  double harness_ns = 0;
  {
    Options o;
    o.dump_at_exit = false;
    Recorder r(o);
    g_hooks = false;
    constexpr int kCalls = 200000;
    for (int i = 0; i < 2000; ++i) deep(r, 20, i & 1023);
    const auto t0 = Clock::now();
    for (int i = 0; i < kCalls; ++i) deep(r, 20, i & 1023);
    harness_ns = ms_since(t0) * 1e6 / (2.0 * kCalls);
    g_hooks = true;
    std::printf("harness     : %.1f ns per (would-be) hook call, subtracted below\n", harness_ns);
  }
  for (StackMode mode : {StackMode::kNone, StackMode::kNative}) {
    Options o;
    o.max_entries = 100000;
    o.stacks = mode;
    o.max_frames = 32;
    o.dump_at_exit = false;
    Recorder r(o);
    constexpr int kCalls = 200000;  // alloc+free pairs = 5 events each -> 1M events through a 100k ring
    for (int i = 0; i < 2000; ++i) deep(r, 20, i & 1023);
    const auto t0 = Clock::now();
    for (int i = 0; i < kCalls; ++i) deep(r, 20, i & 1023);
    const double hook_ms = ms_since(t0);
    std::printf("stacks %-6s: %.1f ns per hook call (alloc or free; %d-frame stacks)\n",
                mode == StackMode::kNative ? "native" : "none", hook_ms * 1e6 / (2.0 * kCalls) - harness_ns, o.max_frames);
    const auto t1 = Clock::now();
    Frozen f = r.freeze();
    const double freeze_ms = ms_since(t1);
    BuildStats st;
    const auto t2 = Clock::now();
    Snapshot s = build_snapshot(f, &st);
    const double build_ms = ms_since(t2);
    const std::string path = "/tmp/allocscope_bench_dump_" + std::to_string(getpid()) + ".pickle";
    const auto t3 = Clock::now();
    const Status ws = write_snapshot_file(s, path);
    const double write_ms = ms_since(t3);
    std::printf("stacks %-6s: dump of %zu events (%zu stacks, %llu addresses, %llu frames): freeze %.1f ms, "
                "symbolize+build %.1f ms, write %.1f ms, total %.1f ms%s\n",
                mode == StackMode::kNative ? "native" : "none", f.events.size(), size_t(f.stacks.size()),
                (unsigned long long)st.distinct_addresses, (unsigned long long)st.distinct_frames, freeze_ms,
                build_ms, write_ms, freeze_ms + build_ms + write_ms, ws.ok() ? "" : " (write failed)");
    std::remove(path.c_str());
  }
  return 0;
}
