// Recorder options and how they are read from the environment (ALLOCSCOPE_*), so injection needs no code change.
#pragma once

#include <cstdint>
#include <string>

#include "allocscope/result.h"

namespace allocscope::capture {

// kPython: native frames with the calling thread's Python frames merged in where the interpreter ran them
// (python_frames.h); the same as kNative in a process without a supported Python.
enum class StackMode : uint8_t { kNone, kNative, kPython };

struct Options {
  std::string output_path;         // "%p" becomes the process id and "%r" the rank when dumping
  uint64_t max_entries = 100000;   // trace ring buffer
  StackMode stacks = StackMode::kPython;
  int max_frames = 32;             // kept per event, after dropping our own and the driver's frames
  bool dump_on_oom = true;
  int dump_signal = 0;             // 0: none
  bool dump_at_exit = true;
};

constexpr int kMaxFramesLimit = 128;
// The ring is allocated whole when recording starts (56 bytes an entry): 10^8 entries is 5.6 GB of host memory.
constexpr uint64_t kMaxEntriesLimit = 100'000'000;

// Reads ALLOCSCOPE_OUTPUT, ALLOCSCOPE_MAX_ENTRIES, ALLOCSCOPE_STACKS (none|native|python), ALLOCSCOPE_MAX_FRAMES,
// ALLOCSCOPE_DUMP_ON_OOM (0|1), ALLOCSCOPE_DUMP_SIGNAL (USR1, SIGUSR2, 12, none), ALLOCSCOPE_DUMP_AT_EXIT (0|1) over
// `base`. An unparsable value is an error that names the variable.
Result<Options> options_from_env(Options base = {});

// "USR1", "SIGUSR1", "10" -> signal number; "", "none", "0" -> 0; -1 when unknown or not dump_signal_allowed.
int parse_signal(const std::string& text);
// Whether `sig` may be the dump signal: USR1, USR2, HUP, PROF, WINCH, URG or a real-time signal. The others end the
// job, report its faults, cannot be caught, or belong to its own machinery.
bool dump_signal_allowed(int sig);

// The process's rank in a distributed job, from the launcher's environment (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK,
// PMIX_RANK, SLURM_PROCID, LOCAL_RANK, first set wins); "" when none is set.
std::string job_rank();

// Whether a launcher started several ranks: a world size above 1 (WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE,
// SLURM_NTASKS, SLURM_NPROCS). A rank variable alone is not one (Lightning sets LOCAL_RANK in a single process).
bool several_ranks();

// Replaces "%p" with the process id, "%r" with the rank (0 outside a distributed job) and "%%" with "%".
std::string expand_output_path(const std::string& path);
// The configured output path for this process: expand_output_path, and under a launcher of several ranks
// (several_ranks) a pattern with neither %p nor %r gets "-rankN" before its extension, so that the ranks of one job
// do not all write (and merge PyTorch's files through) one name. A single process keeps the name it was given.
std::string job_output_path(const std::string& pattern);

}  // namespace allocscope::capture
