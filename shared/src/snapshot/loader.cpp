// Snapshot loader entry points: gzip detection, the pickle machine driven by the builder, files.
#include "allocscope/loader.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include "snapshot/builder.h"

// Native builds map files; WebAssembly never reads files (the browser hands it bytes).
#if !defined(__EMSCRIPTEN__) && __has_include(<sys/mman.h>)
#define ALLOCSCOPE_HAVE_MMAP 1
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#else
#define ALLOCSCOPE_HAVE_MMAP 0
#endif

namespace allocscope {

bool is_gzip(std::span<const uint8_t> b) { return b.size() >= 2 && b[0] == 0x1f && b[1] == 0x8b; }

namespace {

// Real snapshots spend ~160 bytes of pickle per trace entry; reserving from the expected size avoids regrowing the
// columns (page faults dominate otherwise). An underestimate only means one regrowth of each column.
void reserve_columns(EventColumns& e, uint64_t pickle_bytes) {
  const size_t guess = static_cast<size_t>(std::min<uint64_t>(pickle_bytes / 150, UINT32_MAX));
  e.action.reserve(guess), e.addr.reserve(guess), e.size.reserve(guess), e.stream.reserve(guess);
  e.time_us.reserve(guess), e.stack.reserve(guess), e.compile_context.reserve(guess);
  e.user_metadata.reserve(guess);
}

// Gives back column capacity the file did not need: the guess above is ~20% over for PyTorch 2.11's files (74 MB of
// a 10M-event model), so anything past 1/16 is given back. Shrinking copies a column at a time, after the parse
// freed its buffers, so the copies fit in memory the parse already used. Only WebAssembly needs it: its heap counts
// every reserved byte, while a native process never touches the spare capacity, so those pages are never resident
// and the copy (38 MB and a third of the page faults of a 1M-event `summary`) would buy nothing.
void trim_columns([[maybe_unused]] EventColumns& e) {
#if defined(__EMSCRIPTEN__)
  if (e.action.capacity() <= e.action.size() + e.action.size() / 16 + 4096) return;
  e.action.shrink_to_fit(), e.addr.shrink_to_fit(), e.size.shrink_to_fit(), e.stream.shrink_to_fit();
  e.time_us.shrink_to_fit(), e.stack.shrink_to_fit(), e.compile_context.shrink_to_fit();
  e.user_metadata.shrink_to_fit();
#endif
}

// The gzip trailer's ISIZE (inflated size mod 2^32) — the file's claim, so trusted only up to 32x the compressed
// size (snapshots compress ~14x) — else 4x the compressed size. Only buffers are sized from it.
uint64_t inflated_size_hint(std::span<const uint8_t> gz) {
  if (gz.size() >= 18) {
    uint32_t isize;
    std::memcpy(&isize, gz.data() + gz.size() - 4, 4);
    if (isize > 0) return std::min<uint64_t>(isize, gz.size() * 32ull);
  }
  return gz.size() * 4;
}

}  // namespace

struct SnapshotStream::State {
  explicit State(const LoadOptions& o) : options(o), builder(&snap), reader(&snap.strings, o.limits) {}
  LoadOptions options;
  Snapshot snap;
  detail::Builder builder;
  pickle::Reader reader;
  uint64_t fed = 0;
};

SnapshotStream::SnapshotStream(const LoadOptions& options, uint64_t size_hint) : s_(new State(options)) {
  reserve_columns(s_->snap.events, size_hint);
  s_->reader.begin(&s_->builder, size_hint);
}

SnapshotStream::~SnapshotStream() = default;

uint64_t SnapshotStream::bytes_fed() const { return s_->fed; }

Status SnapshotStream::feed(std::span<const uint8_t> chunk) {
  if (s_->fed == 0 && is_gzip(chunk))
    return Error{"this is gzip data; inflate it before feeding the stream (load_snapshot does it)", 0};
  s_->fed += chunk.size();
  return s_->reader.feed(chunk);
}

Result<Snapshot> SnapshotStream::finish() {
  if (s_->fed == 0) return Error{"the file is empty; expected a pickled memory snapshot", 0};
  auto root = s_->reader.finish();
  if (!root.ok()) return root.error();
  ALLOCSCOPE_RETURN_IF_ERROR(s_->builder.finish(s_->reader, root.value()));
  if (LoadOptions::PickleFacts* f = s_->options.facts)
    f->memo_slots = s_->reader.memo_size(), f->root_is_dict = root.value().tag == pickle::Tag::kDict,
    f->fast_dicts = s_->reader.fast_dicts();
  s_->snap.source_bytes = s_->fed;
  trim_columns(s_->snap.events);
  return std::move(s_->snap);
}

#if ALLOCSCOPE_HAVE_ZLIB
namespace {
// Inflates on a second thread while this one parses: inflating and parsing take about as long each (1M events:
// 0.23 s and 0.22 s), so a .gz loads in about the time of one of them on two cores. Chunks of 4 MB travel through
// a queue of at most three (memory stays bounded); an error on either side stops the other.
Status inflate_beside(std::span<const uint8_t> bytes, uint64_t max_out, SnapshotStream& stream,
                      const std::function<void(uint64_t, uint64_t)>& progress) {
  constexpr size_t kChunk = 4u << 20, kQueued = 3;
  std::mutex mu;
  std::condition_variable changed;
  std::deque<std::vector<uint8_t>> full;   // inflated, waiting to be parsed
  std::vector<std::vector<uint8_t>> spare;  // parsed, ready to be filled again
  bool done = false, stop = false;
  Status inflated;
  std::thread inflater([&] {
    Status st = gunzip_chunks(
        bytes, max_out,
        [&](std::span<const uint8_t> c) -> Status {
          std::vector<uint8_t> buf;
          {
            std::unique_lock<std::mutex> lock(mu);
            changed.wait(lock, [&] { return stop || full.size() < kQueued; });
            if (stop) return Error{"stopped"};
            if (!spare.empty()) buf = std::move(spare.back()), spare.pop_back();
          }
          buf.assign(c.begin(), c.end());
          std::lock_guard<std::mutex> lock(mu);
          full.push_back(std::move(buf));
          changed.notify_all();
          return {};
        },
        kChunk, progress);
    std::lock_guard<std::mutex> lock(mu);
    inflated = std::move(st);
    done = true;
    changed.notify_all();
  });
  Status parsed;
  for (;;) {
    std::vector<uint8_t> buf;
    {
      std::unique_lock<std::mutex> lock(mu);
      changed.wait(lock, [&] { return done || !full.empty(); });
      if (full.empty()) break;  // done and drained
      buf = std::move(full.front());
      full.pop_front();
      changed.notify_all();
    }
    parsed = stream.feed(buf);
    std::lock_guard<std::mutex> lock(mu);
    spare.push_back(std::move(buf));
    if (!parsed.ok()) {
      stop = true;
      changed.notify_all();
      break;
    }
  }
  inflater.join();
  if (!parsed.ok()) return parsed;
  return inflated;
}
}  // namespace
#endif

Result<Snapshot> load_snapshot(std::span<const uint8_t> bytes, const LoadOptions& options) {
  if (is_gzip(bytes)) {
    // Inflate and parse together: the inflated pickle is never held whole (a 162 MB pickle needs 4 MB of buffer).
    const uint64_t hint = inflated_size_hint(bytes);
    SnapshotStream stream(options, std::min<uint64_t>(hint, options.max_inflated_bytes));
    std::function<void(uint64_t, uint64_t)> p;
    if (options.progress) p = [&](uint64_t d, uint64_t t) { options.progress("inflate", d, t); };
#if ALLOCSCOPE_HAVE_ZLIB
    ALLOCSCOPE_RETURN_IF_ERROR(inflate_beside(bytes, options.max_inflated_bytes, stream, p));
#else
    ALLOCSCOPE_RETURN_IF_ERROR(gunzip_chunks(
        bytes, options.max_inflated_bytes, [&](std::span<const uint8_t> c) { return stream.feed(c); }, 4u << 20, p));
#endif
    return stream.finish();
  }
  if (bytes.empty()) return Error{"the file is empty; expected a pickled memory snapshot", 0};
  Snapshot snap;
  snap.source_bytes = bytes.size();
  reserve_columns(snap.events, bytes.size());
  detail::Builder builder(&snap);
  pickle::Reader reader(&snap.strings, options.limits);
  std::function<void(uint64_t, uint64_t)> p;
  if (options.progress) p = [&](uint64_t d, uint64_t t) { options.progress("parse", d, t); };
  auto root = reader.run(bytes, &builder, p);
  if (!root.ok()) return root.error();
  ALLOCSCOPE_RETURN_IF_ERROR(builder.finish(reader, root.value()));
  if (LoadOptions::PickleFacts* f = options.facts)
    f->memo_slots = reader.memo_size(), f->root_is_dict = root.value().tag == pickle::Tag::kDict,
    f->fast_dicts = reader.fast_dicts();
  trim_columns(snap.events);
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

namespace {

#if ALLOCSCOPE_HAVE_MMAP
constexpr size_t kWindow = 64u << 20;

// A file mapped read-only, or nothing (a pipe, /proc, an empty file: read_file takes those). Reading a 160 MB snapshot
// into a vector zeroed the pages, then copied the file into them: a third of `summary`'s time was page faults, memset
// and copies; a mapping is read by the parser straight from the page cache.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      // Small files are faulted in at once (fewer faults); large ones as they are read, sequentially.
      const int populate = st.st_size <= static_cast<off_t>(kWindow) ? MAP_POPULATE : 0;
      void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | populate, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const uint8_t*>(p);
        size_ = static_cast<size_t>(st.st_size);
        ::madvise(p, size_, MADV_SEQUENTIAL);
      }
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  bool ok() const { return data_ != nullptr; }
  // Gives back the pages of [at, at+n) (page-aligned inward); they stay in the page cache, not in our memory.
  void drop(size_t at, size_t n) const {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t from = (at + page - 1) / page * page, to = (at + n) / page * page;
    if (to > from) ::madvise(const_cast<uint8_t*>(data_) + from, to - from, MADV_DONTNEED);
  }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // Faults [at, at+n) in with one call where the kernel can (Linux 5.14+), instead of one fault per page as the
  // parser reaches it; a kernel without it faults them in as read.
  void populate(size_t at, size_t n) const {
#ifdef MADV_POPULATE_READ
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t from = at / page * page;
    ::madvise(const_cast<uint8_t*>(data_) + from, at + n - from, MADV_POPULATE_READ);
#else
    (void)at, (void)n;
#endif
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};
#endif

}  // namespace

Result<Snapshot> load_snapshot_file(const std::string& path, const LoadOptions& options) {
#if ALLOCSCOPE_HAVE_MMAP
  {
    const MappedFile mapped(path);
    if (mapped.ok()) {
      const std::span<const uint8_t> all = mapped.bytes();
      if (all.size() <= kWindow || is_gzip(all)) return load_snapshot(all, options);
      // A large pickle is parsed a window at a time and each window's pages are dropped once parsed, so the file
      // never counts whole in the process's memory: a 1.8 GB snapshot loads in the model's ~0.5 GB plus a window.
      SnapshotStream stream(options, all.size());
      for (size_t at = 0; at < all.size(); at += kWindow) {
        const size_t n = std::min(kWindow, all.size() - at);
        mapped.populate(at, n);
        ALLOCSCOPE_RETURN_IF_ERROR(stream.feed(all.subspan(at, n)));
        mapped.drop(at, n);
        if (options.progress) options.progress("parse", at + n, all.size());
      }
      return stream.finish();
    }
  }
#endif
  auto data = read_file(path);
  if (!data.ok()) return data.error();
  return load_snapshot(data.value(), options);
}

}  // namespace allocscope
