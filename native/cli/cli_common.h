// Helpers every verb shares: loading a snapshot with progress on a terminal, one-line errors, simple flag parsing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "allocscope/answers.h"
#include "allocscope/lifetimes.h"
#include "allocscope/snapshot.h"

namespace allocscope::cli {

// Loads `path` (pickle or gzip; "-" is standard input). On error prints "allocscope: PATH: at byte N: ..." to stderr
// and returns false.
// Shows progress on stderr only when stderr is a terminal.
bool load_or_report(const std::string& path, Snapshot* out);

// `--device host` of the verbs that draw or list one device's memory (timeline, state, peak, leaks): the snapshot's
// pinned host memory (Snapshot::host: PyTorch 2.14's record_pinned_host_memory), answered as that verb answers a GPU.
// Rewrites the option to `--device 0` (the host snapshot's one device) and makes load_or_report load the host memory
// in the file's place, saying so on stderr; returns false, after printing why, for a verb that cannot answer it
// (What-if, categories: rules for a GPU's training memory). Called by main() before the verb runs.
bool take_host_device(const char* verb, std::vector<std::string>* argv);

// `--from A --to B` of the verbs that can load a window of a huge file (peak, summary, view, plot): steps, or times with
// a unit (loader.h: parse_trace_window). Takes both options out of the arguments and makes load_or_report load
// only that window of each device's trace, saying on stderr what it kept; returns false, after printing why, for
// a text that is not a window. Other verbs keep their own --to (whatif's batch) and refuse --from as unknown.
// Called by main() before the verb runs.
bool take_window(const char* verb, std::vector<std::string>* argv);
// The window take_window found (whole() when none was given): `view` loads its files itself.
const TraceWindow& load_window();
// Its ends as the user wrote them ("" for an open end): `view` puts them in the page's URL (?from=&to=).
const std::string& load_window_from();
const std::string& load_window_to();

// Spare-time work for a load's reading thread (LoadOptions::spare_time): faults in the heap pages the parse is
// about to use (memory_policy.cpp says why). Empty where that policy does not apply (sanitizers, not glibc).
std::function<bool()> heap_prefault();

// Parsed command line: positional arguments and --flag / --flag=value / --flag value options.
struct Args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;  // name without dashes -> value ("" for switches)
  std::vector<std::string> spelled;                           // each option as typed, for messages
  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback = "") const;
};
// `takes_value` lists options that consume the next argument (e.g. {"o", "output", "device"}); a one-letter one
// also takes its value attached, as argparse allows ("-ox.svg").
Args parse_args(const std::vector<std::string>& argv, const std::vector<std::string>& takes_value);

// The PyTorch drop-in verbs' `-o`/`--output`, with argparse's unique prefixes of --output ("--out"): false, after
// printing why, for any other option.
bool only_output_option(const char* verb, Args* args);

// Runs one of the shared answers (allocscope/answers.h) as a verb: options checked before anything is read, the
// files loaded with progress, then the answer's notes on stderr and its text or JSON on stdout. Returns the exit
// status. The Python module calls the same answers, so the verb and `allocscope.load(f).NAME()` agree.
int run_answer(const char* name, const std::vector<std::string>& argv);

// Prints "allocscope: MESSAGE" to stderr and returns exit code 1.
int fail(const std::string& message);

// A whole number for an option (a step, an event, a count, a device ordinal): digits only, at most UINT32_MAX.
// "-5", "3x" and "" are refused rather than read as something else.
bool parse_count(const std::string& text, uint32_t* out);

// What a per-device verb says when no device matched. A snapshot with nothing in it is an answer, not an error: it
// says so on stdout (with --json: {"devices":[]}) and returns 0. A --device the file lacks is an error naming the
// devices it has.
// `--device N` of a verb: false (after printing one line: not an ordinal, or a device the file lacks among `all`,
// the devices with events or segments) when it cannot be answered; *given says whether the option was there.
bool device_option(const std::string& verb, const Args& args, const std::string& path, const Lifetimes& all,
                   int64_t* device, bool* given);

int no_device(const std::string& verb, const std::string& path, const Lifetimes& all, const std::string& device,
              bool json);

// When stdout is a terminal, replaces it with a stream that writes control characters, C1 controls and
// bidirectional overrides from snapshot strings as escapes (terminal_guard.cpp says why); a pipe or file is left
// alone. Called once, first thing in main().
void guard_terminal_output();

// Turns the SIGBUS of a snapshot file truncated while it is mapped (mapped_input_at in allocscope/loader.h) into a
// one-line error naming the file and the byte, exit code 1; any other SIGBUS keeps its default action. Called once
// in main(), before a verb loads anything.
void guard_mapped_inputs();

}  // namespace allocscope::cli
