// Shared CLI plumbing: snapshot loading with terminal progress, argument parsing, error reporting.
#include "cli_common.h"

#include <algorithm>

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "allocscope/answers.h"
#include "allocscope/frame_filter.h"
#include "allocscope/loader.h"

namespace allocscope::cli {

namespace {
bool g_host = false;  // `--device host`: load_or_report loads the file's pinned host memory (take_host_device)
TraceWindow g_window;  // `--from/--to` (take_window)
std::string g_window_from, g_window_to;  // as written: `view` hands them to the page, which parses them again

// What a windowed load kept, one line per device with a trace, on stderr: a window past a trace's end, or one that
// caught no entry, must not read as an empty job.
void say_window(const std::string& path, const Snapshot& s) {
  std::fprintf(stderr, "allocscope: %s: loaded %s of each device's trace\n", path.c_str(),
               describe_window(s.window).c_str());
  for (const DeviceTrace& d : s.devices) {
    if (!d.events_in_file()) continue;
    const uint32_t steps = d.window_end() - d.window_begin();
    if (!steps)
      std::fprintf(stderr, "  device %lld: no entry of its %llu is in the window (the state shown is the trace's end)\n",
                   static_cast<long long>(d.device), static_cast<unsigned long long>(d.events_in_file()));
    else
      std::fprintf(stderr, "  device %lld: steps %llu..%llu of %llu, with %u allocations alive at its start and %u "
                   "entries past its end (the releases of what was alive then, the allocations alive at the trace's "
                   "end)\n",
                   static_cast<long long>(d.device), static_cast<unsigned long long>(d.first_step),
                   static_cast<unsigned long long>(d.first_step + steps), static_cast<unsigned long long>(d.events_in_file()),
                   d.before, d.after);
  }
}
}  // namespace

bool take_window(const char* verb, std::vector<std::string>* argv) {
  const std::string v = verb;
  std::vector<std::string>& a = *argv;
  if (v != "peak" && v != "summary" && v != "view" && v != "plot") {
    // whatif's --to is its batch; record's options belong to the program it runs. Elsewhere a window is a wish
    // to answer, not an unknown option.
    if (v == "whatif" || v == "plan" || v == "record") return true;
    for (const std::string& s : a) {
      if (s == "--") break;
      if (s == "--from" || s.rfind("--from=", 0) == 0 || s == "--to" || s.rfind("--to=", 0) == 0) {
        std::fprintf(stderr, "allocscope %s: --from/--to: only peak, summary, view and plot load a window of a file "
                     "(allocscope peak FILE --from A --to B); this verb reads the whole file\n", verb);
        return false;
      }
    }
    return true;
  }
  std::string from, to;
  std::vector<std::string> rest;
  bool given = false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--") {
      rest.insert(rest.end(), a.begin() + static_cast<std::ptrdiff_t>(i), a.end());
      break;
    }
    std::string* into = nullptr;
    std::string value;
    for (const char* name : {"from", "to"}) {
      const std::string flag = std::string("--") + name;
      if (a[i] == flag) {
        if (i + 1 >= a.size()) {
          std::fprintf(stderr, "allocscope %s: %s needs a step or a time (1.5s, 200ms, 300us)\n", verb, flag.c_str());
          return false;
        }
        into = name[0] == 'f' ? &from : &to, value = a[++i];
      } else if (a[i].rfind(flag + "=", 0) == 0) {
        into = name[0] == 'f' ? &from : &to, value = a[i].substr(flag.size() + 1);
      }
    }
    if (!into) {
      rest.push_back(a[i]);
      continue;
    }
    if (value.empty()) {
      std::fprintf(stderr, "allocscope %s: --from and --to need a step or a time (1.5s, 200ms, 300us)\n", verb);
      return false;
    }
    *into = value, given = true;
  }
  if (!given) return true;
  auto w = parse_trace_window(from, to);
  if (!w.ok()) {
    std::fprintf(stderr, "allocscope %s: %s\n", verb, w.error().describe().c_str());
    return false;
  }
  g_window = w.value();
  g_window_from = from, g_window_to = to;
  a = std::move(rest);
  return true;
}

const TraceWindow& load_window() { return g_window; }
const std::string& load_window_from() { return g_window_from; }
const std::string& load_window_to() { return g_window_to; }

bool take_host_device(const char* verb, std::vector<std::string>* argv) {
  std::vector<std::string>& a = *argv;
  bool asked = false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--") break;
    if (a[i] == "--device=host") a[i] = "--device=0", asked = true;
    else if (a[i] == "--device" && i + 1 < a.size() && a[i + 1] == "host") a[i + 1] = "0", asked = true;
  }
  if (!asked) return true;
  const std::string v = verb;
  if (v != "timeline" && v != "state" && v != "peak" && v != "leaks") {
    std::fprintf(stderr, "allocscope %s: --device host: only timeline, state, peak and leaks answer the pinned host "
                 "memory (this verb's rules are for a GPU's memory)\n", verb);
    return false;
  }
  g_host = true;
  return true;
}

bool load_or_report(const std::string& path, Snapshot* out) {
  // "-": the snapshot on standard input, for every verb that reads one (`zcat x.gz | allocscope summary -`). The
  // loader reads it as any file: mapped when it is one, read in chunks when a pipe, refused at a first byte no
  // snapshot has.
  const std::string file = path == "-" ? "/dev/stdin" : path;
  LoadOptions opts;
  const bool tty = isatty(STDERR_FILENO);
  if (tty) {
    opts.progress = [](std::string_view phase, uint64_t done, uint64_t total) {
      std::fprintf(stderr, "\r%.*s %5.1f%%", static_cast<int>(phase.size()), phase.data(),
                   total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0.0);
      std::fflush(stderr);
    };
  }
  opts.spare_time = heap_prefault();
  opts.window = g_window;
  auto r = load_snapshot_file(file, opts);
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (!r.ok()) {
    std::fprintf(stderr, "allocscope: %s: %s\n", path.c_str(), r.error().describe().c_str());
    return false;
  }
  if (g_host) {
    if (!r.value().host) {
      std::fprintf(stderr, "allocscope: %s: --device host: this snapshot holds no pinned host memory (PyTorch 2.14+ "
                   "records it with torch.cuda.memory._record_memory_history(record_pinned_host_memory=True))\n",
                   path.c_str());
      return false;
    }
    // Its tables are its own (Snapshot::host), so the verb answers it as a file of its own whose device 0 is the host.
    Snapshot host = *r.value().host;
    *out = std::move(host);
    std::fprintf(stderr, "allocscope: %s: the pinned host memory (device 0 below is the host, not a GPU)\n",
                 path.c_str());
    return true;
  }
  if (!r.value().window.whole()) say_window(path, r.value());
  *out = std::move(r).value();
  return true;
}

bool Args::has(const std::string& name) const {
  for (auto& [k, v] : options)
    if (k == name) return true;
  return false;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  for (auto it = options.rbegin(); it != options.rend(); ++it)
    if (it->first == name) return it->second;
  return fallback;
}

Args parse_args(const std::vector<std::string>& argv, const std::vector<std::string>& takes_value) {
  Args a;
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& s = argv[i];
    if (only_positional || s.size() < 2 || s[0] != '-') {
      a.positional.push_back(s);
      continue;
    }
    if (s == "--") {
      only_positional = true;
      continue;
    }
    std::string name = s.substr(s[1] == '-' ? 2 : 1);
    std::string value;
    auto eq = name.find('=');
    a.spelled.push_back(eq == std::string::npos ? s : s.substr(0, s.find('=')));
    const bool attached = s[1] != '-' && name.size() > 1 &&
                          std::find(takes_value.begin(), takes_value.end(), name.substr(0, 1)) != takes_value.end();
    if (attached) {
      value = name.substr(1);
      name = name.substr(0, 1);
    } else if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else {
      // argparse's unique prefix of a long option that takes a value ("--out" for --output)
      if (s[1] == '-' && std::find(takes_value.begin(), takes_value.end(), name) == takes_value.end()) {
        const std::string* only = nullptr;
        int matches = 0;
        for (const auto& t : takes_value)
          if (t.size() > 1 && t.rfind(name, 0) == 0) only = &t, ++matches;
        if (matches == 1 && !name.empty()) name = *only;
      }
      for (const auto& t : takes_value) {
        if (t == name && i + 1 < argv.size()) {
          value = argv[++i];
          break;
        }
      }
    }
    a.options.emplace_back(name, value);
  }
  return a;
}

bool only_output_option(const char* verb, Args* args) {
  for (size_t k = 0; k < args->options.size(); ++k) {
    std::string& name = args->options[k].first;
    const std::string& typed = args->spelled[k];
    if (name == "o" || name == "output") continue;
    if (typed.rfind("--", 0) == 0 && !name.empty() && std::string("output").rfind(name, 0) == 0) {
      name = "output";  // argparse takes any unique prefix of a long option
      continue;
    }
    fail(std::string(verb) + ": unknown option " + typed + " (see allocscope " + verb + " --help)");
    return false;
  }
  return true;
}

int run_answer(const char* name, const std::vector<std::string>& argv) {
  const AnswerSpec* spec = answer_spec(name);
  if (!spec) return fail(std::string("no answer named ") + name);
  const Args args = parse_args(argv, spec->value_options);
  const AnswerOptions options{args.options};
  if (Status st = check_answer(name, options, args.positional.size()); !st.ok()) return fail(st.error().describe());
  std::vector<std::unique_ptr<LoadedSnapshot>> files;
  std::vector<LoadedSnapshot*> pointers;
  for (const std::string& path : args.positional) {
    Snapshot s;
    if (!load_or_report(path, &s)) return 1;
    files.push_back(std::make_unique<LoadedSnapshot>(path, std::move(s)));
    pointers.push_back(files.back().get());
  }
  auto r = answer(name, pointers, options);
  if (!r.ok()) return fail(r.error().describe());
  for (const std::string& note : r->notes) std::fprintf(stderr, "%s\n", note.c_str());
  std::fwrite(r->out.data(), 1, r->out.size(), stdout);
  return std::fflush(stdout) == 0 ? r->exit_code : 1;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "allocscope: %s\n", message.c_str());
  return 1;
}

bool device_option(const std::string& verb, const Args& args, const std::string& path, const Lifetimes& all,
                   int64_t* device, bool* given) {
  *given = args.has("device");
  if (!*given) return true;
  uint32_t v = 0;
  if (!parse_count(args.get("device"), &v)) {
    fail(verb + ": --device needs an ordinal (devices: " + device_list(all) + ")");
    return false;
  }
  if (!all.device(v)) {
    fail(verb + ": no device " + std::to_string(v) + " in " + path + " (devices: " + device_list(all) + ")");
    return false;
  }
  *device = v;
  return true;
}

int no_device(const std::string& verb, const std::string& path, const Lifetimes& all, const std::string& device,
              bool json) {
  if (all.devices.empty()) {
    const std::string out = json ? "{\"devices\":[]}\n"
                                 : printable(path) + " holds no allocations: its device traces are empty and it has no segments "
                                          "(taken before anything was allocated, or after everything was freed and "
                                          "torch.cuda.empty_cache() gave the cache back).\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  if (!device.empty()) return fail(verb + ": no device " + device + " in " + path + " (devices: " + device_list(all) + ")");
  return fail(verb + ": no device with a trace in " + path + " (devices with segments only: " + device_list(all) + ")");
}

bool parse_count(const std::string& text, uint32_t* out) {
  if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != std::string::npos) return false;
  const unsigned long long v = std::stoull(text);
  if (v > UINT32_MAX) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace allocscope::cli
