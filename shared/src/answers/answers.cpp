// The answers' dispatch, the loaded file's shared analyses and the helpers every answer uses.
#include "allocscope/answers.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "answer_defs.h"

namespace allocscope {

LoadedSnapshot::LoadedSnapshot(std::string name, Snapshot snapshot)
    : name_(std::move(name)), snapshot_(std::move(snapshot)) {}
LoadedSnapshot::~LoadedSnapshot() = default;

const Lifetimes& LoadedSnapshot::lifetimes() {
  if (!lifetimes_) lifetimes_ = std::make_unique<Lifetimes>(build_lifetimes(snapshot_));
  return *lifetimes_;
}
const FrameFilter& LoadedSnapshot::frame_filter() {
  if (!frame_filter_) frame_filter_ = std::make_unique<FrameFilter>(snapshot_);
  return *frame_filter_;
}

bool AnswerOptions::has(std::string_view name) const {
  return std::any_of(items.begin(), items.end(), [&](const auto& o) { return o.first == name; });
}
std::string AnswerOptions::get(std::string_view name, const std::string& fallback) const {
  for (auto it = items.rbegin(); it != items.rend(); ++it)
    if (it->first == name) return it->second;
  return fallback;
}
std::vector<std::string> AnswerOptions::all(std::string_view name) const {
  std::vector<std::string> v;
  for (const auto& [k, value] : items)
    if (k == name) v.push_back(value);
  return v;
}

namespace {
using namespace answers;
const AnswerDef* const* table() {
  static const AnswerDef* const defs[] = {&summary_answer(),    &peak_answer(), &leaks_answer(),
                                          &oom_answer(),        &categories_answer(), &diff_answer(),
                                          &whatif_answer(),     &export_answer(), &check_answer_def(), &plan_answer(), nullptr};
  return defs;
}
const AnswerDef* find(std::string_view name) {
  for (const AnswerDef* const* d = table(); *d; ++d)
    if (name == (*d)->spec.name) return *d;
  return nullptr;
}
}  // namespace

const AnswerSpec* answer_spec(std::string_view name) {
  const AnswerDef* d = find(name);
  return d ? &d->spec : nullptr;
}

std::vector<std::string> answer_names() {
  std::vector<std::string> v;
  for (const AnswerDef* const* d = table(); *d; ++d) v.emplace_back((*d)->spec.name);
  return v;
}

Status check_answer(std::string_view name, const AnswerOptions& options, size_t files) {
  const AnswerDef* d = find(name);
  if (!d) return Error{"unknown answer '" + std::string(name) + "'"};
  const AnswerSpec& spec = d->spec;
  for (const auto& [option, value] : options.items) {
    const bool known = std::count(spec.switches.begin(), spec.switches.end(), option) ||
                       std::count(spec.value_options.begin(), spec.value_options.end(), option);
    if (!known) return fail(spec.name, "unknown option --" + option);
  }
  if (files < spec.min_files || files > spec.max_files) return Error{spec.usage};
  return d->check(options);
}

Result<AnswerOutput> answer(std::string_view name, std::span<LoadedSnapshot* const> files,
                            const AnswerOptions& options) {
  ALLOCSCOPE_RETURN_IF_ERROR(check_answer(name, options, files.size()));
  return find(name)->run(files, options);
}

bool answered_without_device(const Lifetimes& all, const DeviceLifetimes& lt) {
  if (lt.event_count > 0 || all.devices.size() == 1) return true;
  // A file with no trace on any device (history off, or a 2.0 snapshot of segments) answers for every device
  // from the state it holds, as `summary` does: a two-GPU such file once got "no device with a trace".
  for (const DeviceLifetimes& d : all.devices)
    if (d.event_count > 0) return false;
  return true;
}

std::string device_list(const Lifetimes& all) {
  std::string o;
  for (const DeviceLifetimes& d : all.devices) o += (o.empty() ? "" : ", ") + std::to_string(d.device);
  return o.empty() ? "none" : o;
}

namespace answers {

Error fail(const char* answer, const std::string& message) { return Error{std::string(answer) + ": " + message}; }

bool parse_count(const std::string& text, uint32_t* out) {
  if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  const unsigned long long v = std::stoull(text);
  if (v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

Result<AnswerOutput> no_device(const char* answer, LoadedSnapshot& file, const std::string& device, bool json) {
  const Lifetimes& all = file.lifetimes();
  if (all.devices.empty()) {
    AnswerOutput o;
    o.out = json ? "{\"devices\":[]}\n"
                 : printable(file.name()) + " holds no allocations: its device traces are empty and it has no "
                   "segments (taken before anything was allocated, or after everything was freed and "
                   "torch.cuda.empty_cache() gave the cache back).\n";
    return o;
  }
  if (!device.empty())
    return fail(answer, "no device " + device + " in " + file.name() + " (devices: " + device_list(all) + ")");
  return fail(answer, "no device with a trace in " + file.name() + " (devices with segments only: " +
                          device_list(all) + ")");
}

std::string devices_left_out(const char* answer, const Lifetimes& all) {
  std::string left;
  int64_t first = -1;
  for (const DeviceLifetimes& lt : all.devices)
    if (!answered_without_device(all, lt)) {
      left += (left.empty() ? "" : ", ") + std::string("cuda:") + std::to_string(lt.device);
      if (first < 0) first = lt.device;
    }
  if (left.empty()) return "";
  return "allocscope " + std::string(answer) + ": left out " + left + ": segments but no trace (`allocscope peak " +
         "--device " + std::to_string(first) + "` answers from its segments; `allocscope summary` lists every device)";
}

Status parse_rules(const char* answer, const AnswerOptions& o, CategoryOptions* out) {
  for (const std::string& rule : o.all("rule")) {
    auto parsed = parse_category_rule(rule);
    if (!parsed.ok()) return fail(answer, parsed.error().describe());
    out->rules.push_back(parsed.value());
  }
  return {};
}

Status parse_device(const char* answer, const AnswerOptions& o, int64_t* out) {
  *out = -1;
  uint32_t device = 0;
  if (!o.has("device")) return {};
  if (!parse_count(o.get("device"), &device)) return fail(answer, "--device needs an ordinal");
  *out = device;
  return {};
}

const DeviceLifetimes* device_to_predict(LoadedSnapshot& f, const AnswerOptions& o) {
  const Snapshot& s = f.snapshot();
  if (o.has("device")) {
    for (const DeviceLifetimes& d : f.lifetimes().devices)
      if (std::to_string(d.device) == o.get("device")) return &d;
    return nullptr;
  }
  const DeviceLifetimes* best = nullptr;
  bool best_oom = false;
  for (const DeviceLifetimes& d : f.lifetimes().devices) {
    if (d.event_count == 0) continue;
    bool oom = false;
    for (uint32_t i = 0; i < d.event_count && !oom; ++i) oom = s.events.action[d.event_begin + i] == Action::kOom;
    if (!best || (oom && !best_oom) || (oom == best_oom && d.event_count > best->event_count)) best = &d, best_oom = oom;
  }
  return best;
}

std::string predicted_device_line(LoadedSnapshot& f, const DeviceLifetimes& lt, const AnswerOptions& o) {
  size_t traced = 0;
  for (const DeviceLifetimes& d : f.lifetimes().devices) traced += d.event_count > 0;
  if (o.has("device") || o.has("json") || traced < 2) return "";
  return "(" + printable(f.name()) + " traces " + std::to_string(traced) + " devices: this is cuda:" +
         std::to_string(lt.device) + ", the one that ran out of memory or else the busiest; --device N asks about "
         "another)\n";
}

std::string json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace answers
}  // namespace allocscope
