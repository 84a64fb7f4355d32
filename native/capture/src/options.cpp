// Parses the ALLOCSCOPE_* environment into Options; errors name the variable and the value found.
#include "options.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

namespace allocscope::capture {
namespace {

// Digits only: strtoull alone would take " -1" as 2^64-1 and an overflow as ULLONG_MAX.
bool parse_u64(const char* s, uint64_t* out) {
  if (!s || !*s) return false;
  for (const char* p = s; *p; ++p)
    if (*p < '0' || *p > '9') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (errno == ERANGE || *end != '\0') return false;
  *out = v;
  return true;
}

Result<bool> parse_bool(const char* name, const char* s) {
  std::string v = s;
  if (v == "1" || v == "yes" || v == "true" || v == "on") return true;
  if (v == "0" || v == "no" || v == "false" || v == "off") return false;
  return Error{std::string(name) + ": expected 0 or 1, found '" + v + "'"};
}

}  // namespace

namespace {
struct NamedSignal {
  const char* name;
  int sig;
};
// Signals a job does not use for itself: not ones that end it (INT, TERM, QUIT), report a fault (SEGV, BUS, FPE,
// ILL, TRAP, ABRT: a handler that returns would run the fault again), cannot be caught (KILL, STOP), or that the
// job's own machinery relies on (CHLD, PIPE, ALRM, CONT, TSTP).
constexpr NamedSignal kDumpSignals[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},
                                        {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"URG", SIGURG}};
}  // namespace

bool dump_signal_allowed(int sig) {
  for (const NamedSignal& n : kDumpSignals)
    if (sig == n.sig) return true;
  return sig >= SIGRTMIN && sig <= SIGRTMAX;
}

int parse_signal(const std::string& text) {
  if (text.empty() || text == "none" || text == "0") return 0;
  std::string t = text;
  if (t.rfind("SIG", 0) == 0) t = t.substr(3);
  for (const NamedSignal& n : kDumpSignals)
    if (t == n.name) return n.sig;
  uint64_t v = 0;
  if (parse_u64(t.c_str(), &v) && v <= 1024 && dump_signal_allowed(static_cast<int>(v))) return static_cast<int>(v);
  return -1;
}

Result<Options> options_from_env(Options base) {
  Options o = std::move(base);
  if (const char* s = std::getenv("ALLOCSCOPE_OUTPUT"); s && *s) o.output_path = s;
  if (const char* s = std::getenv("ALLOCSCOPE_MAX_ENTRIES"); s && *s) {
    if (!parse_u64(s, &o.max_entries) || o.max_entries == 0 || o.max_entries > kMaxEntriesLimit)
      return Error{std::string("ALLOCSCOPE_MAX_ENTRIES: expected 1..") + std::to_string(kMaxEntriesLimit) +
                   ", found '" + s + "'"};
  }
  if (const char* s = std::getenv("ALLOCSCOPE_STACKS"); s && *s) {
    if (!std::strcmp(s, "none")) o.stacks = StackMode::kNone;
    else if (!std::strcmp(s, "native")) o.stacks = StackMode::kNative;
    else if (!std::strcmp(s, "python")) o.stacks = StackMode::kPython;
    else return Error{std::string("ALLOCSCOPE_STACKS: expected none, native or python, found '") + s + "'"};
  }
  if (const char* s = std::getenv("ALLOCSCOPE_MAX_FRAMES"); s && *s) {
    uint64_t v = 0;
    if (!parse_u64(s, &v) || v == 0 || v > kMaxFramesLimit)
      return Error{std::string("ALLOCSCOPE_MAX_FRAMES: expected 1..128, found '") + s + "'"};
    o.max_frames = static_cast<int>(v);
  }
  if (const char* s = std::getenv("ALLOCSCOPE_DUMP_ON_OOM"); s && *s) {
    auto b = parse_bool("ALLOCSCOPE_DUMP_ON_OOM", s);
    if (!b.ok()) return b.error();
    o.dump_on_oom = *b;
  }
  if (const char* s = std::getenv("ALLOCSCOPE_DUMP_AT_EXIT"); s && *s) {
    auto b = parse_bool("ALLOCSCOPE_DUMP_AT_EXIT", s);
    if (!b.ok()) return b.error();
    o.dump_at_exit = *b;
  }
  if (const char* s = std::getenv("ALLOCSCOPE_DUMP_SIGNAL"); s && *s) {
    int sig = parse_signal(s);
    if (sig < 0)
      return Error{std::string("ALLOCSCOPE_DUMP_SIGNAL: expected USR1, USR2, HUP, PROF, WINCH, URG, a real-time "
                               "signal's number, or none; found '") + s + "'"};
    o.dump_signal = sig;
  }
  // Under a launcher of several ranks every rank runs this library with one environment: the default name must
  // differ per rank.
  if (o.output_path.empty()) o.output_path = several_ranks() ? "allocscope-rank%r-%p.pickle" : "allocscope-%p.pickle";
  return o;
}

std::string job_rank() {
  // torchrun/torch.distributed, Open MPI, MPICH/Intel MPI (PMI, PMIx), Slurm's srun, then the node-local rank.
  for (const char* var : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "LOCAL_RANK"}) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    const std::string s = v;
    if (s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos) return s;
  }
  return "";
}

bool several_ranks() {
  // torchrun/torch.distributed, Open MPI, MPICH/Intel MPI, Slurm's srun. A rank alone is no sign of several:
  // Lightning sets LOCAL_RANK=0 inside a single process.
  for (const char* var : {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "SLURM_NPROCS"}) {
    const char* v = std::getenv(var);
    uint64_t n = 0;
    if (v && parse_u64(v, &n) && n > 1) return true;
  }
  return false;
}

std::string expand_output_path(const std::string& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    const char next = i + 1 < path.size() ? path[i + 1] : '\0';
    if (path[i] == '%' && next == 'p') {
      out += std::to_string(getpid());
      ++i;
    } else if (path[i] == '%' && next == 'r') {
      const std::string rank = job_rank();
      out += rank.empty() ? "0" : rank;  // a job without a launcher is rank 0, as torch.distributed counts
      ++i;
    } else if (path[i] == '%' && next == '%') {
      out += '%';
      ++i;
    } else {
      out += path[i];
    }
  }
  return out;
}

std::string job_output_path(const std::string& pattern) {
  if (!several_ranks() || pattern.find("%p") != std::string::npos || pattern.find("%r") != std::string::npos)
    return expand_output_path(pattern);
  std::string p = pattern;
  size_t dot = std::string::npos;
  for (const char* ext : {".pickle.gz", ".pickle", ".gz"})
    if (p.size() > std::strlen(ext) && p.compare(p.size() - std::strlen(ext), std::strlen(ext), ext) == 0) {
      dot = p.size() - std::strlen(ext);
      break;
    }
  p.insert(dot == std::string::npos ? p.size() : dot, "-rank%r");
  return expand_output_path(p);
}

}  // namespace allocscope::capture
