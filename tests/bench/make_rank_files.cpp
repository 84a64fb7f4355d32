// make_rank_files BASE OUTDIR N: N rank snapshots (rank0000.pickle.gz ...) made from one real snapshot with small
// per-rank differences and three planted outliers (tests/bench/rank_files.h), and OUTDIR/planted.jsonl saying which.
// The input of the 1,000-rank benchmark (tests/bench/bench_ranks.sh); the test suite uses the same code.
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "allocscope/loader.h"
#include "rank_files.h"

using namespace allocscope;

int main(int argc, char** argv) {
  if (argc != 4 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr,
                 "usage: make_rank_files BASE.pickle[.gz] OUTDIR N\n"
                 "Writes OUTDIR/rankNNNN.pickle.gz for N ranks (copies of BASE with small per-rank differences and\n"
                 "three planted outliers when N >= 6) and OUTDIR/planted.jsonl naming the outliers.\n");
    return argc == 2 ? 0 : 2;
  }
  const std::string out = argv[2];
  const int n = std::atoi(argv[3]);
  if (n < 1 || n > 100000) return std::fprintf(stderr, "make_rank_files: N must be 1..100000\n"), 2;
  auto base = load_snapshot_file(argv[1]);
  if (!base.ok()) return std::fprintf(stderr, "make_rank_files: %s: %s\n", argv[1], base.error().describe().c_str()), 1;
  mkdir(out.c_str(), 0755);
  int64_t device;
  uint64_t peak;
  rankfiles::measure_base(*base, &device, &peak);
  std::string planted = "{\"base\": \"" + std::string(argv[1]) + "\", \"ranks\": " + std::to_string(n) +
                        ", \"device\": " + std::to_string(device) + ", \"base_peak_allocated\": " +
                        std::to_string(peak) + ", \"outliers\": [";
  bool first = true;
  for (int r = 0; r < n; ++r) {
    const rankfiles::Plant p = rankfiles::plant_of(r, n);
    char name[64];
    std::snprintf(name, sizeof name, "/rank%04d.pickle.gz", r);
    const Status st = write_snapshot_file(rankfiles::make_rank(*base, device, peak, r, p), out + name);
    if (!st.ok()) return std::fprintf(stderr, "make_rank_files: %s\n", st.error().describe().c_str()), 1;
    if (p != rankfiles::Plant::kNone) {
      const char* kind = p == rankfiles::Plant::kHolds ? "holds" : p == rankfiles::Plant::kCaches ? "caches" : "shard_more";
      planted += std::string(first ? "" : ", ") + "{\"rank\": " + std::to_string(r) + ", \"kind\": \"" + kind + "\"}";
      first = false;
    }
    if ((r + 1) % 100 == 0 || r + 1 == n) std::fprintf(stderr, "\rmake_rank_files: %d/%d", r + 1, n);
  }
  std::fprintf(stderr, "\n");
  planted += "]}\n";
  FILE* f = std::fopen((out + "/planted.jsonl").c_str(), "w");
  if (!f || std::fputs(planted.c_str(), f) < 0 || std::fclose(f) != 0) return std::fprintf(stderr, "make_rank_files: cannot write planted.jsonl\n"), 1;
  return 0;
}
