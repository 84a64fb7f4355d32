// The bridge's method registry: each view's query lives in its own methods_*.cpp (plain C++, no Emscripten) and
// registers itself; bridge.cpp only moves a JSON request in and a JSON answer plus typed-array blobs out.
#pragma once

#include <cstdint>
#include <cstring>
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
    std::string type;  // "u8" | "u32" | "i32" | "f32" | "f64"
    std::vector<uint8_t> bytes;
  };
  std::vector<Blob> blobs;

  template <typename T>
  void add(std::string name, std::string type, std::span<const T> values) {
    Blob b{std::move(name), std::move(type), std::vector<uint8_t>(values.size_bytes())};
    if (!values.empty()) std::memcpy(b.bytes.data(), values.data(), values.size_bytes());
    blobs.push_back(std::move(b));
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

// JSON-safe numbers: addresses and byte counts can exceed 2^53, so they travel as decimal strings where exactness
// matters and as doubles where they only position pixels.
inline std::string u64s(uint64_t v) { return std::to_string(v); }

}  // namespace allocscope::wasm
