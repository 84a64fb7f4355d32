// `allocscope ranks FILES|DIRS... [--json] [--jobs N]`: one row per rank of a job, the outliers and what they hold.
// Workers take files from a shared counter and summarise one snapshot each at a time, so memory stays at about one
// snapshot per worker however many ranks there are; `summary --json` files (made where the snapshots are) are read
// instead of snapshots, the reduce step for fleets larger than one machine.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "allocscope/frame_filter.h"
#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"
#include "allocscope/ranks.h"
#include "allocscope/summary.h"
#include "allocscope/threads.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_input_name(const std::string& name) {
  for (const char* ext : {".pickle", ".pickle.gz", ".pkl", ".pkl.gz", ".json", ".json.gz"})
    if (ends_with(name, ext)) return true;
  return false;
}

// A .json is a rank's `allocscope summary --json` unless it begins as a JSON snapshot (loader.h's rule).
bool is_summary_json(const std::string& path) {
  if (!ends_with(path, ".json")) return false;
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> head(4096);
  f.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(f.gcount()));
  return !is_json_snapshot(head);
}

// Files as given; a directory stands for its snapshot and summary files (not its subdirectories), sorted by name.
bool expand(const std::vector<std::string>& args, std::vector<std::string>* out) {
  for (const std::string& a : args) {
    struct stat st;
    if (stat(a.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      DIR* d = opendir(a.c_str());
      if (!d) {
        fail("ranks: cannot read directory " + a);
        return false;
      }
      std::vector<std::string> names;
      while (dirent* e = readdir(d))
        if (e->d_name[0] != '.' && is_input_name(e->d_name)) names.push_back(e->d_name);
      closedir(d);
      std::sort(names.begin(), names.end());
      // `allocscope record` with ALLOCSCOPE_KEEP_TORCH_SNAPSHOT=1 leaves PyTorch's own file beside the merged one,
      // which holds it byte for byte: the same rank once, not twice. The bootstrap names it by replacing the
      // output's ".pickle.gz", ".pickle" or ".gz" with ".torch.pickle" (rank0.pickle.gz -> rank0.torch.pickle,
      // rank0.pkl -> rank0.pkl.torch.pickle); either may have been gzipped since.
      const std::vector<std::string> all = names;
      std::erase_if(names, [&](const std::string& n) {
        for (const char* ext : {".torch.pickle", ".torch.pickle.gz"})
          if (ends_with(n, ext)) {
            const std::string stem = n.substr(0, n.size() - std::string(ext).size());
            for (const char* merged : {".pickle", ".pickle.gz", ".gz", ""})
              if (is_input_name(stem + merged) && std::binary_search(all.begin(), all.end(), stem + merged)) return true;
          }
        return false;
      });
      const std::string dir = ends_with(a, "/") ? a : a + "/";
      for (const std::string& n : names) out->push_back(dir + n);
    } else {
      out->push_back(a);
    }
  }
  return true;
}

RankRow unreadable(const std::string& path, const Error& e) {
  RankRow row;
  row.name = path;
  row.rank = rank_from_name(path);
  row.error = e.describe();
  return row;
}

RankRow summarise(const std::string& path, uint32_t top_sites) {
  if (is_summary_json(path)) {
    auto bytes = read_file(path);
    if (!bytes.ok()) return unreadable(path, bytes.error());
    auto row = rank_row_from_summary_json(
        std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), path);
    if (!row.ok()) return unreadable(path, row.error());
    return std::move(row).value();
  }
  LoadOptions options;
  options.map_file = false;  // a file its job rewrites meanwhile is this rank's error row, not the whole run's SIGBUS
  auto s = load_snapshot_file(path, options);
  if (!s.ok()) return unreadable(path, s.error());
  const Lifetimes lt = build_lifetimes(*s);
  const FrameFilter ff(*s);
  return rank_row(*s, summarize(*s, lt, ff, top_sites), path);
}

// A count option (parse_count's rule), held to `max` (more workers than 256 or sites than 1,000 would only cost).
bool read_count(const Args& args, const char* name, uint64_t fallback, uint64_t max, uint64_t* out) {
  uint32_t v = 0;
  if (!args.has(name)) v = static_cast<uint32_t>(fallback);
  else if (!parse_count(args.get(name), &v)) return false;
  *out = std::min<uint64_t>(v, max);
  return true;
}

int run_ranks(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"jobs", "j", "rows", "sites"});
  for (const auto& [name, value] : args.options)
    if (name != "json" && name != "jobs" && name != "j" && name != "rows" && name != "sites")
      return fail("ranks: unknown option --" + name);
  if (args.positional.empty()) return fail("usage: allocscope ranks FILE|DIR... [--json] [--jobs N] [--rows N]");
  const unsigned cores = usable_cores();
  uint64_t jobs = 0, rows = 0, sites = 0;
  if (!read_count(args, args.has("j") ? "j" : "jobs", cores, 256, &jobs) || jobs == 0)
    return fail("ranks: --jobs needs a number of at least 1");
  if (!read_count(args, "rows", 20, UINT32_MAX, &rows)) return fail("ranks: --rows needs a number");
  if (!read_count(args, "sites", 20, 1000, &sites)) return fail("ranks: --sites needs a number");

  std::vector<std::string> files;
  if (!expand(args.positional, &files)) return 1;
  if (files.empty()) return fail("ranks: no snapshot (.pickle, .pickle.gz, .pkl) or summary (.json) files there");

  const size_t n_workers = std::min<size_t>(jobs, files.size());
  std::vector<RankRow> out(files.size());
  // A file too large for the memory left is that rank's answer, not the end of the others': nothing may leave a
  // worker (an exception there calls std::terminate), so the row is written here, on the calling thread, after.
  std::vector<uint8_t> out_of_memory(files.size(), 0);
  std::atomic<size_t> next{0}, done{0};
  auto work = [&] {
    // One worker per core: a worker's load and analyses have no spare core to start threads on, unless it is the
    // only worker (2 workers once started 4 threads a file: an inflater and the analyses' helpers).
    const SingleThreaded on_this_thread(n_workers > 1);
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      try {
        out[i] = summarise(files[i], static_cast<uint32_t>(sites));
      } catch (const std::bad_alloc&) {
        out_of_memory[i] = 1;
      } catch (const std::length_error&) {
        out_of_memory[i] = 1;
      }
      done.fetch_add(1);
    }
  };
  // Without a thread to start (no memory for its stack, or the thread limit), fewer workers do the files.
  auto start = [&](std::vector<std::thread>& into) {
    try {
      into.emplace_back(work);
      return true;
    } catch (const std::system_error&) {
      return false;
    } catch (const std::bad_alloc&) {  // std::thread's own state: a throw here would leave the others unjoined
      return false;
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(jobs);
  for (size_t k = 1; k < n_workers; ++k)
    if (!start(pool)) break;
  std::vector<std::thread> reporter_freed;  // the calling thread's share, when it reports progress instead
  if (isatty(STDERR_FILENO) && !pool.empty() && start(reporter_freed)) {
    while (done.load() < files.size()) {
      std::fprintf(stderr, "\rranks: %zu/%zu files", done.load(), files.size());
      std::fflush(stderr);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    std::fprintf(stderr, "\r\033[K");
  } else {
    work();
  }
  for (std::thread& t : pool) t.join();
  for (std::thread& t : reporter_freed) t.join();
  for (size_t i = 0; i < files.size(); ++i)
    if (out_of_memory[i])
      out[i] = unreadable(files[i], Error{"out of memory: this file needs more memory than the machine gives this "
                                          "process (fewer --jobs, or a smaller trace)"});

  const RanksReport r = compare_ranks(std::move(out));
  const std::string text = args.has("json") ? to_json(r) + "\n" : to_text(r, rows);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (std::fflush(stdout) != 0) return 1;
  return r.readable ? 0 : 1;
}

const RegisterVerb kRegister({
    "ranks",
    "compare the ranks of one job: per-rank peaks, the outliers and what they hold that the others do not",
    "usage: allocscope ranks FILE|DIR... [--json] [--jobs N] [--rows N] [--sites N]\n\n"
    "One row per file (a snapshot, or the output of `allocscope summary --json` saved as .json), on the device\n"
    "the rank used (most trace events): peak and final allocated and reserved bytes. A rank is an outlier on a\n"
    "measure when its modified z-score 0.6745*|x - median|/MAD is above 3.5 (MAD: the median absolute deviation\n"
    "over all ranks) and it is more than 5% from the median; three or more readable ranks are needed. For each\n"
    "outlier, the sites (deepest user frame, by its text) alive at its peak whose bytes differ most from the\n"
    "median of the ranks that are not outliers at the same site (of all the other ranks when every rank is one).\n"
    "The rank number comes from the file's name (rank3, rank_3, RANK-3, r3).\n"
    "A directory stands for its .pickle, .pickle.gz, .pkl and .json files (PyTorch's X.torch.pickle left beside a\n"
    "merged X.pickle by `record` is inside it, so it is skipped). Unreadable files are listed, not fatal; a rank\n"
    "that two files claim is said.\n\n"
    "Files are summarised in parallel, one snapshot per worker at a time, so memory stays bounded for thousands.\n"
    "For jobs across many machines, run `allocscope summary --json --top 20 RANK_FILE > rankN.json` where each\n"
    "snapshot is (from the job's launcher: a Slurm array, torchrun, Ray tasks), gather the .json files and run\n"
    "`allocscope ranks DIR` on them: the same answer without moving the snapshots (docs/cli.md).\n\n"
    "  --json      every row, the medians and the verdicts as one JSON object (the viewer's Ranks view opens it)\n"
    "  --jobs N    worker threads (default: the cores this process may use: its CPU affinity and CPU quota)\n"
    "  --rows N    rows of the text table (default 20: outliers first, then by rank)\n"
    "  --sites N   sites kept per rank at its peak (default 20)\n\n"
    "examples:\n"
    "  allocscope ranks snapshots/                    every rank file in a directory\n"
    "  allocscope ranks rank*.pickle.gz --json > ranks.json\n",
    run_ranks,
    18,
});

}  // namespace
}  // namespace allocscope::cli
