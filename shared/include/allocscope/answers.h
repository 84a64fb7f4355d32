// The answers every front end gives (the CLI's verbs, the Python module): one function per answer that takes the
// loaded files and the options as the CLI spells them, and returns what the CLI prints. Which devices are answered,
// how an option is read and what an error says are decided here once, so `allocscope peak FILE --json` and
// `allocscope.load(FILE).peak()` are the same document by construction.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "allocscope/frame_filter.h"
#include "allocscope/lifetimes.h"
#include "allocscope/result.h"
#include "allocscope/snapshot.h"

namespace allocscope {

// A snapshot with the analyses every answer starts from, built once, when first asked (a notebook asks one file
// many questions; a 1M-event file's lifetimes take longer than most answers).
class LoadedSnapshot {
 public:
  LoadedSnapshot(std::string name, Snapshot snapshot);
  ~LoadedSnapshot();
  LoadedSnapshot(const LoadedSnapshot&) = delete;
  LoadedSnapshot& operator=(const LoadedSnapshot&) = delete;

  const std::string& name() const { return name_; }  // the path it was loaded from, as given
  const Snapshot& snapshot() const { return snapshot_; }
  const Lifetimes& lifetimes();
  const Lifetimes* lifetimes_if_built() const { return lifetimes_.get(); }
  const FrameFilter& frame_filter();

 private:
  std::string name_;
  Snapshot snapshot_;
  std::unique_ptr<Lifetimes> lifetimes_;
  std::unique_ptr<FrameFilter> frame_filter_;
};

// Options as the CLI's parser leaves them: name without dashes, value as typed ("" for a switch), in order (an
// option some answers take more than once, --rule, keeps every value).
struct AnswerOptions {
  std::vector<std::pair<std::string, std::string>> items;
  bool has(std::string_view name) const;
  std::string get(std::string_view name, const std::string& fallback = "") const;  // the last one given
  std::vector<std::string> all(std::string_view name) const;
};

// What an answer says: `out` is what the CLI prints on standard output (JSON with the option "json", else text),
// `notes` what it prints on standard error (a device left out, ...), and the exit status (3: `leaks` suspects a
// leak, `check` found a regression).
struct AnswerOutput {
  std::string out;
  std::vector<std::string> notes;
  int exit_code = 0;
};

// An answer's name, the options it takes (without dashes; `value_options` take a value, the rest are switches) and
// how many files it reads. The CLI's verbs parse their command lines with these lists.
struct AnswerSpec {
  const char* name;
  std::vector<std::string> switches;
  std::vector<std::string> value_options;
  size_t min_files = 1, max_files = 1;
  const char* usage;  // "usage: allocscope peak FILE [--device N] ...", for errors
};
// The answers: summary, peak, leaks, oom, categories, diff, whatif, plan, export, check. Null for another name.
const AnswerSpec* answer_spec(std::string_view name);
std::vector<std::string> answer_names();

// Whether the options and the number of files are ones the answer takes: checked before any file is read, so a
// mistyped option costs no load of a 2 GB file. The error reads "peak: --from needs a step number".
Status check_answer(std::string_view name, const AnswerOptions& options, size_t files);
// The answer for `files` (in the order given; `diff`, `check` and `whatif` of several runs take more than one).
Result<AnswerOutput> answer(std::string_view name, std::span<LoadedSnapshot* const> files,
                            const AnswerOptions& options);

// The devices `peak`, `categories` and `export` answer for without --device: every device with a trace, or, in a
// file with no trace at all, every device (the state it holds). One rule, so export's objects are the verbs' objects.
bool answered_without_device(const Lifetimes& all, const DeviceLifetimes& lt);
// The devices an answer offers, for messages: "0, 1" (or "none").
std::string device_list(const Lifetimes& all);

}  // namespace allocscope
