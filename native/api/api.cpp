// liballocscope's C ABI (allocscope.h) over the shared answers: load, answer, columns. Errors are values here too:
// nothing thrown crosses the ABI (an exception, out of memory included, becomes the call's error).
#include "allocscope.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "allocscope/answers.h"
#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/loader.h"
#include "options.h"
#include "web_assets.h"
#include "web_bundle.h"

namespace {

using allocscope::LoadedSnapshot;
using nlohmann::json;

struct DeviceColumns {
  std::vector<uint32_t> alloc_step, free_step, site;
  std::vector<int64_t> alloc_time, free_time;
  std::vector<uint8_t> category;
  std::string sites_json;
};

char* copy(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) return nullptr;
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}
void set(char** slot, const std::string& s) {
  if (slot) *slot = copy(s);
}
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Runs `body`, turning anything it throws into an error (the ABI's callers are C and Python).
template <typename T, typename F>
T guarded(char** error, T failed, F body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    set(error, "out of memory: this file needs more memory than the process has");
  } catch (const std::exception& e) {
    set(error, std::string("internal error: ") + e.what());
  }
  return failed;
}

}  // namespace

struct allocscope_file {
  std::unique_ptr<LoadedSnapshot> loaded;
  std::map<int64_t, std::unique_ptr<DeviceColumns>> columns;
};

namespace {
allocscope_file* wrap(allocscope::Result<allocscope::Snapshot> r, const std::string& name, char** error) {
  if (!r.ok()) {
    set(error, name + ": " + r.error().describe());
    return nullptr;
  }
  auto f = std::make_unique<allocscope_file>();
  f->loaded = std::make_unique<LoadedSnapshot>(name, std::move(r).value());
  return f.release();
}
}  // namespace

extern "C" {

const char* allocscope_version(void) { return "0.1.0"; }
int allocscope_abi_version(void) { return 1; }

allocscope_file* allocscope_load(const char* path, const char* name, char** error) {
  return allocscope_load_window(path, name, nullptr, nullptr, error);
}

allocscope_file* allocscope_load_window(const char* path, const char* name, const char* from, const char* to,
                                        char** error) {
  if (!path) {
    set(error, "no path given");
    return nullptr;
  }
  auto window = allocscope::parse_trace_window(from ? from : "", to ? to : "");
  if (!window.ok()) {
    set(error, window.error().describe());
    return nullptr;
  }
  return guarded(error, static_cast<allocscope_file*>(nullptr), [&] {
    allocscope::LoadOptions options;
    options.window = window.value();
    // Read, not mapped: another process truncating a mapped file would raise SIGBUS in the caller's process (a
    // notebook's kernel), where a read gives this load an error.
    options.map_file = false;
    return wrap(allocscope::load_snapshot_file(path, options), name ? name : path, error);
  });
}

allocscope_file* allocscope_load_bytes(const uint8_t* data, size_t size, const char* name, char** error) {
  if (!data && size) {
    set(error, "no bytes given");
    return nullptr;
  }
  return guarded(error, static_cast<allocscope_file*>(nullptr), [&] {
    return wrap(allocscope::load_snapshot({data, size}), name ? name : "<bytes>", error);
  });
}

void allocscope_close(allocscope_file* file) { delete file; }

int allocscope_answer(const char* answer, allocscope_file* const* files, size_t file_count, const char* options_json,
                      char** out, char** notes, char** error) {
  if (!answer || (file_count && !files)) {
    set(error, "no answer or files given");
    return -1;
  }
  return guarded(error, -1, [&]() -> int {
    allocscope::AnswerOptions options;
    if (options_json && *options_json) {
      const json j = json::parse(options_json, nullptr, false);
      if (!j.is_array()) {
        set(error, "options must be a JSON array of [name, value] pairs");
        return -1;
      }
      for (const json& pair : j) {
        if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string()) {
          set(error, "options must be a JSON array of [name, value] string pairs");
          return -1;
        }
        options.items.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
      }
    }
    std::vector<LoadedSnapshot*> loaded;
    for (size_t k = 0; k < file_count; ++k) {
      if (!files[k]) {
        set(error, "file " + std::to_string(k) + " is closed");
        return -1;
      }
      loaded.push_back(files[k]->loaded.get());
    }
    auto r = allocscope::answer(answer, loaded, options);
    if (!r.ok()) {
      set(error, r.error().describe());
      return -1;
    }
    std::string joined;
    for (const std::string& n : r->notes) joined += (joined.empty() ? "" : "\n") + n;
    set(out, r->out);
    set(notes, joined);
    return r->exit_code;
  });
}

char* allocscope_answer_specs(void) {
  json j = json::object();
  for (const std::string& name : allocscope::answer_names()) {
    const allocscope::AnswerSpec* s = allocscope::answer_spec(name);
    j[name] = {{"switches", s->switches}, {"values", s->value_options}, {"files", {s->min_files, s->max_files}}};
  }
  return copy(dump(j));
}

char* allocscope_devices(allocscope_file* file) {
  if (!file) return copy("[]");
  char* error = nullptr;
  char* r = guarded(&error, static_cast<char*>(nullptr), [&] {
    json j = json::array();
    for (const auto& d : file->loaded->lifetimes().devices) j.push_back(d.device);
    return copy(dump(j));
  });
  std::free(error);
  return r;
}

char* allocscope_category_names(void) {
  json j = json::array();
  for (int c = 0; c < allocscope::kCategoryCount; ++c)
    j.push_back(std::string(allocscope::category_name(static_cast<allocscope::Category>(c))));
  return copy(dump(j));
}

int allocscope_allocations(allocscope_file* file, int64_t device, allocscope_columns* out, char** error) {
  if (!file || !out || out->struct_size < sizeof(allocscope_columns)) {
    set(error, "no file, or an allocscope_columns of another version");
    return -1;
  }
  return guarded(error, -1, [&]() -> int {
    LoadedSnapshot& f = *file->loaded;
    const allocscope::DeviceLifetimes* lt = f.lifetimes().device(device);
    if (!lt) {
      set(error, "no device " + std::to_string(device) + " in " + f.name() + " (devices: " +
                     allocscope::device_list(f.lifetimes()) + ")");
      return -1;
    }
    auto& slot = file->columns[device];
    if (!slot) {
      auto c = std::make_unique<DeviceColumns>();
      const allocscope::Snapshot& s = f.snapshot();
      const allocscope::FrameFilter& ff = f.frame_filter();
      const auto cats = allocscope::categorize(s, *lt, allocscope::detect_iterations(s, *lt), ff);
      std::unordered_map<allocscope::FrameId, uint32_t> site_index;
      json sites = json::array({""});
      const uint32_t n = lt->count();
      c->alloc_step.resize(n);
      c->free_step.resize(n);
      c->site.resize(n);
      c->alloc_time.resize(n);
      c->free_time.resize(n);
      c->category.assign(n, static_cast<uint8_t>(allocscope::Category::kUnknown));
      const bool timed = lt->timed(s);
      for (uint32_t r = 0; r < n; ++r) {
        c->alloc_step[r] = lt->birth_step(r);
        c->free_step[r] = lt->death_step(r);
        c->alloc_time[r] = timed ? lt->alloc_time_us(s, r) : 0;
        c->free_time[r] = timed ? lt->free_time_us(s, r) : 0;
        if (cats.ok()) c->category[r] = static_cast<uint8_t>(cats.value().category[r]);
        const allocscope::FrameId site = ff.site(lt->stack[r]);
        if (site == allocscope::kNoFrame) continue;
        auto [it, added] = site_index.emplace(site, static_cast<uint32_t>(sites.size()));
        if (added) sites.push_back(allocscope::FrameFilter::format(s, site));
        c->site[r] = it->second;
      }
      c->sites_json = dump(sites);
      slot = std::move(c);
    }
    const DeviceColumns& c = *slot;
    out->rows = lt->count();
    out->steps = lt->steps();
    out->addr = lt->addr.data();
    out->size = lt->size.data();
    out->stream = lt->stream.data();
    out->alloc_step = c.alloc_step.data();
    out->free_step = c.free_step.data();
    out->alloc_time_us = c.alloc_time.data();
    out->free_time_us = c.free_time.data();
    out->site = c.site.data();
    out->category = c.category.data();
    out->total = lt->total.data();
    out->sites_json = c.sites_json.c_str();
    return 0;
  });
}

char* allocscope_report_html(const char* site_dir, const char* const* paths, size_t path_count, char** error) {
  return allocscope_report_html_window(site_dir, paths, path_count, nullptr, nullptr, error);
}

char* allocscope_report_html_window(const char* site_dir, const char* const* paths, size_t path_count,
                                    const char* from, const char* to, char** error) {
  if (!site_dir || !*site_dir || (path_count && !paths)) {
    set(error, "no viewer site or files given");
    return nullptr;
  }
  return guarded(error, static_cast<char*>(nullptr), [&]() -> char* {
    namespace cli = allocscope::cli;
    std::string why;
    auto assets = cli::find_web_assets(site_dir, &why);
    if (!assets) return set(error, why), nullptr;
    std::vector<cli::EmbeddedSnapshot> files(path_count);
    for (size_t k = 0; k < path_count; ++k)
      if (!paths[k] || !cli::embed_snapshot_file(paths[k], &files[k], &why))
        return set(error, std::string(paths[k] ? paths[k] : "(null)") + ": " + why), nullptr;
    const std::string html = cli::build_report(*assets, files, &why, {from ? from : "", to ? to : ""});
    if (html.empty()) return set(error, why), nullptr;
    return copy(html);
  });
}

char* allocscope_output_path(const char* pattern) {
  if (!pattern) return nullptr;
  char* error = nullptr;
  char* r = guarded(&error, static_cast<char*>(nullptr),
                    [&] { return copy(allocscope::capture::job_output_path(pattern)); });
  std::free(error);
  return r;
}

void allocscope_free(void* p) { std::free(p); }

}  // extern "C"
