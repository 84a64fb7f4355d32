// Loader benchmark: inflate, parse+model throughput, model bytes per event, and Python's pickle.load on the same
// file in the same run (for the ratio). Prints a Markdown table row for tests/bench/RESULTS.md.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "allocscope/loader.h"

using namespace allocscope;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double cpu_now() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Python's pickle.load of the inflated bytes, timed inside Python (excludes interpreter start and file read).
double python_seconds(const std::string& raw_path) {
  const std::string cmd =
      "python3 -c \"import pickle,time,sys;d=open(sys.argv[1],'rb').read();t=time.perf_counter();pickle.loads(d);"
      "print(time.perf_counter()-t)\" " + raw_path + " 2>/dev/null";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return -1;
  char buf[64] = {0};
  const bool ok = fgets(buf, sizeof buf, f) != nullptr;
  pclose(f);
  return ok ? std::atof(buf) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : std::string(ALLOCSCOPE_FIXTURES) + "/gpt2_big_1M.pickle.gz";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const bool with_python = !(argc > 3 && std::string(argv[3]) == "--no-python");
  auto file = read_file(path);
  if (!file.ok()) {
    std::fprintf(stderr, "bench_load: %s\n", file.error().describe().c_str());
    return 1;
  }
  std::vector<uint8_t> raw = file.value();
  double inflate_s = 0;
  if (is_gzip(raw)) {
    const double t = now();
    auto g = gunzip(raw);
    inflate_s = now() - t;
    if (!g.ok()) return std::fprintf(stderr, "bench_load: %s\n", g.error().describe().c_str()), 1;
    raw = std::move(g).value();
  }
  std::vector<double> wall, cpu;
  size_t events = 0, model_bytes = 0, event_bytes = 0;
  for (int i = 0; i < reps; ++i) {
    const double t = now(), c = cpu_now();
    auto s = load_snapshot(raw);
    wall.push_back(now() - t);
    cpu.push_back(cpu_now() - c);
    if (!s.ok()) return std::fprintf(stderr, "bench_load: %s\n", s.error().describe().c_str()), 1;
    events = s->events.size_rows();
    model_bytes = s->memory_bytes();
    event_bytes = s->events.memory_bytes();
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  const double mb = static_cast<double>(raw.size()) / 1e6;
  double py = -1;
  if (with_python) {
    const std::string tmp = "/tmp/allocscope_bench_load.pickle";
    std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<const char*>(raw.data()),
                                               static_cast<std::streamsize>(raw.size()));
    py = python_seconds(tmp);
    std::remove(tmp.c_str());
  }
  std::printf("input: %s (%.1f MB inflated, %zu events)\n", path.c_str(), mb, events);
  std::printf("inflate (zlib): %.3f s\n", inflate_s);
  std::printf("parse+model: best %.3f s wall (%.0f MB/s), median %.3f s; best CPU %.3f s (%.0f MB/s)\n", wall[0],
              mb / wall[0], wall[wall.size() / 2], cpu[0], mb / cpu[0]);
  std::printf("model: %zu bytes total, %.1f bytes per trace event (event columns %.1f)\n", model_bytes,
              events ? static_cast<double>(model_bytes) / static_cast<double>(events) : 0.0,
              events ? static_cast<double>(event_bytes) / static_cast<double>(events) : 0.0);
  if (py > 0)
    std::printf("python pickle.loads: %.3f s (%.0f MB/s); allocscope is %.1fx faster\n", py, mb / py, py / wall[0]);
  std::printf("| %.1f MB | %.3f s | %.0f MB/s | %.0f MB/s | %.1f | %s |\n", mb, inflate_s, mb / wall[0],
              mb / cpu[0], events ? static_cast<double>(model_bytes) / static_cast<double>(events) : 0.0,
              py > 0 ? (std::to_string(static_cast<int>(mb / py)) + " MB/s").c_str() : "n/a");
  return 0;
}
