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

static std::vector<Method>& registry() {
  static std::vector<Method> methods;
  return methods;
}
RegisterMethod::RegisterMethod(const Method& m) { registry().push_back(m); }
const std::vector<Method>& all_methods() { return registry(); }
size_t new_cache_slot() {
  static size_t next = 0;
  return next++;
}

int64_t Request::i64(const char* key, int64_t fallback) const {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : fallback;
}
double Request::f64(const char* key, double fallback) const {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}
bool Request::flag(const char* key, bool fallback) const {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}
std::string Request::str(const char* key, const std::string& fallback) const {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

namespace {
std::vector<std::unique_ptr<Loaded>> g_files;  // id = index + 1; a slot is nulled on unload
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
  auto f = std::make_unique<Loaded>();
  f->snapshot = std::move(result).value();
  f->name = name ? name : "";
  g_files.push_back(std::move(f));
  return static_cast<int32_t>(g_files.size());
}

Loaded* file_by_id(int64_t id) {
  if (id < 1 || id > static_cast<int64_t>(g_files.size())) return nullptr;
  return g_files[static_cast<size_t>(id - 1)].get();
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
// `inflated` as for as_load.
EMSCRIPTEN_KEEPALIVE int32_t as_stream_begin(double size_hint, int32_t inflated) {
  g_inflated = inflated != 0;
  g_stream = std::make_unique<SnapshotStream>(LoadOptions{}, static_cast<uint64_t>(size_hint));
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

// Opens the pinned host memory of file `id` (Snapshot::host: PyTorch 2.14's record_pinned_host_memory) as a file of
// its own, so every view answers it as it answers a GPU. Returns its id, or 0 when the file holds none. A copy: the
// host snapshot is small (one allocator's pinned blocks), and a file of its own keeps the methods' caches apart.
EMSCRIPTEN_KEEPALIVE int32_t as_open_host(int32_t id) {
  const Loaded* f = file_by_id(id);
  if (!f || !f->snapshot.host) return 0;
  auto h = std::make_unique<Loaded>();
  h->snapshot = *f->snapshot.host;
  h->name = f->name + " \u00b7 pinned host memory";
  h->host_of = f->name;
  g_files.push_back(std::move(h));
  return static_cast<int32_t>(g_files.size());
}

EMSCRIPTEN_KEEPALIVE void as_unload(int32_t id) {
  if (file_by_id(id)) g_files[static_cast<size_t>(id - 1)].reset();
}

EMSCRIPTEN_KEEPALIVE const char* as_error() { return g_error.c_str(); }

// Runs {"method": NAME, "id": N | "ids": [N...], ...}; returns the answer's JSON text ({"error": ...} on failure).
// Blobs stay readable through as_blob_* until the next call.
EMSCRIPTEN_KEEPALIVE const char* as_call(const char* request_text) {
  g_answer = Answer{};
  json req = json::parse(request_text ? request_text : "", nullptr, /*allow_exceptions=*/false);
  if (req.is_discarded() || !req.is_object()) {
    g_answer = Answer::error("bridge: request is not a JSON object");
  } else {
    Request r{req};
    std::string name = r.str("method");
    std::vector<Loaded*> files;
    bool missing = false;
    if (auto it = req.find("ids"); it != req.end() && it->is_array()) {
      for (const auto& v : *it) {
        Loaded* f = v.is_number_integer() ? file_by_id(v.get<int64_t>()) : nullptr;
        if (!f) missing = true;
        files.push_back(f);
      }
    } else {
      Loaded* f = file_by_id(r.i64("id"));
      if (!f) missing = true;
      files.push_back(f);
    }
    const Method* m = nullptr;
    for (const Method& candidate : all_methods())
      if (name == candidate.name) m = &candidate;
    if (!m)
      g_answer = Answer::error("bridge: unknown method '" + name + "'");
    else if (missing || files.empty())
      g_answer = Answer::error("bridge: no loaded file with that id");
    else
      g_answer = m->run(r, files);
  }
  json blobs = json::array();
  for (const auto& b : g_answer.blobs) blobs.push_back({{"name", b.name}, {"type", b.type}});
  if (!g_answer.blobs.empty()) g_answer.body["_blobs"] = blobs;
  g_answer_text = g_answer.body.dump(-1, ' ', false, json::error_handler_t::replace);
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
