// The only Emscripten-aware code: C exports the worker calls to hand over file bytes, run a method and read its
// answer (JSON text + typed-array blobs in the wasm heap). Everything else is plain C++ in methods_*.cpp.
#include <emscripten/emscripten.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "allocscope/loader.h"
#include "allocscope/preview.h"
#include "methods.h"

namespace allocscope::wasm {

namespace {
Session g_session;
std::string g_error;
std::string g_answer_text;
Answer g_answer;

bool g_inflated = false;  // the load in progress parses a .gz's inflated bytes (as_load, as_stream_begin)
std::string describe_load_error(Error e) {
  e.in_inflated = e.in_inflated || g_inflated;
  return e.describe();
}

// Keeps a loaded snapshot and returns its id, or records the error and returns 0.
int32_t add_file(Result<Snapshot> result, const char* name) {
  if (!result.ok()) {
    g_error = describe_load_error(result.error());
    return 0;
  }
  return g_session.add(std::move(result).value(), name ? name : "");
}
}  // namespace

}  // namespace allocscope::wasm

// Reports loader progress to JS (the worker forwards it to the page's progress bar).
EM_JS(void, as_js_progress, (const char* phase, double done, double total), {
  if (Module["onProgress"]) Module["onProgress"](UTF8ToString(phase), done, total);
});

// Out of memory inside the core (operator new fails once the heap cannot grow to the module's maximum): flag it for
// the worker, which then says "too large for the browser's memory" instead of a bare abort, and stop (exceptions are
// compiled out, so there is nothing to unwind to).
EM_JS(void, as_js_out_of_memory, (), { Module["outOfMemory"] = true; });

namespace {
[[noreturn]] void on_out_of_memory() {
  as_js_out_of_memory();
  std::abort();
}
[[maybe_unused]] const bool g_new_handler_set = (std::set_new_handler(on_out_of_memory), true);
}  // namespace

using namespace allocscope;
using namespace allocscope::wasm;

extern "C" {

EMSCRIPTEN_KEEPALIVE uint8_t* as_malloc(size_t n) { return static_cast<uint8_t*>(std::malloc(n ? n : 1)); }
EMSCRIPTEN_KEEPALIVE void as_free(void* p) { std::free(p); }

// Parses `n` bytes at `data` (raw pickle; the worker inflates gzip first) and frees them. Returns the file id, or 0
// with the reason in as_error(). `name` is the file name, kept for messages; `inflated`: the bytes were a .gz's, so
// error offsets are labelled as the inflated pickle's (Error::in_inflated).
EMSCRIPTEN_KEEPALIVE int32_t as_load(uint8_t* data, size_t n, const char* name, int32_t inflated) {
  g_inflated = inflated != 0;
  LoadOptions options;
  options.progress = [](std::string_view phase, uint64_t done, uint64_t total) {
    std::string p(phase);
    as_js_progress(p.c_str(), static_cast<double>(done), static_cast<double>(total));
  };
  auto result = load_snapshot({data, n}, options);
  std::free(data);
  return add_file(std::move(result), name);
}

// Streamed load: the worker feeds the pickle (already inflated by DecompressionStream) chunk by chunk as the browser
// produces it, so the wasm heap never holds the whole file — only the model and a chunk of carry-over.
static std::unique_ptr<SnapshotStream> g_stream;
static PreviewCurve g_preview;       // the streamed load's first picture (as_stream_preview)
static std::string g_preview_text;

// Starts a streamed load; `size_hint` is the expected pickle size in bytes (0 if unknown; it only sizes buffers);
// `inflated` as for as_load. `from` and `to` (either may be null or empty) load only that window of each device's
// trace, as the CLI's --from/--to (the page's ?from=&to=): parse_trace_window, the one rule. Returns 1, or 0 with the
// reason in as_error() for a window that does not parse.
EMSCRIPTEN_KEEPALIVE int32_t as_stream_begin(double size_hint, int32_t inflated, const char* from, const char* to) {
  g_inflated = inflated != 0;
  LoadOptions options;
  auto window = parse_trace_window(from ? from : "", to ? to : "");
  if (!window.ok()) {
    g_stream.reset();
    g_error = window.error().describe();
    return 0;
  }
  options.window = *window;
  g_stream = std::make_unique<SnapshotStream>(std::move(options), static_cast<uint64_t>(size_hint));
  g_preview = PreviewCurve{};
  return 1;
}

// The memory curve of the trace rows the streamed load has parsed so far (allocscope/preview.h), as JSON text:
// {"rows", "rows_per_column", "low": [...], "high": [...], "highest", "highest_row", "fed"} (bytes in "fed"). Reads
// only the rows parsed since the last call. Valid until the next call.
EMSCRIPTEN_KEEPALIVE const char* as_stream_preview() {
  if (!g_stream) return "{}";
  g_preview.extend(g_stream->events_so_far());
  const json j{{"rows", g_preview.rows()}, {"rows_per_column", g_preview.rows_per_column()},
               {"low", g_preview.low()}, {"high", g_preview.high()}, {"highest", g_preview.highest()},
               {"highest_row", g_preview.highest_row()}, {"fed", g_stream->bytes_fed()}};
  g_preview_text = j.dump();
  return g_preview_text.c_str();
}

// Feeds `n` bytes at `data` (still owned by the caller). Returns 1, or 0 with the reason in as_error().
EMSCRIPTEN_KEEPALIVE int32_t as_stream_feed(const uint8_t* data, size_t n) {
  if (!g_stream) {
    g_error = "bridge: as_stream_feed before as_stream_begin";
    return 0;
  }
  Status st = g_stream->feed({data, n});
  if (!st.ok()) {
    g_error = describe_load_error(st.error());
    return 0;
  }
  return 1;
}

// Ends a streamed load: returns the file id, or 0 with the reason in as_error().
EMSCRIPTEN_KEEPALIVE int32_t as_stream_end(const char* name) {
  if (!g_stream) {
    g_error = "bridge: as_stream_end before as_stream_begin";
    return 0;
  }
  auto result = g_stream->finish();
  g_stream.reset();
  return add_file(std::move(result), name);
}

// Opens the pinned host memory of file `id` as a file of its own (Session::open_host).
EMSCRIPTEN_KEEPALIVE int32_t as_open_host(int32_t id) { return g_session.open_host(id); }

EMSCRIPTEN_KEEPALIVE void as_unload(int32_t id) { g_session.unload(id); }

EMSCRIPTEN_KEEPALIVE const char* as_error() { return g_error.c_str(); }

// Runs {"method": NAME, "id": N | "ids": [N...], ...}; returns the answer's JSON text ({"error": ...} on failure).
// Blobs stay readable through as_blob_* until the next call.
EMSCRIPTEN_KEEPALIVE const char* as_call(const char* request_text) {
  const json req = json::parse(request_text ? request_text : "", nullptr, /*allow_exceptions=*/false);
  g_answer = req.is_discarded() ? Answer::error("bridge: request is not a JSON object") : g_session.call(req);
  g_answer_text = answer_text(g_answer);
  return g_answer_text.c_str();
}

EMSCRIPTEN_KEEPALIVE uint32_t as_blob_count() { return static_cast<uint32_t>(g_answer.blobs.size()); }
EMSCRIPTEN_KEEPALIVE const uint8_t* as_blob_ptr(uint32_t i) {
  return i < g_answer.blobs.size() ? g_answer.blobs[i].bytes.data() : nullptr;
}
EMSCRIPTEN_KEEPALIVE uint32_t as_blob_size(uint32_t i) {
  return i < g_answer.blobs.size() ? static_cast<uint32_t>(g_answer.blobs[i].bytes.size()) : 0;
}

}  // extern "C"
