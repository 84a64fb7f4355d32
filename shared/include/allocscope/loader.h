// Loading a snapshot: bytes (raw pickle or gzip, detected by magic) -> Snapshot, or an Error naming the byte offset.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "allocscope/pickle.h"
#include "allocscope/result.h"
#include "allocscope/snapshot.h"

namespace allocscope {

struct LoadOptions {
  // phase is "inflate" or "parse"; done/total in bytes of that phase's input.
  std::function<void(std::string_view phase, uint64_t done, uint64_t total)> progress;
  uint64_t max_inflated_bytes = 16ull << 30;  // refuse gzip bombs beyond this
  pickle::Limits limits;
  // Facts about the pickle itself, for code that appends to it (outside.h's merge): filled when not null.
  struct PickleFacts {
    uint64_t memo_slots = 0;    // memo slots the pickle used
    bool root_is_dict = false;  // its top-level object is a dict (PyTorch 2.1+), not a bare list of segments
    uint64_t fast_dicts = 0;    // trace entries and frames the reader's fast path decoded (pickle.h)
    uint64_t ahead_dicts = 0;   // of those, the ones decoded ahead on a second core (decode_ahead)
    uint64_t pickle_end = 0;    // bytes through the STOP opcode: any after it are not the pickle's (Python ignores them)
  };
  PickleFacts* facts = nullptr;
  // Work for the thread that reads or inflates the file ahead of the parser (load_snapshot_file of a large pickle,
  // load_snapshot of gzip), done while that thread would otherwise wait for the parser to catch up: called with
  // its read-ahead full, again and again while it returns true, so each call should take well under a millisecond.
  // It runs beside the parse, so it must not touch the model. The CLI faults in the heap pages the parse is about
  // to use (native/cli/memory_policy.cpp).
  std::function<bool()> spare_time;
  // Called on the parsing thread with the trace rows parsed so far, as the parse goes on (after each chunk a stream
  // is fed, with each parse progress report of a whole pickle): rows are only appended until the load ends, so it
  // may read the new ones (PreviewCurve::extend). `allocscope view` draws a file's first picture from them while it
  // loads, as the viewer does from SnapshotStream::events_so_far.
  std::function<void(const EventColumns& rows)> rows_so_far;
  // Trace entries decoded ahead of the parser on a second core (natively, for a pickle held whole: load_snapshot of
  // bytes, a mapped file). kAuto does it for pickles of 8 MB or more when a second core is there. The model is the
  // same either way; kAlways exists so that tests can check that on every file.
  enum class Ahead { kAuto, kNever, kAlways };
  Ahead decode_ahead = Ahead::kAuto;
  // Natively, load_snapshot_file maps a regular file rather than copying it in (faster, and a large pickle is then
  // decoded ahead). A mapped file that another process truncates during the load raises SIGBUS (mapped_input_at
  // below). false reads it instead, so that such a file is an error of this load and nothing else: `ranks` reads a
  // thousand files in one process, and one of them rewritten by its job must be one failed row.
  bool map_file = true;
  // Only this part of each device's trace (steps or times, TraceWindow in snapshot.h): a file too big to hold whole
  // loads in memory bounded by the window and what is alive, not by the file (snapshot/trace_window.h says what is
  // kept). The whole file is still read, as a pickle must be. rows_so_far is not called: rows come and go.
  TraceWindow window;
};

// `--from A --to B` as the CLI and the viewer take them: whole numbers are steps (step s: after s entries), numbers
// with a unit ("1.5s", "200ms", "300us") times since the device's first entry; an empty text leaves that end open.
// Both ends must have the same kind. An error says which text is wrong and why.
Result<TraceWindow> parse_trace_window(std::string_view from, std::string_view to);
// The window as the user wrote it ("steps 4000-6000", "1.5 s-3 s"), for messages.
std::string describe_window(const TraceWindow& w);

// True when `bytes` starts with the gzip magic (1f 8b).
bool is_gzip(std::span<const uint8_t> bytes);

// Inflates gzip (concatenated members allowed). Natively built with zlib; in wasm returns an error that says to
// decompress first (the viewer uses the browser's DecompressionStream).
Result<std::vector<uint8_t>> gunzip(std::span<const uint8_t> bytes, uint64_t max_out = 16ull << 30,
                                    const std::function<void(uint64_t, uint64_t)>& progress = {});
// Deflates to gzip (natively; error in wasm).
Result<std::vector<uint8_t>> gzip(std::span<const uint8_t> bytes, int level = 6);

// Inflates gzip in pieces of at most `chunk` bytes, handing each to `sink` (which may stop it with an error), so
// the inflated data never has to be held whole. Natively only.
Status gunzip_chunks(std::span<const uint8_t> bytes, uint64_t max_out,
                     const std::function<Status(std::span<const uint8_t>)>& sink, size_t chunk = 4u << 20,
                     const std::function<void(uint64_t, uint64_t)>& progress = {});

// Parses a snapshot pickle. gzip input is inflated as it is parsed (natively); a page written by PyTorch's trace_plot
// or segment_plot opens as the snapshot it carries.
Result<Snapshot> load_snapshot(std::span<const uint8_t> bytes, const LoadOptions& options = {});

// Loads a snapshot from raw pickle bytes fed in order, in chunks of any size (as a browser's DecompressionStream
// produces them), so the whole inflated file is never in memory. `size_hint` (0 if unknown) only sizes buffers.
// Errors are sticky; finish() reports a truncated input.
class SnapshotStream {
 public:
  explicit SnapshotStream(const LoadOptions& options = {}, uint64_t size_hint = 0);
  ~SnapshotStream();
  SnapshotStream(const SnapshotStream&) = delete;
  SnapshotStream& operator=(const SnapshotStream&) = delete;
  Status feed(std::span<const uint8_t> chunk);
  uint64_t bytes_fed() const;
  // The trace rows parsed so far, in file order (PreviewCurve, allocscope/preview.h, draws them while the rest
  // streams in): rows are only appended until finish(). Empty for a JSON snapshot or a PyTorch page, read whole there.
  const EventColumns& events_so_far() const;
  Result<Snapshot> finish();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// A snapshot starts as gzip (0x1f), a pickle opcode, JSON, or a PyTorch trace_plot / segment_plot page (which
// carries one): anything else is refused at byte 0 before a stream without end (/dev/zero, a device, a pipe of
// something else) is read until memory runs out, and a zip archive (torch.save) is named, with what to do.
Status check_snapshot_start(std::span<const uint8_t> head);

// Whether a file beginning with `head` (its first few KiB) is a JSON snapshot rather than another JSON file a user
// keeps beside snapshots (a ranks report, a summary): a JSON list (the oldest format), or an object whose first key
// is one a snapshot has at its top.
// json.dump keeps the dict's order, and the dict PyTorch returns starts with 'segments'.
bool is_json_snapshot(std::span<const uint8_t> head);

// Reads a whole file (errors name the path).
Result<std::vector<uint8_t>> read_file(const std::string& path);
// The same for a snapshot: a start check_snapshot_start refuses stops the read there.
Result<std::vector<uint8_t>> read_snapshot_bytes(const std::string& path);
Result<Snapshot> load_snapshot_file(const std::string& path, const LoadOptions& options = {});

// load_snapshot_file maps regular files (native builds). When another process truncates one meanwhile (a job that
// dumps its snapshot again to the same path), the parser's next read past the new end raises SIGBUS. For a SIGBUS
// handler: the mapped input holding `addr` (path null when none is), the byte of the file it is, and the file's
// size when it was mapped. Async-signal-safe: it reads a fixed table of atomics and nothing else.
struct MappedInput {
  const char* path = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;
};
MappedInput mapped_input_at(const void* addr);

}  // namespace allocscope
