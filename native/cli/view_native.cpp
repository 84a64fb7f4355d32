// `allocscope view`'s native backend (view_native.h).
#include "view_native.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <new>

#include <nlohmann/json.hpp>

#include "allocscope/loader.h"
#include "allocscope/preview.h"
#include "methods.h"

namespace allocscope::cli {

using nlohmann::json;

bool too_big_for_a_tab(const std::string& path, uint64_t limit) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return false;
  if (size > limit) return true;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  uint8_t head[2] = {0, 0}, tail[4] = {0, 0, 0, 0};
  const bool gz = std::fread(head, 1, 2, f) == 2 && is_gzip({head, 2});
  // gzip's trailer holds the inflated size modulo 2^32: a file that inflates past 4 GiB can read small there, so a
  // .gz above a sixteenth of the limit counts as too big (snapshots compress 8-15x).
  bool big = false;
  if (gz && size >= 18 && std::fseek(f, -4, SEEK_END) == 0 && std::fread(tail, 1, 4, f) == 4) {
    const uint64_t isize = uint64_t{tail[0]} | uint64_t{tail[1]} << 8 | uint64_t{tail[2]} << 16 | uint64_t{tail[3]} << 24;
    big = isize > limit || size > limit / 16;
  }
  std::fclose(f);
  return big;
}

struct NativeBackend::State {
  std::vector<std::string> files;
  TraceWindow window;  // `view --from/--to`: each file loads only this window
  std::mutex mu;  // the session's files and caches: one request at a time
  wasm::Session session;
  struct File {
    bool loaded = false;
    std::string error;
    json opened;  // {"ids", "infos"}
    std::atomic<uint64_t> done{0}, total{0};
    std::atomic<int> phase{0};  // 0 waiting, 1 inflate, 2 parse, 3 ready
    // The first picture while it loads: the memory curve of the rows parsed so far (preview.h), as the viewer's
    // worker draws it; made on the parsing thread, its JSON handed to api/progress every 100 ms.
    PreviewCurve preview;
    std::chrono::steady_clock::time_point preview_at{};
    std::mutex preview_mu;
    std::string preview_json;
  };
  std::vector<std::unique_ptr<File>> state;
};

NativeBackend::NativeBackend(std::vector<std::string> files, TraceWindow window) : s_(std::make_unique<State>()) {
  s_->files = std::move(files);
  s_->window = window;
  for (size_t i = 0; i < s_->files.size(); ++i) s_->state.push_back(std::make_unique<State::File>());
}
NativeBackend::~NativeBackend() = default;

namespace {

HttpResponse json_response(const json& j, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

// file=I of a query, or -1.
long file_index(const std::string& query, size_t count) {
  if (query.rfind("file=", 0) != 0) return -1;
  const std::string v = query.substr(5);
  if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos) return -1;
  const long i = std::stol(v);
  return i < static_cast<long>(count) ? i : -1;
}

}  // namespace

std::optional<HttpResponse> NativeBackend::answer(const HttpRequest& req) {
  State& s = *s_;
  if (req.path == "/api/progress") {
    const long i = file_index(req.query, s.files.size());
    if (i < 0) return json_response({{"error", "no such file"}}, 404);
    static const char* const kPhase[] = {"waiting", "inflate", "parse", "ready"};
    State::File& f = *s.state[static_cast<size_t>(i)];
    json j{{"phase", kPhase[f.phase.load()]}, {"done", f.done.load()}, {"total", f.total.load()}};
    {
      std::lock_guard<std::mutex> lock(f.preview_mu);
      if (!f.preview_json.empty()) j["curve"] = json::parse(f.preview_json);
    }
    return json_response(j);
  }
  if (req.method != "POST") return std::nullopt;
  if (req.path == "/api/open") {
    const long i = file_index(req.query, s.files.size());
    if (i < 0) return json_response({{"error", "no such file"}}, 404);
    State::File& f = *s.state[static_cast<size_t>(i)];
    std::lock_guard<std::mutex> lock(s.mu);
    if (!f.loaded && f.error.empty()) {
      const std::string& path = s.files[static_cast<size_t>(i)];
      LoadOptions opts;
      opts.window = s.window;
      opts.progress = [&f](std::string_view phase, uint64_t done, uint64_t total) {
        f.phase.store(phase == "inflate" ? 1 : 2);
        f.done.store(done);
        f.total.store(total);
      };
      opts.rows_so_far = [&f](const EventColumns& rows) {
        const auto now = std::chrono::steady_clock::now();
        if (now - f.preview_at < std::chrono::milliseconds(100)) return;
        f.preview_at = now;
        f.preview.extend(rows);
        const json c{{"rows", f.preview.rows()},   {"rows_per_column", f.preview.rows_per_column()},
                     {"low", f.preview.low()},     {"high", f.preview.high()},
                     {"highest", f.preview.highest()}, {"highest_row", f.preview.highest_row()},
                     {"fed", f.done.load()},       {"total", f.total.load()}};
        std::lock_guard<std::mutex> lock(f.preview_mu);
        f.preview_json = c.dump();
      };
      const std::string name = std::filesystem::path(path).filename().string();
      // Out of memory (or anything else thrown) ends this load with its reason, not a dropped connection.
      try {
        auto r = load_snapshot_file(path, opts);
        if (!r.ok()) {
          f.error = name + ": " + r.error().describe();
        } else {
          json ids = json::array(), infos = json::array();
          const int32_t id = s.session.add(std::move(r).value(), name);
          ids.push_back(id);
          infos.push_back(s.session.call({{"method", "info"}, {"id", id}}).body);
          // Pinned host memory opens as a file of its own (the page lists it after all the files, as the worker).
          if (!infos[0]["host"].is_null()) {
            if (const int32_t host = s.session.open_host(id)) {
              ids.push_back(host);
              infos.push_back(s.session.call({{"method", "info"}, {"id", host}}).body);
              infos[0]["host"]["file"] = 1;
            }
          }
          f.opened = {{"ids", ids}, {"infos", infos}};
          f.loaded = true;
        }
      } catch (const std::bad_alloc&) {
        f.error = name + ": this machine ran out of memory loading it (the model needs about 0.45 times the pickle)";
      } catch (const std::exception& e) {
        f.error = name + ": " + e.what();
      }
      f.phase.store(3);
    }
    if (!f.error.empty()) return json_response({{"error", f.error}});
    return json_response(f.opened);
  }
  if (req.path == "/api/call") {
    const json request = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    const auto t_wait = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(s.mu);
    const auto t_call = std::chrono::steady_clock::now();
    wasm::Answer a;
    try {
      a = request.is_discarded() ? wasm::Answer::error("bridge: request is not a JSON object") : s.session.call(request);
    } catch (const std::bad_alloc&) {
      a = wasm::Answer::error("allocscope view ran out of memory answering this view");
    }
    const auto t_encode = std::chrono::steady_clock::now();
    std::vector<uint64_t> offsets;
    const std::string text = wasm::answer_text(a, &offsets);
    HttpResponse r;
    r.content_type = "application/octet-stream";
    const uint32_t n = static_cast<uint32_t>(text.size());
    const size_t start = (4 + text.size() + 7) / 8 * 8;
    size_t size = start;
    for (size_t b = 0; b < a.blobs.size(); ++b) size = start + offsets[b] + a.blobs[b].bytes.size();
    r.body.assign(size, '\0');
    for (int k = 0; k < 4; ++k) r.body[static_cast<size_t>(k)] = static_cast<char>(n >> (8 * k) & 0xff);
    std::memcpy(r.body.data() + 4, text.data(), text.size());
    for (size_t b = 0; b < a.blobs.size(); ++b)
      if (!a.blobs[b].bytes.empty()) std::memcpy(r.body.data() + start + offsets[b], a.blobs[b].bytes.data(), a.blobs[b].bytes.size());
    const auto t_end = std::chrono::steady_clock::now();
    auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
    char timing[160];
    std::snprintf(timing, sizeof timing, "wait;dur=%.1f, call;dur=%.1f, encode;dur=%.1f", ms(t_call - t_wait),
                  ms(t_encode - t_call), ms(t_end - t_encode));
    // The page's resource timing (DevTools, bench_pan_zoom.js) then tells this process's time from the wire's.
    r.headers.emplace_back("Server-Timing", timing);
    return r;
  }
  return std::nullopt;
}

}  // namespace allocscope::cli
