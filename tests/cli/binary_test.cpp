// The built `allocscope` binary: help for every verb, one-line errors with non-zero exits on bad input.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "allocscope/answers.h"
#include "allocscope/frame_filter.h"
#include "allocscope/loader.h"
#include "allocscope/pickle.h"
#include "allocscope/writer.h"
#include "synthetic.h"
#include "test_util.h"

namespace {

const char* const kVerbs[] = {"stats", "trace", "segments", "memory", "compare"};

TEST(Binary, TopLevelHelpListsEveryVerb) {
  const auto r = clitest::run_cli({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* verb : kVerbs) EXPECT_NE(r.out.find(std::string("\n  ") + verb + " "), std::string::npos) << verb;
}

TEST(Binary, EachVerbHasUsage) {
  for (const char* verb : kVerbs) {
    const auto r = clitest::run_cli({verb, "--help"});
    EXPECT_EQ(r.exit_code, 0) << verb;
    EXPECT_EQ(r.out.rfind(std::string("usage: allocscope ") + verb, 0), 0u) << r.out;
    EXPECT_NE(r.out.find("_memory_viz"), std::string::npos) << verb;
  }
}

// Every option an answer takes is named in its verb's --help: whatif's help once listed only --batch and --seq
// while it took ten changes more, so a user reading it could not find --checkpoint or --accumulate.
TEST(Binary, EachAnswersHelpNamesEveryOptionItTakes) {
  for (const std::string& verb : allocscope::answer_names()) {
    const allocscope::AnswerSpec* spec = allocscope::answer_spec(verb);
    ASSERT_NE(spec, nullptr) << verb;
    const auto r = clitest::run_cli({verb, "--help"});
    EXPECT_EQ(r.exit_code, 0) << verb;
    EXPECT_EQ(r.out.rfind("usage: allocscope " + verb, 0), 0u) << r.out;
    std::vector<std::string> options = spec->switches;
    options.insert(options.end(), spec->value_options.begin(), spec->value_options.end());
    for (const std::string& o : options) {
      if (o == "to" && verb == "whatif") continue;  // --to-batch/--to-seq's short form, named with them
      EXPECT_NE(r.out.find("--" + o), std::string::npos) << verb << " --help does not name --" << o;
    }
  }
}

// One line on stderr, nothing on stdout, a non-zero exit.
void expect_one_line_error(const clitest::RunResult& r, const std::string& what) {
  EXPECT_NE(r.exit_code, 0) << what;
  EXPECT_EQ(r.out, "") << what;
  ASSERT_FALSE(r.err.empty()) << what;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << what << ": " << r.err;
  EXPECT_EQ(r.err.rfind("allocscope: ", 0), 0u) << r.err;
}

TEST(Binary, TruncatedPickleNamesTheByteOffset) {
  const std::string whole = clitest::read_text(clitest::snapshot_path("linear_seed"));
  ASSERT_GT(whole.size(), 1000u);
  const std::string cut = clitest::temp_path("truncated.pickle");
  clitest::write_bytes(cut, whole.substr(0, whole.size() / 2));
  for (const char* verb : {"stats", "trace", "segments", "memory"}) {
    const auto r = clitest::run_cli({verb, cut});
    expect_one_line_error(r, verb);
    EXPECT_NE(r.err.find(cut), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("at byte "), std::string::npos) << r.err;
  }
  const auto r = clitest::run_cli({"compare", clitest::snapshot_path("linear_seed"), cut});
  expect_one_line_error(r, "compare");
  EXPECT_NE(r.err.find("at byte "), std::string::npos) << r.err;
}

TEST(Binary, TruncatedGzipFails) {
  const std::string whole = clitest::read_text(clitest::snapshot_path("gpt2_cpp"));
  const std::string cut = clitest::temp_path("truncated.pickle.gz");
  clitest::write_bytes(cut, whole.substr(0, whole.size() / 2));
  const auto r = clitest::run_cli({"stats", cut});
  expect_one_line_error(r, "truncated gzip");
  EXPECT_EQ(r.err.find("inflated"), std::string::npos) << r.err;  // the .gz's own offset: where it ends
}

// A snapshot truncated by another process while the CLI has it mapped (a job dumping its snapshot again to the same
// path): the kernel's SIGBUS killed the process, exit 135 and no answer. It is one line naming the file and the byte,
// exit 1. truncate_on_map.cpp truncates the file to 4 KB the moment it is mapped, on each of the loader's mapped
// paths: a small pickle (faulted in at once), a .gz (inflated from the mapping), a pickle over 64 MB (its entries
// decoded ahead on a second core; on one core it is read with pread, which reports a short read itself).
// The environment that preloads `library` into the CLI, with its own `setting`. ASan refuses a library preloaded
// before its own unless told.
std::vector<std::string> preloading_env(const char* library, const std::string& setting) {
  const char* asan = std::getenv("ASAN_OPTIONS");
  return {std::string("LD_PRELOAD=") + library, setting,
          "ASAN_OPTIONS=" + std::string(asan ? asan : "") + (asan && *asan ? ":" : "") + "verify_asan_link_order=0"};
}

// Preloads truncate_on_map.cpp, aimed at `path` (canonical, as /proc/self/fd names it).
std::vector<std::string> truncating_env(const std::string& path) {
  return preloading_env(ALLOCSCOPE_TRUNCATE_ON_MAP, "ALLOCSCOPE_TEST_TRUNCATE=" + path);
}

TEST(Binary, ASnapshotTruncatedWhileMappedIsAnErrorNotACrash) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"small.pickle", clitest::read_text(clitest::snapshot_path("resnet50_train"))},
      {"small.pickle.gz", clitest::read_text(clitest::snapshot_path("gpt2_cpp"))}};
  if (std::thread::hardware_concurrency() >= 2)
    cases.emplace_back("big.pickle", clitest::read_golden(clitest::snapshot_path("gpt2_big_1M")));
  for (auto& [leaf, bytes] : cases) {
    ASSERT_GT(bytes.size(), 8192u) << leaf;  // so that 4 KB is well short of it
    const std::string written = clitest::temp_path(leaf);
    clitest::write_bytes(written, bytes);
    bytes.clear();
    bytes.shrink_to_fit();
    const std::string path = std::filesystem::canonical(written).string();  // as /proc/self/fd names it
    const auto r = clitest::run_cli({"summary", path}, "/dev/null", truncating_env(path));
    EXPECT_EQ(std::filesystem::file_size(path), 4096u) << leaf << ": the file was not truncated";
    expect_one_line_error(r, leaf);
    EXPECT_EQ(r.exit_code, 1) << leaf;
    EXPECT_NE(r.err.find(path + ": the file got shorter while it was read: byte "), std::string::npos) << r.err;
    std::filesystem::remove(path);
  }
}

// `ranks` reads its files instead of mapping them: one rank's file rewritten by its job during a run over a
// thousand must be that rank's error row, not a SIGBUS that ends the run. truncate_on_map.cpp truncates rank 1's
// copy the moment anything maps it; read, it is untouched and both ranks are answered.
TEST(Binary, RanksNeverMapsItsFiles) {
  const std::string dir = std::filesystem::path(clitest::temp_path("ranks_unmapped")).string();
  std::filesystem::create_directory(dir);
  for (const char* name : {"ddp_rank0", "ddp_rank1"})
    std::filesystem::copy_file(clitest::snapshot_path(name), dir + "/" + name + ".pickle");
  const std::string rank1 = std::filesystem::canonical(dir + "/ddp_rank1.pickle").string();
  const auto size = std::filesystem::file_size(rank1);
  ASSERT_GT(size, 8192u);
  for (const char* jobs : {"1", "2"}) {
    const auto r = clitest::run_cli({"ranks", "--jobs", jobs, "--json", dir}, "/dev/null", truncating_env(rank1));
    EXPECT_EQ(r.exit_code, 0) << jobs << " job(s): " << r.err;
    EXPECT_EQ(std::filesystem::file_size(rank1), size) << jobs << " job(s): rank 1's file was mapped";
    EXPECT_NE(r.out.find("\"files\":2,\"readable\":2,"), std::string::npos) << r.out;
  }
  std::filesystem::remove_all(dir);
}

// How many threads a run of the CLI starts, counted by count_threads.cpp preloaded into it.
int threads_started(const std::vector<std::string>& args) {
  const std::string count = clitest::temp_path("threads_started");
  const auto r =
      clitest::run_cli(args, "/dev/null", preloading_env(ALLOCSCOPE_COUNT_THREADS, "ALLOCSCOPE_TEST_THREADS=" + count));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string text = clitest::read_text(count);
  std::filesystem::remove(count);
  return text.empty() ? -1 : std::stoi(text);
}

// `ranks` runs one worker per core, so a worker's load and analyses stay on its own thread (SingleThreaded): two
// workers once started four threads a file besides (the inflater, the analyses' helpers), which took turns with the
// other worker on the same cores. A lone worker keeps the free core. A small file starts no thread at all: the
// thread would cost more than the little work it takes over (1,000 small ranks: 1.98 -> 1.54 s on one worker).
TEST(Binary, RanksWorkersStartNoThreadsOfTheirOwn) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "one core: nothing starts a thread";
  const std::string dir = std::filesystem::path(clitest::temp_path("ranks_threads")).string();
  std::filesystem::create_directory(dir);
  const std::string big = clitest::snapshot_path("gpt2_big_1M");  // 12 MB of .gz, 1M events
  for (const char* name : {"/rank0.pickle.gz", "/rank1.pickle.gz"}) std::filesystem::copy_file(big, dir + name);
  // Alone, the big file's load and analyses start threads, which is how we know the counter sees them.
  EXPECT_GE(threads_started({"summary", dir + "/rank0.pickle.gz"}), 2);
  EXPECT_GE(threads_started({"ranks", "--jobs", "1", "--json", dir + "/rank0.pickle.gz"}), 2);
  // Two workers: the second worker is the one thread started.
  EXPECT_EQ(threads_started({"ranks", "--jobs", "2", "--json", dir}), 1);
  // Small files: none, on one device or several (7,923 events on three GPUs).
  EXPECT_EQ(threads_started({"summary", clitest::snapshot_path("gpt2_cpp")}), 0);
  EXPECT_EQ(threads_started({"summary", clitest::snapshot_path("external/pt28_4dev_expandable_oom")}), 0);
  EXPECT_EQ(threads_started({"ranks", "--jobs", "1", "--json", clitest::snapshot_path("ddp_rank0"),
                             clitest::snapshot_path("ddp_rank1")}),
            0);
  std::filesystem::remove_all(dir);
}

// The cores are the ones this process may run on (its affinity mask: `taskset`, a Slurm allocation), not the
// machine's: `ranks` on 4 CPUs of a 128-core node started 128 workers, 128 snapshots held at once. Run on one CPU,
// the big file's load and analyses, and `ranks`' default workers, start no thread. (The test sets its own mask,
// which the CLI it starts inherits, and gives it back.)
TEST(Binary, OneCpuOfTheMaskStartsNoThreads) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  if (CPU_COUNT(&all) < 2) GTEST_SKIP() << "one CPU already";
  const std::string dir = std::filesystem::path(clitest::temp_path("one_cpu")).string();
  std::filesystem::create_directory(dir);
  const std::string big = clitest::snapshot_path("gpt2_big_1M");
  for (const char* name : {"/rank0.pickle.gz", "/rank1.pickle.gz"}) std::filesystem::copy_file(big, dir + name);
  EXPECT_GE(threads_started({"summary", dir + "/rank0.pickle.gz"}), 2);  // with the whole mask: threads
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  const int summary = threads_started({"summary", dir + "/rank0.pickle.gz"});
  const int ranks = threads_started({"ranks", "--json", dir});
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(summary, 0);
  EXPECT_EQ(ranks, 0);
  std::filesystem::remove_all(dir);
}

// A .gz that inflates into a broken pickle: the offset counts the inflated bytes, and says so (it read as the .gz
// file's byte, where a reader would look). The gzip's own errors keep the file's offsets.
TEST(Binary, AnErrorInsideAGzipSaysItsOffsetIsTheInflatedPickles) {
  const std::string plain = clitest::read_text(clitest::snapshot_path("oom"));
  ASSERT_GT(plain.size(), 4000u);
  std::string cut = plain;
  cut.replace(3000, 50, std::string(50, '\xff'));  // opcode 0xff at byte 3000, an opcode's place in this file
  auto gz = allocscope::gzip({reinterpret_cast<const uint8_t*>(cut.data()), cut.size()});
  ASSERT_TRUE(gz.ok());
  const std::string gz_path = clitest::temp_path("broken.pickle.gz"), plain_path = clitest::temp_path("broken.pickle");
  clitest::write_bytes(gz_path, std::string(gz->begin(), gz->end()));
  clitest::write_bytes(plain_path, cut);
  const auto from_gz = clitest::run_cli({"summary", gz_path}), from_plain = clitest::run_cli({"summary", plain_path});
  expect_one_line_error(from_gz, "summary of a .gz of a broken pickle");
  EXPECT_NE(from_gz.err.find(" of the inflated pickle: "), std::string::npos) << from_gz.err;
  EXPECT_EQ(from_plain.err.find("inflated"), std::string::npos) << from_plain.err;
  // The same byte, named the same way apart from the label.
  const size_t at = from_plain.err.find("at byte ");
  ASSERT_NE(at, std::string::npos) << from_plain.err;
  const std::string number = from_plain.err.substr(at, from_plain.err.find(':', at) - at);
  EXPECT_NE(from_gz.err.find(number + " of the inflated pickle"), std::string::npos) << from_gz.err;
}

TEST(Binary, NotASnapshot) {
  const std::string path = clitest::temp_path("notes.txt");
  clitest::write_bytes(path, "hello, this is not a pickle\n");
  expect_one_line_error(clitest::run_cli({"memory", path}), "text file");
  expect_one_line_error(clitest::run_cli({"stats", clitest::temp_path("missing.pickle")}), "missing file");
  std::remove(path.c_str());
}

// Issue 40: bad input said in words a user acts on, never in pickle opcodes, and never a success. Text and CSV say
// they are text (their bytes are opcodes too: 'h' is BINGET, and the error was about memo slot 101); a pickle that is
// not a snapshot exits 1 (`pickle.dump({'a': [1, 2, 3]})` read as an empty snapshot, exit 0); a missing file says
// why; an empty real snapshot's summary explains itself instead of printing zeros.
TEST(Binary, BadInputSaysWhatItIs) {
  struct Case {
    const char* leaf;
    std::string bytes;
    const char* says;
  };
  const Case cases[] = {
      {"notes.txt", "hello, this is not a pickle\n", "a text file, not a pickle: it begins \"hello, this is not a pickle\""},
      {"table.csv", "step,bytes\n1,100\n2,200\n", "CSV text, not a pickle: it begins \"step,bytes\""},
      // pickle.dumps({'a': [1, 2, 3]}, protocol=2) and pickle.dumps([1, 2, 3], protocol=4)
      {"dict.pickle", std::string("\x80\x02}q\x00X\x01\x00\x00\x00" "aq\x01]q\x02(K\x01K\x02K\x03" "es.", 26),
       "a pickle, but not a memory snapshot: a dict with the key(s) 'a'"},
      {"list.pickle", std::string("\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00]\x94(K\x01K\x02K\x03" "e.", 22),
       "a pickle, but not a memory snapshot: it holds a list of int"},
  };
  for (const Case& c : cases) {
    const std::string path = clitest::temp_path(c.leaf);
    clitest::write_bytes(path, c.bytes);
    for (const char* verb : {"summary", "peak", "stats"}) {
      const auto r = clitest::run_cli({verb, path});
      expect_one_line_error(r, c.leaf);
      EXPECT_EQ(r.exit_code, 1) << c.leaf;
      EXPECT_NE(r.err.find(c.says), std::string::npos) << verb << " " << c.leaf << ": " << r.err;
      EXPECT_EQ(r.err.find("opcode"), std::string::npos) << r.err;
    }
    std::remove(path.c_str());
  }
  const auto missing = clitest::run_cli({"summary", clitest::temp_path("missing.pickle")});
  expect_one_line_error(missing, "missing file");
  EXPECT_NE(missing.err.find("No such file or directory"), std::string::npos) << missing.err;
  const auto empty = clitest::run_cli({"summary", clitest::snapshot_path("external/pt26_empty")});
  EXPECT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_NE(empty.out.find("It holds no allocations"), std::string::npos) << empty.out;
}

// A page written by PyTorch's trace_plot or segment_plot (tests/fixtures/pages, PyTorch 2.11) is the snapshot it
// carries: the drop-ins print what PyTorch prints for that snapshot, from a file, gzipped, or on stdin. A torch.save
// zip is named as one.
TEST(Binary, PyTorchsPagesOpenAsTheirSnapshot) {
  const std::string pages = clitest::fixtures_dir() + "/pages/";
  for (const char* page : {"linear_seed.trace_plot.html", "linear_seed.segment_plot.html"}) {
    const auto r = clitest::run_cli({"stats", pages + page});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, clitest::read_text(clitest::expected_path("linear_seed", "stats.txt"))) << page;
  }
  const auto gz = clitest::run_cli({"segments", pages + "gpt2_cpp.trace_plot.html.gz"});
  ASSERT_EQ(gz.exit_code, 0) << gz.err;
  EXPECT_EQ(gz.out, clitest::read_text(clitest::expected_path("gpt2_cpp", "segments.folded")));
  const auto piped = clitest::run_cli({"trace", "-"}, pages + "expandable_segments.trace_plot.html");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  const std::string golden = clitest::read_text(clitest::expected_path("expandable_segments", "trace.txt"));
  EXPECT_EQ(piped.out.substr(0, piped.out.rfind("TOTAL MEM")), golden.substr(0, golden.rfind("TOTAL MEM")));
  const std::string zip = clitest::temp_path("snapshot.pt");
  clitest::write_bytes(zip, std::string("PK\x03\x04", 4) + std::string(200, '\0'));
  const auto refused = clitest::run_cli({"summary", zip});
  expect_one_line_error(refused, "torch.save zip");
  EXPECT_NE(refused.err.find("a zip archive (torch.save writes these)"), std::string::npos) << refused.err;
  std::remove(zip.c_str());
}

// A JSON snapshot (Python's json.dump of the snapshot dict, tests/fixtures/json) is the snapshot: the drop-ins print
// what PyTorch prints for its pickle, from a file, gzipped, or on stdin; `ranks` reads a JSON snapshot in a folder
// as a snapshot and an `allocscope summary --json` file beside it as a summary.
TEST(Binary, JsonSnapshotsOpenAsTheirPickle) {
  const std::string json = clitest::fixtures_dir() + "/json/";
  const auto stats = clitest::run_cli({"stats", json + "oom.json"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(stats.out, clitest::read_text(clitest::expected_path("oom", "stats.txt")));
  const auto trace = clitest::run_cli({"trace", "--pytorch-total", "-"}, json + "oom.json");
  ASSERT_EQ(trace.exit_code, 0) << trace.err;
  EXPECT_EQ(trace.out, clitest::read_text(clitest::expected_path("oom", "trace.txt")));
  const auto gz = clitest::run_cli({"segments", json + "ddp_rank0.json.gz"});
  ASSERT_EQ(gz.exit_code, 0) << gz.err;
  EXPECT_EQ(gz.out, clitest::read_text(clitest::expected_path("ddp_rank0", "segments.folded")));

  const std::string dir = clitest::temp_path("ranks_json");
  std::filesystem::create_directory(dir);
  std::filesystem::copy_file(json + "ddp_rank0.json.gz", dir + "/rank0.json.gz");
  std::filesystem::copy_file(json + "oom.json", dir + "/rank1.json");
  const auto summary = clitest::run_cli({"summary", "--json", clitest::snapshot_path("ddp_rank1")});
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  clitest::write_bytes(dir + "/rank2.json", summary.out);
  const auto ranks = clitest::run_cli({"ranks", "--json", dir});
  EXPECT_EQ(ranks.exit_code, 0) << ranks.err;
  EXPECT_NE(ranks.out.find("\"files\":3,\"readable\":3,"), std::string::npos) << ranks.out;
  std::filesystem::remove_all(dir);

  const std::string trace_events = clitest::temp_path("trace.json");
  clitest::write_bytes(trace_events, "{\"schemaVersion\": 1, \"traceEvents\": [{\"ph\": \"X\"}]}");
  const auto refused = clitest::run_cli({"summary", trace_events});
  expect_one_line_error(refused, "profiler trace");
  EXPECT_NE(refused.err.find("JSON, but not a memory snapshot"), std::string::npos) << refused.err;
  std::remove(trace_events.c_str());
}

// "-" reads the snapshot from stdin, as `_memory_viz.py` allows; gzip is detected there too.
TEST(Binary, DashReadsStdin) {
  const auto plain = clitest::run_cli({"stats", "-"}, clitest::snapshot_path("oom"));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, clitest::read_text(clitest::expected_path("oom", "stats.txt")));
  const auto gz = clitest::run_cli({"segments", "-"}, clitest::snapshot_path("gpt2_cpp"));
  ASSERT_EQ(gz.exit_code, 0) << gz.err;
  EXPECT_EQ(gz.out, clitest::read_text(clitest::expected_path("gpt2_cpp", "segments.folded")));
  const auto empty = clitest::run_cli({"trace", "-"});
  expect_one_line_error(empty, "empty stdin");
  // Every verb that reads a snapshot reads "-" (the answer verbs said "cannot open '-'"), and what the drop-ins read
  // the answers read too.
  const auto summary = clitest::run_cli({"summary", "-", "--json"}, clitest::snapshot_path("oom"));
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_EQ(summary.out.find("\"file\":\"-\""), 1u) << summary.out.substr(0, 80);
  const auto peak = clitest::run_cli({"peak", "-"}, clitest::snapshot_path("gpt2_cpp"));
  EXPECT_EQ(peak.exit_code, 0) << peak.err;
  // A stream that is no snapshot is refused at its first byte, not read until memory runs out (/dev/zero was).
  const auto zero = clitest::run_cli({"summary", "/dev/zero"});
  expect_one_line_error(zero, "at byte 0: not a snapshot");
}

TEST(Binary, BadArguments) {
  expect_one_line_error(clitest::run_cli({"stats"}), "no file");
  expect_one_line_error(clitest::run_cli({"trace", "a", "b"}), "two files");
  expect_one_line_error(clitest::run_cli({"compare", clitest::snapshot_path("oom")}), "one file");
  expect_one_line_error(clitest::run_cli({"segments", "--bogus", clitest::snapshot_path("oom")}), "unknown option");
  expect_one_line_error(clitest::run_cli({"memory", clitest::snapshot_path("oom"), "-o"}), "-o without a file");
}

// An audit found a directory crashing the loader (its "size" became one allocation) and a pipe refused.
TEST(Binary, ADirectoryIsRefusedAndAPipeIsRead) {
  const auto dir = clitest::run_cli({"summary", std::filesystem::path(clitest::temp_path("x")).parent_path().string()});
  expect_one_line_error(dir, "directory");
  EXPECT_NE(dir.err.find("a directory, not a snapshot file"), std::string::npos) << dir.err;
  // /dev/stdin fed by a pipe (a FIFO): neither mapped nor sized, read to its end.
  const std::string out = clitest::temp_path("piped.txt");
  const std::string cmd = "cat " + clitest::snapshot_path("oom") + " | " + ALLOCSCOPE_CLI + " stats /dev/stdin >" + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(clitest::read_text(out), clitest::read_text(clitest::expected_path("oom", "stats.txt")));
  std::filesystem::remove(out);
}

// A full disk or a closed pipe must not leave a truncated answer with exit code 0: a large output goes past stdio's
// buffer straight to write(), whose error the verbs' final flush never saw.
TEST(Binary, AFailedWriteIsAnError) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const std::string err = clitest::temp_path("err.txt");
  auto run = [&](const std::string& args) {
    const std::string cmd = std::string(ALLOCSCOPE_CLI) + " " + args + " >/dev/full 2>" + err;
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  const std::string oom = clitest::snapshot_path("oom"), leak = clitest::snapshot_path("transformer_leak");
  for (const std::string& args : {"export --json " + oom, "trace " + oom, "summary " + oom, "leaks " + leak}) {
    EXPECT_EQ(run(args), 1) << args;
    EXPECT_NE(clitest::read_text(err).find("writing the output failed"), std::string::npos) << args;
  }
  std::filesystem::remove(err);
}

// An audit's find: `trace` prints events it does not format as their dict, without the keys the model does not keep
// (a newer PyTorch's). It says so on stderr, naming them, rather than differing from PyTorch in silence.
TEST(Binary, TraceSaysWhichEntryKeysItLeavesOut) {
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  const std::string path = clitest::temp_path("new_key.pickle");
  const std::string make = "python3 -c \"import pickle; pickle.dump({'segments': [], 'device_traces': [[{'action': "
                           "'segment_map', 'addr': 4096, 'size': 2097152, 'stream': 0, 'time_us': 5, 'frames': [], "
                           "'new_field_2_12': 'x'}]]}, open('" + path + "', 'wb'))\"";
  ASSERT_EQ(std::system(make.c_str()), 0);
  const auto r = clitest::run_cli({"trace", path});
  std::filesystem::remove(path);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("{'action': 'segment_map', 'addr': 4096"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("keys allocscope does not keep ('new_field_2_12', in entries or frames)"), std::string::npos)
      << r.err;
  const auto plain = clitest::run_cli({"trace", clitest::snapshot_path("oom")});
  EXPECT_EQ(plain.err.find("does not keep"), std::string::npos) << plain.err;
  // Frames' keys too (PyTorch >= 2.10's augment_with_fx_traces adds fx_node_op ...), and actions it does not know:
  // each row prints its own, as PyTorch's trace does (two printed alike as 'unknown', with a note, until each row
  // kept which one it had; hostile_valid/unknown_actions has PyTorch's output for such a file).
  const std::string fx = clitest::temp_path("fx_frames.pickle");
  const std::string make_fx = "python3 -c \"import pickle; f = {'name': 'mm', 'filename': 'm.py', 'line': 3, "
                              "'fx_node_op': 'call_function'}; pickle.dump({'segments': [], 'device_traces': "
                              "[[{'action': 'segment_map', 'addr': 4096, 'size': 2097152, 'stream': 0, 'time_us': 5, "
                              "'frames': [f]}, {'action': 'a_new_one', 'addr': 1, 'size': 2}, {'action': "
                              "'another_new_one', 'addr': 1, 'size': 2}]]}, open('" + fx + "', 'wb'))\"";
  ASSERT_EQ(std::system(make_fx.c_str()), 0);
  const auto f = clitest::run_cli({"trace", fx});
  std::filesystem::remove(fx);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_NE(f.err.find("('fx_node_op', in entries or frames)"), std::string::npos) << f.err;
  EXPECT_NE(f.out.find("{'action': 'a_new_one', 'addr': 1, 'size': 2}"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("{'action': 'another_new_one', 'addr': 1, 'size': 2}"), std::string::npos) << f.out;
  EXPECT_EQ(f.err.find("print as 'unknown'"), std::string::npos) << f.err;
}

// PyTorch's argparse takes "-ox.svg", "--out x.svg" and "--output=x.svg" for -o; scripts written for it must work.
TEST(Binary, OutputOptionAsArgparseSpellsIt) {
  const std::string oom = clitest::snapshot_path("oom");
  for (const std::vector<std::string>& spelled : std::vector<std::vector<std::string>>{
           {"-o", "A"}, {"-oA"}, {"--out", "A"}, {"--output=A"}, {"--outp=A"}}) {
    const std::string svg = clitest::temp_path("spelled.svg");
    std::vector<std::string> args = {"segments", oom};
    for (std::string a : spelled) {
      if (const size_t at = a.find('A'); at != std::string::npos) a.replace(at, 1, svg);
      args.push_back(a);
    }
    const auto r = clitest::run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << spelled[0] << r.err;
    EXPECT_EQ(clitest::read_text(svg).rfind("<?xml", 0), 0u) << spelled[0];
    std::filesystem::remove(svg);
  }
  const auto bogus = clitest::run_cli({"memory", "--bogus", oom});
  expect_one_line_error(bogus, "--bogus");
  EXPECT_NE(bogus.err.find("unknown option --bogus"), std::string::npos) << bogus.err;
}

TEST(Binary, UnwritableOutput) {
  const auto r = clitest::run_cli({"segments", clitest::snapshot_path("oom"), "-o", "/nonexistent-dir/x.svg"});
  expect_one_line_error(r, "unwritable -o");
}

}  // namespace

// Where PyTorch's own _memory_viz stops (see tests/fixtures/external/PROVENANCE.md), we print what the file holds
// and say on stderr why PyTorch would not.
TEST(CliBinary, StatsOfSegmentsWhoseBlocksDoNotAddUpPrintsAndSaysSo) {
  const auto r = clitest::run_cli({"stats", clitest::snapshot_path("external/synthetic_snapviewer")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("segments: 5\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("5 of 5 segments' blocks do not add up"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("AssertionError"), std::string::npos) << r.err;
}

TEST(CliBinary, TraceOfABareListOfSegmentsIsEmptyAndSaysWhy) {
  const auto r = clitest::run_cli({"trace", clitest::snapshot_path("external/listonly_segments")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("bare list of segments"), std::string::npos) << r.err;
}

// Running out of memory anywhere (the parser; the thread inflating or reading ahead of it; the per-device analyses;
// a rank's worker) is an answer with exit code 1, never an abort: exceptions leaving a thread, or leaving the parser
// while the reader still ran, called std::terminate (limits of 60-100 MB aborted `summary` of both files). Address
// space limits from far too little to enough, over a .gz, a large plain pickle (read on a second thread), and
// `ranks`, which answers the other files when one does not fit.
TEST(Binary, OutOfMemoryIsAnAnswerAtEveryLimit) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer reserves terabytes of address space: ulimit -v cannot apply";
#endif
  const std::string gz = clitest::snapshot_path("gpt2_big_1M"), small = clitest::snapshot_path("ddp_rank0");
  auto raw = allocscope::gunzip(allocscope::read_file(gz).value());
  ASSERT_TRUE(raw.ok());
  const std::string plain = clitest::temp_path("1M.pickle");
  clitest::write_bytes(plain, std::string(raw->begin(), raw->end()));
  const std::string out = clitest::temp_path("out.txt"), err = clitest::temp_path("err.txt");
  int out_of_memory = 0;
  for (int mb = 40; mb <= 136; mb += 16) {
    for (const std::string& args : {"summary " + gz, "summary " + plain, "ranks --jobs 2 " + gz + " " + small}) {
      const std::string cmd = "ulimit -v " + std::to_string(mb * 1024) + " && exec " + ALLOCSCOPE_CLI + " " + args +
                              " >" + out + " 2>" + err;
      const int status = std::system(cmd.c_str());
      const std::string what = args + " at " + std::to_string(mb) + " MB: " + clitest::read_text(err);
      ASSERT_TRUE(WIFEXITED(status)) << what;
      const int code = WEXITSTATUS(status);
      EXPECT_TRUE(code == 0 || code == 1) << what;
      const bool said = (clitest::read_text(err) + clitest::read_text(out)).find("out of memory") != std::string::npos;
      if (code == 1) {
        EXPECT_TRUE(said) << what;
      }
      out_of_memory += said;
    }
  }
  EXPECT_GT(out_of_memory, 0) << "no limit was low enough to test";
  for (const std::string& f : {plain, out, err}) std::filesystem::remove(f);
}

// On a terminal, text from a snapshot cannot drive it: control characters, C1 controls and bidirectional overrides
// are written as escapes by every verb (an audit: `leaks` printed annotation names raw, `memory` and `segments`
// frame names; U+009B and U+202E passed every verb but `trace`). Piped, the drop-in verbs keep PyTorch's bytes.
// The terminal is a pseudo-terminal from util-linux's `script`.
TEST(Binary, ATerminalGetsSnapshotStringsEscaped) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "no `script` to give a terminal";
  clitest::SnapshotBuilder b;
  const std::string evil = "f\x1b]0;PWNED\x07\x1b[2J\xc2\x9b" "31m\xe2\x80\xaegnp";
  const allocscope::StackId st = b.stack({{evil, "train.py", 3}});
  b.segment(0x100000, 0, 2 << 20, {{2 << 20, 2 << 20, allocscope::BlockState::kActiveAllocated, st}});
  b.device();
  for (int k = 0; k < 4; ++k) {
    b.annotate("Optimizer.step#" + evil);
    b.event(allocscope::Action::kAlloc, 0x100000 + k * 4096, 4096, st);
  }
  const std::string snap = clitest::temp_path("evil.pickle"), out = clitest::temp_path("tty.txt");
  ASSERT_TRUE(allocscope::write_snapshot_file(b.s, snap).ok());
  for (const char* verb : {"memory", "leaks", "summary", "peak"}) {
    const std::string cmd = "script -qc '" + std::string(ALLOCSCOPE_CLI) + " " + verb + " " + snap + "' /dev/null >" +
                            out + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << verb;
    const std::string tty = clitest::read_text(out);
    EXPECT_EQ(tty.find("\x1b]0;"), std::string::npos) << verb;
    EXPECT_EQ(tty.find("\x1b[2J"), std::string::npos) << verb;
    EXPECT_EQ(tty.find("\xc2\x9b"), std::string::npos) << verb;
    EXPECT_EQ(tty.find("\xe2\x80\xae"), std::string::npos) << verb;
    EXPECT_NE(tty.find("\\x1b"), std::string::npos) << verb << ": " << tty;
  }
  // The frame's C1 and bidi characters as \u escapes (frame texts' C0 controls are escaped everywhere already).
  const std::string cmd = "script -qc '" + std::string(ALLOCSCOPE_CLI) + " memory " + snap + "' /dev/null >" + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string tty = clitest::read_text(out);
  EXPECT_NE(tty.find("\\u009b31m\\u202egnp"), std::string::npos) << tty;
  // Piped, `memory` is PyTorch's output: the name's bytes as they are.
  const auto piped = clitest::run_cli({"memory", snap});
  EXPECT_NE(piped.out.find(evil), std::string::npos) << piped.out;
  std::filesystem::remove(snap);
  std::filesystem::remove(out);
}

// `record` checks its options with the capture library's own parser before the job runs: a value the library would
// refuse inside the job's cuInit (where it can only print a line and record nothing) stops here, and the job never
// starts. The library need not be built for this.
TEST(Binary, RecordRefusesOptionsBeforeTheJobRuns) {
  const std::string marker = clitest::temp_path("record_job_ran");
  const std::string job = "touch " + marker;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max-entries", "abc"}, "ALLOCSCOPE_MAX_ENTRIES"},
      {{"--max-entries", "1000000000000"}, "ALLOCSCOPE_MAX_ENTRIES"},
      {{"--max-entries="}, "--max-entries needs"},
      {{"--max-frames", "0"}, "ALLOCSCOPE_MAX_FRAMES"},
      {{"--dump-signal", "9"}, "ALLOCSCOPE_DUMP_SIGNAL"},
      {{"--dump-signal", "KILL"}, "ALLOCSCOPE_DUMP_SIGNAL"},
      {{"-o", "--"}, "-o needs a path"},
  };
  for (const auto& [opts, says] : cases) {
    std::vector<std::string> args = {"record"};
    args.insert(args.end(), opts.begin(), opts.end());
    for (const char* a : {"--", "sh", "-c"}) args.push_back(a);
    args.push_back(job);
    const auto r = clitest::run_cli(args);
    EXPECT_EQ(r.exit_code, 1) << opts[0];
    EXPECT_NE(r.err.find(says), std::string::npos) << opts[0] << ": " << r.err;
    EXPECT_FALSE(clitest::file_exists(marker)) << opts[0] << ": the job ran";
    std::remove(marker.c_str());
  }
}

// Piped, too, a text answer never carries a snapshot's string raw: an audit found an autograd node's name (the site
// of a stack without user frames), the input file's name, and ranks' file names printed raw, so a newline in them
// forged lines ("FAKE LINE") and ESC, C1, U+2028, U+202E and lone surrogates passed through.
TEST(Binary, TextAnswersEscapeEverySnapshotString) {
  clitest::SnapshotBuilder b;
  const std::string evil = "\nFAKE LINE \r\x1b[2J\xc2\x9b\xe2\x80\xa8\xe2\x80\xae\xed\xb2\x80";
  const allocscope::StackId st =
      b.stack({{"torch::autograd::generated::Evil" + evil + "Backward0::apply(...)", "", 0}});
  b.segment(0x100000, 0, 2 << 20, {{2 << 20, 2 << 20, allocscope::BlockState::kActiveAllocated, st}});
  b.device();
  for (int k = 0; k < 8; ++k) {
    b.annotate("Optimizer.step#Adam.step");
    b.event(allocscope::Action::kAlloc, 0x100000 + k * 4096, 4096, st);
  }
  const std::string dir = clitest::temp_path("evil_names");
  std::filesystem::create_directories(dir);
  const std::string snap = dir + "/rank0" + evil + ".pickle";
  ASSERT_TRUE(allocscope::write_snapshot_file(b.s, snap).ok());
  for (int r = 1; r < 3; ++r) std::filesystem::copy_file(snap, dir + "/rank" + std::to_string(r) + ".pickle");
  auto clean = [&](const std::string& what, const std::string& out) {
    for (const std::string& line : clitest::lines(out)) EXPECT_NE(line.rfind("FAKE", 0), 0u) << what << ": " << out;
    for (const char* raw : {"\r", "\x1b", "\xc2\x9b", "\xe2\x80\xa8", "\xe2\x80\xae", "\xed\xb2\x80"})
      EXPECT_EQ(out.find(raw), std::string::npos) << what << ": " << out;
  };
  for (const char* verb : {"summary", "peak", "categories", "leaks", "oom", "timeline"}) {
    const auto r = clitest::run_cli({verb, snap});
    clean(verb, r.out);
    if (std::string(verb) != "oom") {
      EXPECT_NE(r.out.find("\\x0aFAKE LINE"), std::string::npos) << verb << ": " << r.out;
    }
  }
  clean("diff", clitest::run_cli({"diff", snap, dir + "/rank1.pickle"}).out);
  const auto ranks = clitest::run_cli({"ranks", dir});
  clean("ranks", ranks.out);
  EXPECT_NE(ranks.out.find("rank0\\x0aFAKE LINE"), std::string::npos) << ranks.out;
  clean("whatif", clitest::run_cli({"whatif", snap, "--batch", "2"}).out);
  EXPECT_EQ(allocscope::printable("a\xc2\x85" "b\xe2\x81\xa6" "c\xe2\x80\xa9"), "a\\u0085b\\u2066c\\u2029");
  EXPECT_EQ(allocscope::printable("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");  // other UTF-8 stays
  std::filesystem::remove_all(dir);
}

// A dict without 'action' after real entries in a device trace was refused as "mixes new entries with entries shared
// through the memo" (a differential test's file): it is named for what it is.
TEST(Binary, ATraceDictWithoutActionIsNamed) {
  allocscope::pickle::Writer w;
  w.begin_dict();
  w.key("segments"), w.begin_list(), w.end_list();
  w.key("device_traces"), w.begin_list(), w.begin_list();
  w.begin_dict();
  w.key("action"), w.str("alloc");
  w.key("addr"), w.uinteger(4096);
  w.key("size"), w.uinteger(512);
  w.key("stream"), w.integer(0);
  w.end_dict();
  w.begin_dict();
  w.key("addr"), w.uinteger(8192);
  w.end_dict();
  w.end_list(), w.end_list();
  w.end_dict();
  const auto r = allocscope::load_snapshot(w.finish());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("is a dict with no 'action' key"), std::string::npos) << r.error().message;
}
