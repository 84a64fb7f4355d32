// The bridge's method registry: each view's query lives in its own methods_*.cpp (plain C++, no Emscripten) and
// registers itself; bridge.cpp only moves a JSON request in and a JSON answer plus typed-array blobs out.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "allocscope/snapshot.h"

namespace allocscope::wasm {

using json = nlohmann::json;

// One loaded file. Views ask by id; analyses that are costly to build are cached here lazily by the methods.
struct Loaded {
  Snapshot snapshot;
  std::string name;                        // the file name the page gave, for messages
  std::string host_of;                     // a file's pinned host memory opened as its own (as_open_host): that file's name
  std::vector<std::shared_ptr<void>> cache;  // per-method caches, indexed by Method::cache_slot
};

// What a method returns: a small JSON body and typed arrays (moved to JS as ArrayBuffers, never as objects).
struct Answer {
  json body = json::object();
  struct Blob {
    std::string name;
    std::string type;  // "u8" | "u16" | "u32" | "i32" | "f32" | "f64"
    std::vector<uint8_t> bytes;
  };
  std::vector<Blob> blobs;

  template <typename T>
  void add(std::string name, std::string type, std::span<const T> values) {
    Blob b{std::move(name), std::move(type), std::vector<uint8_t>(values.size_bytes())};
    if (!values.empty()) std::memcpy(b.bytes.data(), values.data(), values.size_bytes());
    blobs.push_back(std::move(b));
  }
  // Counts sent in a narrower type, each above its largest value sent as that value.
  template <typename Narrow>
  void add_saturated(std::string name, std::string type, std::span<const uint32_t> values) {
    std::vector<Narrow> v(values.size());
    constexpr uint32_t kMax = std::numeric_limits<Narrow>::max();
    for (size_t i = 0; i < values.size(); ++i) v[i] = static_cast<Narrow>(std::min(values[i], kMax));
    add<Narrow>(std::move(name), std::move(type), v);
  }
  static Answer error(std::string message) {
    Answer a;
    a.body = json{{"error", std::move(message)}};
    return a;
  }
};

// Request fields with defaults: the page is trusted but a wrong type must give an error, never abort.
struct Request {
  const json& j;
  int64_t i64(const char* key, int64_t fallback = 0) const;
  double f64(const char* key, double fallback = 0) const;
  bool flag(const char* key, bool fallback = false) const;
  std::string str(const char* key, const std::string& fallback = "") const;
};

struct Method {
  const char* name;
  // `files` are the loaded files named by the request's "ids" (or its single "id"), in order, never empty.
  Answer (*run)(const Request& request, std::span<Loaded* const> files);
};

struct RegisterMethod {
  explicit RegisterMethod(const Method& m);
};
const std::vector<Method>& all_methods();

// A slot index for Loaded::cache, unique per caller (call once into a static).
size_t new_cache_slot();

template <typename T>
T* cached(Loaded& f, size_t slot) {
  if (f.cache.size() <= slot) f.cache.resize(slot + 1);
  return static_cast<T*>(f.cache[slot].get());
}
template <typename T>
T* store(Loaded& f, size_t slot, std::unique_ptr<T> value) {
  if (f.cache.size() <= slot) f.cache.resize(slot + 1);
  T* raw = value.get();
  f.cache[slot] = std::shared_ptr<void>(value.release(), [](void* p) { delete static_cast<T*>(p); });
  return raw;
}

// The files a page has open and the dispatch of its requests: the wasm bridge keeps one for the page's worker, and
// `allocscope view --native` one for a page whose files are too big for the tab (the same methods, run natively).
class Session {
 public:
  // Keeps a loaded snapshot; returns its id (ids start at 1 and are never reused).
  int32_t add(Snapshot snapshot, std::string name);
  // Opens file `id`'s pinned host memory (Snapshot::host: PyTorch 2.14's record_pinned_host_memory) as a file of its
  // own, so every view answers it as it answers a GPU; returns its id, or 0 when the file holds none. A copy: the
  // host snapshot is small (one allocator's pinned blocks), and a file of its own keeps the methods' caches apart.
  int32_t open_host(int32_t id);
  void unload(int32_t id);
  Loaded* file(int64_t id);
  // Runs {"method": NAME, "id": N | "ids": [N...], ...}: an error answer for a bad request, an unknown method or id.
  Answer call(const json& request);

 private:
  std::vector<std::unique_ptr<Loaded>> files_;  // id = index + 1; a slot is nulled on unload
};

// The JSON text the page reads for an answer: its body, plus "_blobs": [{name, type}] naming its typed arrays in
// order when it has any (`offsets`, when given, adds each blob's byte offset and size in one buffer, 8-aligned).
std::string answer_text(const Answer& answer, std::vector<uint64_t>* offsets = nullptr);

// JSON-safe numbers: addresses and byte counts can exceed 2^53, so they travel as decimal strings where exactness
// matters and as doubles where they only position pixels.
inline std::string u64s(uint64_t v) { return std::to_string(v); }

}  // namespace allocscope::wasm
