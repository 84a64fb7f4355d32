// The most a split of the file over two cores could give (issue 12; docs/loader.md, "Trace entries decoded ahead on
// the second core", says why that split was not built and what was instead): the same
// trace cut in two real pickles at its middle event, each parsed by its own thread in the same process, against the
// whole file parsed by one. No join, no memo hand-over, no lexing: a real split can only be slower than the pair.
// The halves are written by Python's pickle (the writer PyTorch's _dump_snapshot uses, same protocol as the input):
// the first with the segments and the first half of the busiest device's trace, the second with the rest of the trace
// and no segments. Everything is parsed from memory (files mapped and populated first), best and median of N runs.
// usage: bench_split_bound [FILE (default, or "": the 1M-event fixture)] [RUNS=7]
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "allocscope/loader.h"

using namespace allocscope;
namespace fs = std::filesystem;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Mapped {
  const uint8_t* data = nullptr;
  size_t size = 0;
  std::span<const uint8_t> span() const { return {data, size}; }
};

Mapped map_file(const std::string& path) {
  Mapped m;
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return m;
  struct stat st {};
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED) m = {static_cast<const uint8_t*>(p), static_cast<size_t>(st.st_size)};
  }
  close(fd);
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2] * 1000;
}
double best(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()) * 1000; }

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--help") {
    std::puts("usage: bench_split_bound [FILE] [RUNS=7]: whole parse against two half-files parsed at once");
    return 0;
  }
  const std::string path = argc > 1 && argv[1][0] ? argv[1] : std::string(ALLOCSCOPE_FIXTURES) + "/gpt2_big_1M.pickle.gz";
  const int runs = std::max(1, argc > 2 ? std::atoi(argv[2]) : 7);
  char tmpl[] = "/tmp/allocscope_split.XXXXXX";
  if (!mkdtemp(tmpl)) return std::perror("mkdtemp"), 1;
  const fs::path dir = tmpl;
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  const std::string whole = (dir / "whole.pickle").string(), a = (dir / "a.pickle").string(),
                    b = (dir / "b.pickle").string();
  const std::string cmd =
      "python3 - '" + path + "' '" + whole + "' '" + a + "' '" + b + "' <<'PY'\n"
      "import gzip, pickle, sys\n"
      "src, whole, a, b = sys.argv[1:]\n"
      "raw = (gzip.open if open(src, 'rb').read(2) == b'\\x1f\\x8b' else open)(src, 'rb').read()\n"
      "open(whole, 'wb').write(raw)\n"
      "s = pickle.loads(raw)\n"
      "proto = raw[1] if raw[:1] == b'\\x80' else 2\n"
      "traces = s['device_traces']\n"
      "k = max(range(len(traces)), key=lambda i: len(traces[i]))\n"
      "t = traces[k]\n"
      "first = dict(s, device_traces=[x if i != k else t[:len(t) // 2] for i, x in enumerate(traces)])\n"
      "second = dict(s, segments=[], device_traces=[[] if i != k else t[len(t) // 2:] for i in range(len(traces))])\n"
      "pickle.dump(first, open(a, 'wb'), protocol=proto)\n"
      "pickle.dump(second, open(b, 'wb'), protocol=proto)\n"
      "PY";
  std::fprintf(stderr, "bench_split_bound: writing the two halves with Python's pickle...\n");
  if (std::system(cmd.c_str()) != 0) return std::fprintf(stderr, "bench_split_bound: python3 failed\n"), 1;
  const Mapped mw = map_file(whole), ma = map_file(a), mb = map_file(b);
  if (!mw.data || !ma.data || !mb.data) return std::fprintf(stderr, "bench_split_bound: cannot map the files\n"), 1;
  std::vector<double> t_whole, t_seq, t_pair, t_first, t_second;
  for (int r = 0; r < runs; ++r) {
    {
      const double t = now();
      auto s = load_snapshot(mw.span());
      if (!s.ok()) return std::fprintf(stderr, "bench_split_bound: %s\n", s.error().describe().c_str()), 1;
      t_whole.push_back(now() - t);
    }
    {
      const double t = now();
      auto s1 = load_snapshot(ma.span());
      auto s2 = load_snapshot(mb.span());
      if (!s1.ok() || !s2.ok()) return std::fprintf(stderr, "bench_split_bound: a half does not load\n"), 1;
      t_seq.push_back(now() - t);
    }
    {
      const double t0 = now();
      double t2 = 0;
      std::thread second([&] {
        auto s = load_snapshot(mb.span());
        t2 = now() - t0;
      });
      auto s = load_snapshot(ma.span());
      t_first.push_back(now() - t0);
      second.join();
      t_pair.push_back(now() - t0);
      t_second.push_back(t2);
    }
  }
  std::printf("machine: %u cores; %s (%.0f MB), %d runs, parse+model from memory, ms median (best)\n",
              std::thread::hardware_concurrency(), path.c_str(), mw.size / 1e6, runs);
  std::printf("| whole file, one thread | two halves, one after the other | two halves at once | first half | second half |\n");
  std::printf("| %.0f (%.0f) | %.0f (%.0f) | **%.0f** (%.0f) | %.0f | %.0f |\n", median(t_whole), best(t_whole),
              median(t_seq), best(t_seq), median(t_pair), best(t_pair), median(t_first), median(t_second));
  munmap(const_cast<uint8_t*>(mw.data), mw.size);
  munmap(const_cast<uint8_t*>(ma.data), ma.size);
  munmap(const_cast<uint8_t*>(mb.data), mb.size);
  return 0;
}
