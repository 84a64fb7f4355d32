// The method registry, request fields and the Session's dispatch (methods.h): plain C++, built into the wasm bridge
// and into the native `allocscope view`, so a page gets the same answers from either.
#include "methods.h"

#include <cstdint>

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
  if (it == j.end() || !it->is_number()) return fallback;
  if (it->is_number_integer()) return it->get<int64_t>();
  // A float (1e300, NaN from a page's arithmetic) converted as is would be undefined: clamped, NaN the fallback.
  const double d = it->get<double>();
  if (!(d == d)) return fallback;
  return d <= -9.2e18 ? INT64_MIN : d >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(d);
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

int32_t Session::add(Snapshot snapshot, std::string name) {
  auto f = std::make_unique<Loaded>();
  f->snapshot = std::move(snapshot);
  f->name = std::move(name);
  files_.push_back(std::move(f));
  return static_cast<int32_t>(files_.size());
}

int32_t Session::open_host(int32_t id) {
  const Loaded* f = file(id);
  if (!f || !f->snapshot.host) return 0;
  auto h = std::make_unique<Loaded>();
  h->snapshot = *f->snapshot.host;
  h->name = f->name + " \u00b7 pinned host memory";
  h->host_of = f->name;
  files_.push_back(std::move(h));
  return static_cast<int32_t>(files_.size());
}

void Session::unload(int32_t id) {
  if (file(id)) files_[static_cast<size_t>(id - 1)].reset();
}

Loaded* Session::file(int64_t id) {
  if (id < 1 || id > static_cast<int64_t>(files_.size())) return nullptr;
  return files_[static_cast<size_t>(id - 1)].get();
}

Answer Session::call(const json& req) {
  if (!req.is_object()) return Answer::error("bridge: request is not a JSON object");
  Request r{req};
  const std::string name = r.str("method");
  std::vector<Loaded*> files;
  bool missing = false;
  if (auto it = req.find("ids"); it != req.end() && it->is_array()) {
    for (const auto& v : *it) {
      Loaded* f = v.is_number_integer() ? file(v.get<int64_t>()) : nullptr;
      if (!f) missing = true;
      files.push_back(f);
    }
  } else {
    Loaded* f = file(r.i64("id"));
    if (!f) missing = true;
    files.push_back(f);
  }
  const Method* m = nullptr;
  for (const Method& candidate : all_methods())
    if (name == candidate.name) m = &candidate;
  if (!m) return Answer::error("bridge: unknown method '" + name + "'");
  if (missing || files.empty()) return Answer::error("bridge: no loaded file with that id");
  return m->run(r, files);
}

std::string answer_text(const Answer& answer, std::vector<uint64_t>* offsets) {
  if (answer.blobs.empty()) return answer.body.dump(-1, ' ', false, json::error_handler_t::replace);
  json body = answer.body;
  json blobs = json::array();
  uint64_t at = 0;
  for (const auto& b : answer.blobs) {
    json entry{{"name", b.name}, {"type", b.type}};
    if (offsets) {
      entry["offset"] = at;
      entry["size"] = b.bytes.size();
      offsets->push_back(at);
      at += (b.bytes.size() + 7) / 8 * 8;  // typed arrays of 8-byte elements need 8-aligned offsets
    }
    blobs.push_back(std::move(entry));
  }
  body["_blobs"] = std::move(blobs);
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace allocscope::wasm
