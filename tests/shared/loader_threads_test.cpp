// A .gz loads with inflating on a second thread beside the parser (loader.cpp inflate_beside): the same model as
// parsing the inflated bytes, and every way it can stop (a corrupt pickle while inflating goes on, a truncated or
// corrupt gzip stream, the inflated-size limit) is an error with an offset, never a hang. Also run under
// ThreadSanitizer (label "threads").
#include <gtest/gtest.h>

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <new>
#include <thread>

#include "allocscope/loader.h"
#include "allocscope/threads.h"
#include "allocscope/writer.h"
#include "fixtures.h"
#include "util/parallel.h"

namespace allocscope {
namespace {

std::vector<uint8_t> file(const std::string& name) {
  auto f = read_file(testing::fixture(name));
  EXPECT_TRUE(f.ok());
  return f.ok() ? f.value() : std::vector<uint8_t>{};
}

// A file in the temporary directory, removed when the test ends.
struct TempFile {
  std::string path = (std::filesystem::temp_directory_path() / "allocscope_loader_threads_XXXXXX").string();
  TempFile() {
    const int fd = ::mkstemp(path.data());
    if (fd < 0) path.clear();
    else ::close(fd);
  }
  ~TempFile() {
    if (!path.empty()) std::remove(path.c_str());
  }
  bool write(const std::vector<uint8_t>& b) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return static_cast<bool>(out);
  }
};

// `b` with 4 KB of 0xff at `at`: not an opcode, and no string in a snapshot is that long.
std::vector<uint8_t> spoiled(std::vector<uint8_t> b, size_t at) {
  std::fill(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + 4096), 0xff);
  return b;
}
// A load of spoiled(.., at) failed there, with an offset.
void expect_fails_at(const Result<Snapshot>& r, size_t at) {
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().offset, Error::kNoOffset);
  EXPECT_LE(r.error().offset, at + 4096) << r.error().describe();
  EXPECT_GE(r.error().offset + 4096, at) << r.error().describe();
}

// Out of memory on either side of a file's load reaches the caller, the other side stopped first: thrown by the
// spare-time work (on the thread beside the parser) or by the parser's progress report. `slow_parser`: the parser
// sleeps at each report, so that the thread beside it waits and is offered the spare time.
void expect_out_of_memory_reaches_caller(const std::string& path, LoadOptions::Ahead ahead, bool slow_parser) {
  for (const bool beside : {true, false}) {
    LoadOptions failing;
    failing.decode_ahead = ahead;
    std::atomic<int> calls{0};
    if (beside) {
      if (slow_parser)
        failing.progress = [](std::string_view, uint64_t, uint64_t) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        };
      failing.spare_time = [&]() -> bool {
        if (++calls == 3) throw std::bad_alloc();
        return true;
      };
    } else {
      failing.progress = [&](std::string_view phase, uint64_t, uint64_t) {
        if (phase == "parse" && ++calls == 3) throw std::bad_alloc();
      };
    }
    EXPECT_THROW((void)load_snapshot_file(path, failing), std::bad_alloc) << (beside ? "beside" : "parser");
  }
}

TEST(LoaderThreads, GzipEqualsInflatedBytes) {
  for (const char* name : {"gpt2_cpp.pickle.gz", "external/pt26_cs336_fullstep.pickle.gz"}) {
    const std::vector<uint8_t> gz = file(name);
    auto raw = gunzip(gz);
    ASSERT_TRUE(raw.ok());
    auto a = load_snapshot(gz), b = load_snapshot(raw.value());
    ASSERT_TRUE(a.ok()) << a.error().describe();
    ASSERT_TRUE(b.ok()) << b.error().describe();
    EXPECT_EQ(a->events.action, b->events.action) << name;
    EXPECT_EQ(a->events.addr, b->events.addr) << name;
    EXPECT_EQ(a->events.size, b->events.size) << name;
    EXPECT_EQ(a->events.stack, b->events.stack) << name;
    EXPECT_EQ(a->frames.size(), b->frames.size()) << name;
    EXPECT_EQ(a->segments.size(), b->segments.size()) << name;
    EXPECT_EQ(a->source_bytes, b->source_bytes) << name;
  }
}

// Many chunks (a 12 MB .gz inflates to 162 MB = 40 chunks of 4 MB): the queue fills and drains many times.
TEST(LoaderThreads, ManyChunksAndAPickleErrorMidway) {
  const std::vector<uint8_t> gz = file("gpt2_big_1M.pickle.gz");
  auto raw = gunzip(gz);
  ASSERT_TRUE(raw.ok());
  auto whole = load_snapshot(gz);
  ASSERT_TRUE(whole.ok()) << whole.error().describe();
  EXPECT_EQ(whole->events.size_rows(), 1000000u);
  // A bad byte at 100 MB: the parser stops while the inflater still has 60 MB to go.
  const size_t at = 100u << 20;
  auto regz = gzip(spoiled(raw.value(), at), 1);
  ASSERT_TRUE(regz.ok());
  expect_fails_at(load_snapshot(regz.value()), at);
}

// A plain pickle over 64 MB is read from its file on a second thread while this one parses (loader.cpp read_beside,
// where no second core decodes ahead): the same model as parsing its bytes in memory, progress to the last byte,
// and a bad byte early on stops the reader too, with the offset of the bad byte.
TEST(LoaderThreads, LargeFileIsReadBesideTheParser) {
  if (detail::threads_for(2) < 2) GTEST_SKIP() << "one core: read in turn (WithoutASecondCore...)";
  auto raw = gunzip(file("gpt2_big_1M.pickle.gz"));
  ASSERT_TRUE(raw.ok());
  TempFile tmp;
  const std::string& path = tmp.path;
  ASSERT_FALSE(path.empty());
  auto write_file = [&](const std::vector<uint8_t>& b) { return tmp.write(b); };
  ASSERT_TRUE(write_file(raw.value()));
  uint64_t last_done = 0, last_total = 0;
  LoadOptions opt;
  opt.decode_ahead = LoadOptions::Ahead::kNever;  // read beside, not mapped (LargeFileIsMappedAndDecodedAhead)
  opt.progress = [&](std::string_view phase, uint64_t done, uint64_t total) {
    if (phase == "parse") last_done = done, last_total = total;
  };
  // The reading thread's spare time (the CLI faults in heap pages there): offered on that thread, not this one,
  // while it waits for the parser, and a call answering "nothing for now" does not stop later offers.
  std::atomic<uint64_t> spare_calls{0};
  std::atomic<bool> spare_on_parser{false};
  const std::thread::id parser = std::this_thread::get_id();
  opt.spare_time = [&] {
    if (std::this_thread::get_id() == parser) spare_on_parser = true;
    return ++spare_calls % 8 != 0;
  };
  auto from_file = load_snapshot_file(path, opt);
  EXPECT_GT(spare_calls.load(), 8u);
  EXPECT_FALSE(spare_on_parser.load());
  auto from_bytes = load_snapshot(raw.value());
  ASSERT_TRUE(from_file.ok()) << from_file.error().describe();
  ASSERT_TRUE(from_bytes.ok());
  EXPECT_EQ(from_file->events.action, from_bytes->events.action);
  EXPECT_EQ(from_file->events.addr, from_bytes->events.addr);
  EXPECT_EQ(from_file->events.time_us, from_bytes->events.time_us);
  EXPECT_EQ(from_file->events.stack, from_bytes->events.stack);
  EXPECT_EQ(from_file->stacks.size(), from_bytes->stacks.size());
  EXPECT_EQ(from_file->source_bytes, raw->size());
  EXPECT_EQ(last_done, raw->size());
  EXPECT_EQ(last_total, raw->size());

  // An exception leaving the reading thread, or leaving the parser while the reader still ran, ended the process
  // with std::terminate.
  expect_out_of_memory_reaches_caller(path, LoadOptions::Ahead::kNever, /*slow_parser=*/false);

  const size_t at = 20u << 20;  // in the 6th chunk: the reader is still ahead, with most of the file to go
  ASSERT_TRUE(write_file(spoiled(raw.value(), at)));
  LoadOptions beside;
  beside.decode_ahead = LoadOptions::Ahead::kNever;
  expect_fails_at(load_snapshot_file(path, beside), at);
}

// The threads of this process now (a test's own work starts none).
size_t threads_now() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Without a second core (one CPU, or a SingleThreaded: `ranks`' workers), a plain pickle over 64 MB is read, and a
// .gz inflated, in turn with the parse through the same chunks: the same model, progress to the last byte, a bad
// byte's offset, and no thread started (counted in /proc/self/task at every progress report).
TEST(LoaderThreads, WithoutASecondCoreFilesAreReadAndInflatedInTurn) {
  const std::vector<uint8_t> gz = file("gpt2_big_1M.pickle.gz");
  auto raw = gunzip(gz);
  ASSERT_TRUE(raw.ok());
  TempFile tmp;
  ASSERT_FALSE(tmp.path.empty());
  ASSERT_TRUE(tmp.write(raw.value()));
  auto from_bytes = load_snapshot(raw.value());
  ASSERT_TRUE(from_bytes.ok());

  const SingleThreaded one;
  const size_t before = threads_now();
  size_t most = 0;
  uint64_t parsed = 0, inflated = 0;
  LoadOptions opt;
  opt.progress = [&](std::string_view phase, uint64_t done, uint64_t) {
    most = std::max(most, threads_now());
    (phase == "parse" ? parsed : inflated) = done;
  };
  opt.spare_time = [] {
    ADD_FAILURE() << "no reading thread to give spare time to";
    return false;
  };
  for (const std::string& path : {tmp.path, testing::fixture("gpt2_big_1M.pickle.gz")}) {
    SCOPED_TRACE(path);
    most = 0, parsed = inflated = 0;
    auto loaded = load_snapshot_file(path, opt);
    ASSERT_TRUE(loaded.ok()) << loaded.error().describe();
    EXPECT_EQ(loaded->events.action, from_bytes->events.action);
    EXPECT_EQ(loaded->events.addr, from_bytes->events.addr);
    EXPECT_EQ(loaded->events.time_us, from_bytes->events.time_us);
    EXPECT_EQ(loaded->events.stack, from_bytes->events.stack);
    EXPECT_EQ(loaded->stacks.size(), from_bytes->stacks.size());
    EXPECT_GT(most, 0u);  // progress was reported
    EXPECT_EQ(most, before);
    if (path == tmp.path) {
      EXPECT_EQ(parsed, raw->size());  // the plain file's parse, to its last byte
    } else {
      EXPECT_EQ(inflated, gz.size());  // the .gz's inflate, to its last byte
    }
  }

  const size_t at = 20u << 20;
  ASSERT_TRUE(tmp.write(spoiled(raw.value(), at)));
  expect_fails_at(load_snapshot_file(tmp.path), at);
}

// With a second core, a plain pickle over 64 MB is mapped instead, and its trace entries are decoded ahead on the
// second core (Reader::decode_ahead, pickle/predecoder.h): the same model as parsing its bytes alone, progress to
// the last byte, the pages behind the parser dropped, an exception on either thread reaching the caller after the
// other stopped, and a bad byte reported at its offset.
TEST(LoaderThreads, LargeFileIsMappedAndDecodedAhead) {
  auto raw = gunzip(file("gpt2_big_1M.pickle.gz"));
  ASSERT_TRUE(raw.ok());
  TempFile tmp;
  ASSERT_FALSE(tmp.path.empty());
  ASSERT_TRUE(tmp.write(raw.value()));
  LoadOptions alone;
  alone.decode_ahead = LoadOptions::Ahead::kNever;
  auto from_bytes = load_snapshot(raw.value(), alone);
  ASSERT_TRUE(from_bytes.ok());

  LoadOptions opt;
  opt.decode_ahead = LoadOptions::Ahead::kAlways;  // whatever the cores: the thread then shares one
  LoadOptions::PickleFacts facts;
  opt.facts = &facts;
  uint64_t last_done = 0, reports = 0;
  const std::thread::id parser = std::this_thread::get_id();
  std::atomic<uint64_t> spare_calls{0};
  std::atomic<bool> spare_on_parser{false};
  opt.progress = [&](std::string_view phase, uint64_t done, uint64_t) {
    if (phase != "parse") return;
    last_done = done;
    // A slow parser now and then, so that the ring fills and the thread is offered the spare time.
    if (++reports % 8 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  opt.spare_time = [&] {
    if (std::this_thread::get_id() == parser) spare_on_parser = true;
    return ++spare_calls % 8 != 0;
  };
  auto from_file = load_snapshot_file(tmp.path, opt);
  ASSERT_TRUE(from_file.ok()) << from_file.error().describe();
  EXPECT_TRUE(write_snapshot(from_file.value()) == write_snapshot(from_bytes.value()));
  EXPECT_EQ(from_file->source_bytes, raw->size());
  EXPECT_EQ(last_done, raw->size());
  EXPECT_GT(facts.ahead_dicts, 0u) << "no entry was decoded ahead";
  EXPECT_GT(spare_calls.load(), 0u);
  EXPECT_FALSE(spare_on_parser.load());

  // The thread decoding ahead is offered spare time only while its ring is full: a slow parser fills it.
  expect_out_of_memory_reaches_caller(tmp.path, LoadOptions::Ahead::kAlways, /*slow_parser=*/true);

  const size_t at = 20u << 20;
  ASSERT_TRUE(tmp.write(spoiled(raw.value(), at)));
  expect_fails_at(load_snapshot_file(tmp.path, opt), at);
}

// The same for a .gz: its inflating thread reports the progress (its spare time comes only when the parser falls
// behind, which this file's timing does not promise).
TEST(LoaderThreads, OutOfMemoryWhileInflatingReachesTheCaller) {
  const std::vector<uint8_t> gz = file("gpt2_big_1M.pickle.gz");
  LoadOptions failing;
  std::atomic<int> calls{0};
  failing.progress = [&](std::string_view phase, uint64_t, uint64_t) {
    if (phase == "inflate" && ++calls == 3) throw std::bad_alloc();
  };
  EXPECT_THROW((void)load_snapshot(gz, failing), std::bad_alloc);
}

TEST(LoaderThreads, BrokenGzipAndLimitsStopBothSides) {
  const std::vector<uint8_t> gz = file("gpt2_cpp.pickle.gz");
  // Truncated: the inflater stops early; the parser then finds the pickle cut.
  std::vector<uint8_t> cut(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2));
  EXPECT_FALSE(load_snapshot(cut).ok());
  // Corrupt deflate data in the middle.
  std::vector<uint8_t> corrupt = gz;
  for (size_t i = gz.size() / 3; i < gz.size() / 3 + 64; ++i) corrupt[i] ^= 0x5a;
  auto c = load_snapshot(corrupt);
  EXPECT_FALSE(c.ok());
  // The inflated-size limit (a gzip bomb) stops the inflater; the parser is not left waiting.
  LoadOptions small;
  small.max_inflated_bytes = 1u << 16;
  auto l = load_snapshot(gz, small);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.error().message.find("exceeds"), std::string::npos) << l.error().describe();
}

}  // namespace
}  // namespace allocscope
