// The answers' table and the helpers their files share (answers.h is the public face).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "allocscope/answers.h"
#include "allocscope/categories.h"

namespace allocscope::answers {

using Files = std::span<LoadedSnapshot* const>;

// One answer: its spec, a check of its option values (names and file counts are checked from the spec), and the
// answer itself (called only with options that passed both checks).
struct AnswerDef {
  AnswerSpec spec;
  Status (*check)(const AnswerOptions& options);
  Result<AnswerOutput> (*run)(Files files, const AnswerOptions& options);
};
const AnswerDef& summary_answer();
const AnswerDef& peak_answer();
const AnswerDef& leaks_answer();
const AnswerDef& oom_answer();
const AnswerDef& categories_answer();
const AnswerDef& diff_answer();
const AnswerDef& whatif_answer();
const AnswerDef& export_answer();
const AnswerDef& check_answer_def();
const AnswerDef& plan_answer();

// A parse's result as a check's status.
template <typename T>
Status status_of(const Result<T>& r) {
  return r.ok() ? Status() : Status(r.error());
}

// "NAME: MESSAGE", the form every answer's error takes.
Error fail(const char* answer, const std::string& message);

// A whole number for an option (a step, a count, a device ordinal): digits only, at most UINT32_MAX. "-5", "3x"
// and "" are refused rather than read as something else.
bool parse_count(const std::string& text, uint32_t* out);

// A file with no device to answer for. With nothing in it at all, that is an answer (said on stdout, status 0);
// a --device the file lacks, or no device with a trace, is an error naming the devices it has.
Result<AnswerOutput> no_device(const char* answer, LoadedSnapshot& file, const std::string& device, bool json);

// The note `peak`, `categories` and `export` leave on stderr for the devices answered_without_device left out
// (segments, no trace), or "" when none was.
std::string devices_left_out(const char* answer, const Lifetimes& all);

// --rule REGEX=CATEGORY, each given (categories.h); the error names the answer.
Status parse_rules(const char* answer, const AnswerOptions& o, CategoryOptions* out);
// --device N: -1 when not given.
Status parse_device(const char* answer, const AnswerOptions& o, int64_t* out);
// The device a prediction answers for (`whatif`, `plan`): --device, else the one that ran out of memory, else the one
// with the most events (an audit: a 4-GPU file was answered for device 0, "fits", where device 1 had run out). Null
// when none has a trace (or --device names none).
const DeviceLifetimes* device_to_predict(LoadedSnapshot& f, const AnswerOptions& o);
// The line that says which device of a file of several a prediction answered for, and how to ask about another;
// "" for a file of one traced device, with --device, or with --json (which names the device).
std::string predicted_device_line(LoadedSnapshot& f, const DeviceLifetimes& lt, const AnswerOptions& o);

// The file's name as JSON text (its bytes need not be UTF-8).
std::string json_string(const std::string& s);

}  // namespace allocscope::answers
