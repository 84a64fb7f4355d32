// Snapshot loader entry points: gzip detection, the pickle machine driven by the builder, files.
#include "allocscope/loader.h"
#include "pickle/opcodes.h"

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <new>
#include <optional>

#include "snapshot/builder.h"
#include "snapshot/json_snapshot.h"
#include "snapshot/page.h"
#include "util/parallel.h"

#include "snapshot/mapped_file.h"
#if ALLOCSCOPE_HAVE_MMAP
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace allocscope {

bool is_gzip(std::span<const uint8_t> b) { return b.size() >= 2 && b[0] == 0x1f && b[1] == 0x8b; }

namespace {

// Whether a pickle of `size` bytes, held whole, has its trace entries decoded ahead on a second core
// (LoadOptions::decode_ahead). Below 8 MB it parses in a few milliseconds, and a thread could save little.
bool decodes_ahead(const LoadOptions& options, uint64_t size) {
  return options.decode_ahead == LoadOptions::Ahead::kAlways ||
         (options.decode_ahead == LoadOptions::Ahead::kAuto && size >= (8u << 20) && detail::threads_for(2) >= 2);
}

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

// A trace_plot / segment_plot page opens as the snapshot it carries; an error inside that snapshot says so.
Result<Snapshot> load_page(std::span<const uint8_t> page, const LoadOptions& options) {
  auto inner = detail::snapshot_in_page(page);
  if (!inner.ok()) return inner.error();
  if (detail::starts_as_page(inner.value()))
    return Error{"the snapshot this page carries is another page, not a pickle", 0};
  auto snap = load_snapshot(inner.value(), options);
  if (!snap.ok()) return Error{"in the snapshot this trace_plot / segment_plot page carries, " + snap.error().describe()};
  return snap;
}

}  // namespace

struct SnapshotStream::State {
  explicit State(const LoadOptions& o) : options(o), builder(&snap), reader(&snap.strings, o.limits) {
    builder.set_window(o.window);
  }
  LoadOptions options;
  Snapshot snap;
  detail::Builder builder;
  pickle::Reader reader;
  uint64_t fed = 0;
  // A trace_plot / segment_plot page is kept whole and opened at finish(): its snapshot is one base64 string.
  // Until a byte other than a space says which (detail::page_start), the bytes wait in page_bytes.
  detail::PageStart start = detail::PageStart::kUndecided;
  std::vector<uint8_t> page_bytes;
  std::vector<uint8_t> head;  // the first detail::kTextHead bytes, to say "text" when the pickle machine refuses it
  // A JSON snapshot is kept whole too (simdjson indexes a whole document), in page_bytes, and read at finish() as
  // the pickle it stands for; `json_offsets` turns that pickle's error offsets back into the JSON's.
  bool json = false;
  detail::JsonOffsets json_offsets;
  uint64_t size_hint = 0;  // the whole input's size, if known: a JSON snapshot's buffer is sized once from it

  Status read_json();
  // The error to show for one the pickle machine or the builder raised: on a JSON snapshot's pickle, placed in the
  // JSON; on a pickle, said as text's when the file is text.
  Error explain(const Error& e) const {
    if (!json) return detail::explain_text(head, e);
    if (e.in_json) return e;
    Error out = e;
    if (out.offset != Error::kNoOffset) out.offset = json_offsets.json_near(out.offset);
    out.in_json = true;
    return out;
  }
};

Status SnapshotStream::State::read_json() {
  std::vector<uint8_t> text = std::exchange(page_bytes, {});
  const size_t size = text.size();
  text.resize(size + detail::kJsonPadding, 0);
  // A JSON snapshot spends about three times a pickle's bytes on an entry (keys and frames written out each time).
  if (!builder.windowed()) reserve_columns(snap.events, size / 3);
  builder.reading_json();
  std::function<void(uint64_t, uint64_t)> p;
  if (options.progress) p = [&](uint64_t d, uint64_t t) { options.progress("parse", d, t); };
  return detail::json_to_pickle(
      std::span<const uint8_t>(text.data(), size), options.limits.max_depth,
      [&](std::span<const uint8_t> chunk) { return reader.feed(chunk); }, &json_offsets, p);
}

SnapshotStream::SnapshotStream(const LoadOptions& options, uint64_t size_hint) : s_(new State(options)) {
  s_->size_hint = size_hint;
  if (options.window.whole()) reserve_columns(s_->snap.events, size_hint);
  s_->reader.begin(&s_->builder, size_hint);
}

SnapshotStream::~SnapshotStream() = default;

uint64_t SnapshotStream::bytes_fed() const { return s_->fed; }

const EventColumns& SnapshotStream::events_so_far() const {
  static const EventColumns none;
  return s_->builder.windowed() ? none : s_->snap.events;
}

Status SnapshotStream::feed(std::span<const uint8_t> chunk) {
  if (s_->fed == 0 && is_gzip(chunk))
    return Error{"this is gzip data; inflate it before feeding the stream (load_snapshot does it)", 0};
  if (s_->head.size() < detail::kTextHead)
    s_->head.insert(s_->head.end(), chunk.begin(),
                    chunk.begin() + static_cast<std::ptrdiff_t>(std::min(chunk.size(), detail::kTextHead - s_->head.size())));
  // The pickle machine's part; its error is said as text's when the file is text.
  Status st = [&]() -> Status {
    s_->fed += chunk.size();
    if (s_->start == detail::PageStart::kNotPage && !s_->json) return s_->reader.feed(chunk);
    s_->page_bytes.insert(s_->page_bytes.end(), chunk.begin(), chunk.end());
    if (s_->start == detail::PageStart::kPage || s_->json) return {};
    // Still deciding: the same rule load_snapshot applies to the whole input, on what has come so far.
    s_->start = detail::page_start(s_->page_bytes);
    if (s_->start == detail::PageStart::kUndecided) return {};
    ALLOCSCOPE_RETURN_IF_ERROR(detail::refuse_known_non_snapshots(s_->page_bytes));
    if (s_->start == detail::PageStart::kPage) {
      s_->snap = Snapshot();  // the columns reserved for a pickle of this size are not needed
      return {};
    }
    if (detail::starts_as_json(s_->page_bytes)) {
      s_->json = true;
      // Sized once, with simdjson's padding: a 139 MB JSON copied twice more as the buffer grew cost 15% of its load.
      s_->page_bytes.reserve(std::max<uint64_t>(s_->size_hint, s_->page_bytes.size()) + detail::kJsonPadding);
      // Not as many columns as for a pickle of this size (read_json reserves them). The snapshot itself stays: the
      // builder has interned its keys in its string table.
      s_->snap.events = EventColumns{};
      return {};
    }
    const std::vector<uint8_t> head = std::exchange(s_->page_bytes, {});
    return s_->reader.feed(head);
  }();
  if (st.ok()) {
    if (s_->options.rows_so_far && !s_->builder.windowed()) s_->options.rows_so_far(s_->snap.events);
    return st;
  }
  return s_->explain(st.error());
}

Result<Snapshot> SnapshotStream::finish() {
  if (s_->fed == 0) return Error{"the file is empty; expected a pickled memory snapshot", 0};
  if (s_->start == detail::PageStart::kPage) return load_page(std::exchange(s_->page_bytes, {}), s_->options);
  if (s_->start == detail::PageStart::kUndecided) {  // spaces only (or part of a byte order mark): a pickle's error
    ALLOCSCOPE_RETURN_IF_ERROR(s_->reader.feed(std::exchange(s_->page_bytes, {})));
  }
  if (s_->json)
    if (Status read = s_->read_json(); !read.ok()) return s_->explain(read.error());
  auto root = s_->reader.finish();
  if (!root.ok()) return s_->explain(root.error());
  if (Status built = s_->builder.finish(s_->reader, root.value()); !built.ok()) return s_->explain(built.error());
  if (LoadOptions::PickleFacts* f = s_->options.facts)
    f->memo_slots = s_->reader.memo_size(), f->root_is_dict = root.value().tag == pickle::Tag::kDict,
    f->fast_dicts = s_->reader.fast_dicts(), f->pickle_end = s_->reader.pickle_end();
  s_->snap.source_bytes = s_->fed;
  trim_columns(s_->snap.events);
  return std::move(s_->snap);
}

#if ALLOCSCOPE_HAVE_ZLIB || ALLOCSCOPE_HAVE_MMAP
namespace {
// A chunk's bytes, left uninitialised when it grows: they are always written (read or inflated into) before they
// are parsed, and zeroing a fresh 4 MB buffer first was a memset the parser waited for at the start of a load.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
using Chunk = std::vector<uint8_t, UninitAllocator<uint8_t>>;

// Chunks of input made on a second thread (inflated, or read from a file) while this one parses them: inflating and
// parsing take about as long each (1M events: 0.23 s and 0.22 s), so a .gz loads in about the time of one of them
// on two cores, and a plain file's reads and page faults leave the parser's core. Chunks of 4 MB travel through a
// queue of at most three, their buffers reused (memory stays bounded); an error on either side stops the other.
class ChunkPipe {
 public:
  static constexpr size_t kChunk = 4u << 20, kQueued = 3;
  // Producer side: a buffer to fill (a used one when there is one), or false once the parser has stopped.
  // While the queue is full, the producer does the caller's spare-time work (LoadOptions::spare_time).
  bool spare(Chunk* buf, const std::function<bool()>& spare_time) {
    std::unique_lock<std::mutex> lock(mu_);
    for (bool more = static_cast<bool>(spare_time); more && !stop_ && full_.size() >= kQueued;) {
      lock.unlock();
      more = spare_time();
      lock.lock();
    }
    changed_.wait(lock, [&] { return stop_ || full_.size() < kQueued; });
    if (stop_) return false;
    if (!spare_.empty()) *buf = std::move(spare_.back()), spare_.pop_back();
    return true;
  }
  void put(Chunk buf) {
    std::lock_guard<std::mutex> lock(mu_);
    full_.push_back(std::move(buf));
    changed_.notify_all();
  }
  // Starts the producer: `produce` fills chunks (spare(), put()) and returns its status. Whatever it throws (out of
  // memory, above all) ends the pipe, so the parser never waits for chunks that will not come, and reaches drain()'s
  // caller from there. Without a thread to start, the load is as out of memory as a chunk's allocation would be.
  template <class Produce>
  detail::Worker start(Produce&& produce) {
    detail::Worker w([this, produce = std::forward<Produce>(produce)]() mutable {
      try {
        done(produce());
      } catch (...) {
        finish_without_status();
        throw;
      }
    });
    if (!w.started()) throw std::bad_alloc();
    return w;
  }
  // Parser side: feeds every chunk to `stream` in order; the first error of either side. An exception on either
  // side stops the other before it leaves.
  // `inflated`: the chunks are a .gz's inflated bytes, so the parser's offsets are labelled as theirs.
  Status drain(SnapshotStream& stream, detail::Worker& producer, bool inflated,
               const std::function<void(uint64_t)>& fed = {}) {
    Status parsed;
    try {
      for (;;) {
        Chunk buf;
        {
          std::unique_lock<std::mutex> lock(mu_);
          changed_.wait(lock, [&] { return done_ || !full_.empty(); });
          if (full_.empty()) break;  // done and drained
          buf = std::move(full_.front());
          full_.pop_front();
          changed_.notify_all();
        }
        parsed = stream.feed(buf);
        if (parsed.ok() && fed) fed(stream.bytes_fed());
        std::lock_guard<std::mutex> lock(mu_);
        spare_.push_back(std::move(buf));
        if (!parsed.ok()) break;
      }
    } catch (...) {
      stop();
      producer.join();  // rethrows the producer's own failure, if it had one first
      throw;
    }
    if (!parsed.ok()) stop();
    producer.join();
    if (!parsed.ok()) {
      Error e = parsed.error();
      e.in_inflated = inflated;
      return e;
    }
    return produced_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Chunk> full_;    // made, waiting to be parsed
  std::vector<Chunk> spare_;  // parsed, ready to be filled again
  void done(Status st) {
    std::lock_guard<std::mutex> lock(mu_);
    produced_ = std::move(st);
    done_ = true;
    changed_.notify_all();
  }
  void finish_without_status() {  // allocates nothing: the producer may be out of memory
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    changed_.notify_all();
  }
  void stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    changed_.notify_all();
  }

  bool done_ = false, stop_ = false;
  Status produced_;
};

#if ALLOCSCOPE_HAVE_ZLIB
Status inflate_beside(std::span<const uint8_t> bytes, uint64_t max_out, SnapshotStream& stream,
                      const std::function<void(uint64_t, uint64_t)>& progress,
                      const std::function<bool()>& spare_time) {
  ChunkPipe pipe;
  detail::Worker inflater = pipe.start([&] {
    return gunzip_chunks(
        bytes, max_out,
        [&](std::span<const uint8_t> c) -> Status {
          Chunk buf;
          if (!pipe.spare(&buf, spare_time)) return Error{"stopped"};
          buf.assign(c.begin(), c.end());
          pipe.put(std::move(buf));
          return {};
        },
        ChunkPipe::kChunk, progress);
  });
  return pipe.drain(stream, inflater, /*inflated=*/true);
}
#endif
}  // namespace
#endif

Result<Snapshot> load_snapshot(std::span<const uint8_t> bytes, const LoadOptions& options) {
  if (is_gzip(bytes)) {
    // Inflate and parse together: the inflated pickle is never held whole (a 162 MB pickle needs 4 MB of buffer).
    const uint64_t hint = inflated_size_hint(bytes);
    SnapshotStream stream(options, std::min<uint64_t>(hint, options.max_inflated_bytes));
    std::function<void(uint64_t, uint64_t)> p;
    if (options.progress) p = [&](uint64_t d, uint64_t t) { options.progress("inflate", d, t); };
    bool inflated = false;
#if ALLOCSCOPE_HAVE_ZLIB
    // A small .gz (under 1 MB, ~10 MB inflated) inflates in a few milliseconds: a thread would cost more than it saves.
    if (bytes.size() >= (1u << 20) && detail::threads_for(2) >= 2) {
      ALLOCSCOPE_RETURN_IF_ERROR(inflate_beside(bytes, options.max_inflated_bytes, stream, p, options.spare_time));
      inflated = true;
    }
#endif
    if (!inflated)  // no second core: inflated and parsed in turn (a build without zlib says so here)
      ALLOCSCOPE_RETURN_IF_ERROR(gunzip_chunks(
          bytes, options.max_inflated_bytes,
          [&](std::span<const uint8_t> c) {
            Status st = stream.feed(c);
            if (st.ok()) return st;
            Error e = st.error();
            e.in_inflated = true;
            return Status(std::move(e));
          },
          4u << 20, p));
    auto done = stream.finish();
    if (!done.ok()) {
      Error e = done.error();
      e.in_inflated = true;
      return e;
    }
    return done;
  }
  if (bytes.empty()) return Error{"the file is empty; expected a pickled memory snapshot", 0};
  ALLOCSCOPE_RETURN_IF_ERROR(detail::refuse_known_non_snapshots(bytes));
  if (detail::starts_as_page(bytes)) return load_page(bytes, options);
  if (detail::starts_as_json(bytes)) {  // copied once, padded, by the stream, as simdjson wants it
    SnapshotStream stream(options, bytes.size());
    ALLOCSCOPE_RETURN_IF_ERROR(stream.feed(bytes));
    return stream.finish();
  }
  Snapshot snap;
  snap.source_bytes = bytes.size();
  detail::Builder builder(&snap);
  builder.set_window(options.window);
  if (!builder.windowed()) reserve_columns(snap.events, bytes.size());
  pickle::Reader reader(&snap.strings, options.limits);
  std::function<void(uint64_t, uint64_t)> p;
  if (options.progress || options.rows_so_far)
    p = [&](uint64_t d, uint64_t t) {
      if (options.progress) options.progress("parse", d, t);
      if (options.rows_so_far && !builder.windowed()) options.rows_so_far(snap.events);
    };
  if (decodes_ahead(options, bytes.size())) reader.decode_ahead(options.spare_time ? &options.spare_time : nullptr);
  auto root = reader.run(bytes, &builder, p);
  if (!root.ok()) return detail::explain_text(bytes, root.error());
  if (Status built = builder.finish(reader, root.value()); !built.ok()) return detail::explain_text(bytes, built.error());
  if (LoadOptions::PickleFacts* f = options.facts)
    f->memo_slots = reader.memo_size(), f->root_is_dict = root.value().tag == pickle::Tag::kDict,
    f->fast_dicts = reader.fast_dicts(), f->pickle_end = reader.pickle_end(), f->ahead_dicts = reader.ahead_dicts();
  trim_columns(snap.events);
  return snap;
}

Status check_snapshot_start(std::span<const uint8_t> head) {
  if (head.empty() || is_gzip(head) || detail::starts_as_page(head) || detail::starts_as_json(head)) return {};
  ALLOCSCOPE_RETURN_IF_ERROR(detail::refuse_known_non_snapshots(head));
  if (pickle::opcode_name(head[0]) != nullptr) return {};
  return Error{"not a snapshot: its first byte " + pickle::opcode_label(head[0]) +
                   " is neither gzip's nor a pickle opcode",
               0};
}

namespace {

Result<std::vector<uint8_t>> read_whole(const std::string& path, bool snapshot) {
  errno = 0;
  std::ifstream f(path, std::ios::binary);
  // The reason (no such file, permission denied) is what a user acts on; the stream keeps fopen's errno.
  if (!f) return Error{"cannot open '" + path + "'" + (errno ? std::string(": ") + std::strerror(errno) : "")};
  // Read to the end rather than trusting a size: a pipe or /proc has none, and a directory's "size" (found by seeking
  // to its end) once became a multi-exabyte allocation and a crash.
  constexpr size_t kStep = 1u << 20;
  std::vector<uint8_t> data;
  for (;;) {
    const size_t at = data.size();
    data.resize(at + kStep);
    f.read(reinterpret_cast<char*>(data.data() + at), static_cast<std::streamsize>(kStep));
    data.resize(at + static_cast<size_t>(f.gcount()));
    // A stream without end (/dev/zero, a device) would be read until memory runs out before the parser saw its
    // first byte: a first byte that is neither gzip's nor a pickle opcode is refused at once.
    if (snapshot && at == 0 && !data.empty())
      if (Status first = check_snapshot_start(data); !first.ok()) return first.error();
    if (f.eof()) break;
    if (!f) return Error{"cannot read '" + path + "'" + (data.empty() ? " (is it a directory?)" : ""), data.size()};
  }
  data.shrink_to_fit();
  return data;
}

}  // namespace

Result<std::vector<uint8_t>> read_file(const std::string& path) { return read_whole(path, false); }

Result<std::vector<uint8_t>> read_snapshot_bytes(const std::string& path) { return read_whole(path, true); }

#if ALLOCSCOPE_HAVE_MMAP
namespace {
// Pickles larger than this are read beside the parser (read_beside) or mapped and decoded ahead; smaller ones, and
// gzip, are mapped and faulted in at once.
constexpr size_t kWindow = 64u << 20;
}  // namespace
#endif

#if ALLOCSCOPE_HAVE_MMAP
namespace {
// Reads the chunk of a large pickle that starts at byte `at` into `buf`: the first chunks small, so the parser starts
// after a 256 KB read instead of a 4 MB one into fresh pages.
Status read_chunk(int fd, uint64_t size, const std::string& path, uint64_t at, Chunk* buf) {
  const uint64_t want = at < (1u << 20) ? (256u << 10) : at < (4u << 20) ? (1u << 20) : ChunkPipe::kChunk;
  buf->resize(static_cast<size_t>(std::min<uint64_t>(want, size - at)));
  const ssize_t got = ::pread(fd, buf->data(), buf->size(), static_cast<off_t>(at));
  if (got <= 0)
    return Error{"cannot read '" + path + "' at byte " + std::to_string(at) + " of " + std::to_string(size) +
                     (got == 0 ? " (the file shrank while it was read)" : ""),
                 at};
  buf->resize(static_cast<size_t>(got));
  return {};
}

// A large pickle is read in 4 MB chunks on a second thread while this one parses them: the file never counts whole
// in the process's memory (a 1.8 GB snapshot loads in the model's ~0.5 GB plus a few chunks), and the reads and their
// page-cache copies leave the parser's core (mapping it cost the parser its page faults, the populate calls and the
// mapping's teardown, ~15% of a 1M-event `summary`). Without a core for the reads (threads_for), the same chunks
// are read in turn with the parse, into one buffer.
Result<Snapshot> read_beside(int fd, uint64_t size, const std::string& path, const LoadOptions& options) {
  SnapshotStream stream(options, size);
  std::function<void(uint64_t)> fed;
  if (options.progress) fed = [&](uint64_t done) { options.progress("parse", done, size); };
  if (detail::threads_for(2) < 2) {
    Chunk buf;
    for (uint64_t at = 0; at < size; at += buf.size()) {
      ALLOCSCOPE_RETURN_IF_ERROR(read_chunk(fd, size, path, at, &buf));
      ALLOCSCOPE_RETURN_IF_ERROR(stream.feed(buf));
      if (fed) fed(stream.bytes_fed());
    }
    return stream.finish();
  }
  ChunkPipe pipe;
  detail::Worker reader = pipe.start([&] {
    Status read;
    for (uint64_t at = 0; at < size;) {
      Chunk buf;
      if (!pipe.spare(&buf, options.spare_time)) break;
      read = read_chunk(fd, size, path, at, &buf);
      if (!read.ok()) break;
      at += buf.size();
      pipe.put(std::move(buf));
    }
    return read;
  });
  ALLOCSCOPE_RETURN_IF_ERROR(pipe.drain(stream, reader, /*inflated=*/false, fed));
  return stream.finish();
}

// A pipe (`zcat big.pickle.gz | allocscope peak - --from ...`): a pickle is parsed as it comes, so that what is
// held is the model (or a window of it), not the input; a pipe of 18 GB read whole first needed 17 GB. A gzip
// stream is read whole (compressed) and inflated as it is parsed, as a .gz file is.
Result<Snapshot> read_pipe(int fd, const std::string& path, const LoadOptions& options) {
  constexpr size_t kChunk = 1u << 20;
  std::vector<uint8_t> buf(kChunk), gz;
  std::optional<SnapshotStream> stream;
  uint64_t at = 0;
  for (;;) {
    const ssize_t got = ::read(fd, buf.data(), buf.size());
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Error{"cannot read '" + path + "': " + std::strerror(errno), at};
    if (got == 0) break;
    const std::span<const uint8_t> chunk(buf.data(), static_cast<size_t>(got));
    if (at == 0) {
      // A stream without end (/dev/zero's kind) is refused at its first byte, as read_whole does.
      ALLOCSCOPE_RETURN_IF_ERROR(check_snapshot_start(chunk));
      if (!is_gzip(chunk)) stream.emplace(options, 0);
    }
    at += chunk.size();
    if (stream) {
      ALLOCSCOPE_RETURN_IF_ERROR(stream->feed(chunk));
    } else {
      if (gz.size() + chunk.size() > options.max_inflated_bytes)
        return Error{"a gzip stream larger than " + std::to_string(options.max_inflated_bytes) + " bytes", at};
      gz.insert(gz.end(), chunk.begin(), chunk.end());
    }
  }
  if (stream) return stream->finish();
  return load_snapshot(gz, options);
}
}  // namespace
#endif

#if ALLOCSCOPE_HAVE_MMAP
namespace {
// A large pickle mapped and parsed whole, its entries decoded ahead (Reader::decode_ahead). The pages the parser
// has passed are dropped from the mapping as it reports progress, so the file never counts whole in the process's
// memory, as with read_beside; the page cache keeps them. Dropping is only a hint: a page touched again
// is read again from the file.
Result<Snapshot> load_mapped_ahead(std::span<const uint8_t> mapped, const LoadOptions& options) {
  LoadOptions o = options;
  const uint8_t* const base = mapped.data();
  size_t dropped = 0;
  o.progress = [&](std::string_view phase, uint64_t done, uint64_t total) {
    constexpr size_t kBehind = 4u << 20;  // what the parser may still look at behind its position
    // Dropped 32 MB at a time: every 4 MB cost a 1M-event load ~15 ms (130 -> 145 ms, interleaved runs; each call
    // also flushes the TLB of the core decoding ahead), while 32 MB cost nothing measurable and keeps at most
    // ~36 MB of the file mapped (max RSS 91 MB every 4 MB, 108 MB every 32 MB, 230 MB never).
    constexpr size_t kStride = 32u << 20;
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    if (done > kBehind) {
      const size_t upto = static_cast<size_t>(done - kBehind) / page * page;
      if (upto >= dropped + kStride) {
        ::madvise(const_cast<uint8_t*>(base) + dropped, upto - dropped, MADV_DONTNEED);
        dropped = upto;
      }
    }
    if (options.progress) options.progress(phase, done, total);
  };
  return load_snapshot(mapped, o);
}
}  // namespace
#endif

Result<Snapshot> load_snapshot_file(const std::string& path, const LoadOptions& options) {
#if ALLOCSCOPE_HAVE_MMAP
  if (const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    struct stat st;
    uint8_t magic[2] = {0, 0};
    const bool stat_ok = ::fstat(fd, &st) == 0;
    if (stat_ok && S_ISDIR(st.st_mode)) {
      ::close(fd);
      return Error{"a directory, not a snapshot file"};
    }
    const bool big_pickle = stat_ok && S_ISREG(st.st_mode) &&
                            static_cast<uint64_t>(st.st_size) > kWindow && ::pread(fd, magic, 2, 0) == 2 &&
                            !is_gzip(magic);
    if (big_pickle && options.map_file && decodes_ahead(options, static_cast<uint64_t>(st.st_size))) {
      // Mapped, so that a second core decodes its entries ahead instead of reading the file (read_beside). Without
      // the address space for it (`ulimit -v`), it is read beside the parser as on one core.
      if (const detail::MappedFile mapped(path, kWindow); mapped.ok()) {
        ::close(fd);
        return load_mapped_ahead(mapped.bytes(), options);
      }
    }
    if (big_pickle) {
      auto loaded = read_beside(fd, static_cast<uint64_t>(st.st_size), path, options);
      ::close(fd);
      return loaded;
    }
    if (stat_ok && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
      auto streamed = read_pipe(fd, path, options);
      ::close(fd);
      return streamed;
    }
    ::close(fd);
  }
  if (options.map_file) {
    const detail::MappedFile mapped(path, kWindow);
    if (mapped.ok()) return load_snapshot(mapped.bytes(), options);
  }
#endif
  auto data = read_snapshot_bytes(path);
  if (!data.ok()) return data.error();
  return load_snapshot(data.value(), options);
}

}  // namespace allocscope
