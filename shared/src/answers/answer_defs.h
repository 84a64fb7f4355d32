// The answers' table and the helpers their files share (answers.h is the public face).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "allocscope/answers.h"

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

// The file's name as JSON text (its bytes need not be UTF-8).
std::string json_string(const std::string& s);

}  // namespace allocscope::answers
