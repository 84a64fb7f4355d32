// `allocscope record [options] -- ./job args`: runs a job with the capture library injected through the CUDA driver
// (CUDA_INJECTION64_PATH), configured by ALLOCSCOPE_* variables, so the job needs no code change.
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../capture/src/options.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

const char kUsage[] =
    "usage: allocscope record [options] -- PROGRAM [ARGS...]\n\n"
    "Runs PROGRAM with CUDA memory capture injected (no code change) and writes a PyTorch-compatible snapshot.\n\n"
    "options:\n"
    "  -o, --output PATH     snapshot path, .pickle or .pickle.gz; %p becomes the pid, %r the rank (default\n"
    "                        allocscope-%p.pickle, or allocscope-rank%r-%p.pickle under torchrun, mpirun or srun\n"
    "                        starting several ranks; there, a PATH with neither gets -rankN before its extension)\n"
    "  --max-entries N       trace ring buffer size (default 100000)\n"
    "  --stacks none|native|python  stacks per event: native frames, with the Python frames (file, line,\n"
    "                        function) of a CPython 3.10-3.13 job merged in (default python)\n"
    "  --max-frames N        frames kept per stack (default 32)\n"
    "  --no-dump-on-oom      do not dump when a CUDA allocation fails with out-of-memory\n"
    "  --dump-signal SIG     dump whenever the job receives SIG (e.g. USR1)\n"
    "  --no-dump-at-exit     do not dump when the job exits\n"
    "  --no-torch            do not turn on PyTorch's own recorder in Python jobs (see below)\n"
    "  --library PATH        liballocscope_capture.so to inject (default: next to this binary)\n\n"
    "Python jobs: a bootstrap (a sitecustomize that runs any sitecustomize it shadows) turns on PyTorch's memory\n"
    "recorder when the job's CUDA starts. At exit and on out-of-memory, OUTPUT is then one merged snapshot:\n"
    "PyTorch's own (tensors, their Python stacks), which PyTorch's tools read as theirs, with the device memory\n"
    "outside PyTorch's allocator (NCCL, cuBLAS, ...) under the key allocscope_outside (see `allocscope merge`).\n"
    "Gradients allocated by PyTorch's autograd threads get the Python line that called backward.\n"
    "ALLOCSCOPE_TORCH_RECORDER=0 keeps PyTorch's recorder off (the capture's own snapshot only).\n";

bool exists(const std::string& p) {
  struct stat st;
  return !p.empty() && stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string self_dir() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

std::string find_library(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  if (const char* e = std::getenv("ALLOCSCOPE_CAPTURE_LIBRARY"); e && exists(e)) return e;
  const std::string dir = self_dir();
  for (const std::string& c : {dir + "/liballocscope_capture.so", dir + "/../lib/liballocscope_capture.so",
                               dir + "/capture/liballocscope_capture.so"})
    if (exists(c)) return c;
#ifdef ALLOCSCOPE_CAPTURE_LIBRARY
  if (exists(ALLOCSCOPE_CAPTURE_LIBRARY)) return ALLOCSCOPE_CAPTURE_LIBRARY;
#endif
  return "";
}

// The folder holding the Python bootstrap (sitecustomize.py): next to this binary (the build), or ../share.
std::string find_bootstrap() {
  const std::string dir = self_dir();
  for (const std::string& c : {dir + "/python", dir + "/../share/allocscope/python"})
    if (exists(c + "/sitecustomize.py")) return c;
  return "";
}

std::string absolute(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}

// Said before the job starts, on stderr: what the file will and will not hold, so that nothing is left out in
// silence (an audit ran `record` from a copy without its python/ folder: no tensors, and no word of it).
void tell_what_it_sees(const std::string& lib, const std::string& boot, bool torch) {
  auto opts = capture::options_from_env();  // checked by the caller
  const capture::Options o = opts.ok() ? std::move(opts).value() : capture::Options{};
  const char* stacks = o.stacks == capture::StackMode::kNone     ? "none"
                       : o.stacks == capture::StackMode::kNative ? "native frames"
                                                                 : "native and Python frames";
  char ring[64];
  std::snprintf(ring, sizeof ring, "%.1f MiB", static_cast<double>(o.max_entries) * 56 / (1 << 20));
  std::string line = "allocscope record: every CUDA allocation through " + lib + "; trace ring of " +
                     std::to_string(o.max_entries) + " entries (" + ring + " of host memory; older entries are " +
                     "dropped, and the file says how many), stacks: " + stacks + " (at most " +
                     std::to_string(o.max_frames) + "); written to " + o.output_path +
                     (o.dump_at_exit ? " at exit" : "") + (o.dump_on_oom ? ", on out-of-memory" : "") +
                     (o.dump_signal ? ", on signal " + std::to_string(o.dump_signal) : "") + "\n";
  if (!torch) {
    line += "allocscope record: --no-torch: in Python jobs PyTorch's own recorder stays off (the file will hold "
            "PyTorch's reserved memory, not its tensors), and gradients keep native frames only\n";
  } else if (boot.empty()) {
    line += "allocscope record: WARNING: no Python bootstrap found (python/sitecustomize.py beside this binary, or "
            "../share/allocscope/python): in PyTorch jobs its own recorder stays off, so the file will hold PyTorch's "
            "reserved memory but no tensors, and gradients keep native frames only; the file says so too\n";
  } else if (const char* r = std::getenv("ALLOCSCOPE_TORCH_RECORDER"); r && std::string(r) == "0") {
    line += "allocscope record: ALLOCSCOPE_TORCH_RECORDER=0: PyTorch's own recorder stays off (the capture's own "
            "file, no tensors); backward() and collectives still lend their line to the allocations they wait for\n";
  } else {
    const char* m = std::getenv("ALLOCSCOPE_TORCH_MAX_ENTRIES");
    line += "allocscope record: Python jobs: bootstrap " + boot + ": PyTorch's own recorder (ring of " +
            std::string(m && *m ? m : "100000") + " entries) turned on when the job's CUDA starts and merged into "
            "the file; backward() and collectives lend their line to the allocations made for them\n";
  }
  line += "allocscope record: (another CUPTI user, such as Nsight or a profiler, stops the capture: the job's stderr "
          "then says \"allocscope capture: not recording\")\n";
  std::fputs(line.c_str(), stderr);
}

int run_record(const std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> env;
  std::string library;
  bool torch = true;
  size_t i = 0;
  auto value = [&](const std::string& name, std::string* out) {
    const std::string& a = args[i];
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      *out = a.substr(eq + 1);
      return !out->empty();  // "--max-entries=" would quietly mean the default
    }
    // "-o -- job" would take "--" as the path: a value never starts with '-' unless given as --name=VALUE.
    if (i + 1 >= args.size() || args[i + 1].empty() || args[i + 1][0] == '-') return false;
    *out = args[++i];
    (void)name;
    return true;
  };
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.empty() || a[0] != '-') break;  // the job starts here
    const std::string name = a.substr(0, a.find('='));
    std::string v;
    if (name == "-o" || name == "--output") {
      if (!value(name, &v)) return fail("record: " + name + " needs a path");
      env.emplace_back("ALLOCSCOPE_OUTPUT", v);
    } else if (name == "--max-entries") {
      if (!value(name, &v)) return fail("record: --max-entries needs a number");
      env.emplace_back("ALLOCSCOPE_MAX_ENTRIES", v);
    } else if (name == "--stacks") {
      if (!value(name, &v) || (v != "none" && v != "native" && v != "python"))
        return fail("record: --stacks takes none, native or python");
      env.emplace_back("ALLOCSCOPE_STACKS", v);
    } else if (name == "--max-frames") {
      if (!value(name, &v)) return fail("record: --max-frames needs a number");
      env.emplace_back("ALLOCSCOPE_MAX_FRAMES", v);
    } else if (name == "--no-dump-on-oom") {
      env.emplace_back("ALLOCSCOPE_DUMP_ON_OOM", "0");
    } else if (name == "--dump-on-oom") {
      env.emplace_back("ALLOCSCOPE_DUMP_ON_OOM", "1");
    } else if (name == "--dump-signal") {
      if (!value(name, &v)) return fail("record: --dump-signal needs a signal name");
      env.emplace_back("ALLOCSCOPE_DUMP_SIGNAL", v);
    } else if (name == "--no-dump-at-exit") {
      env.emplace_back("ALLOCSCOPE_DUMP_AT_EXIT", "0");
    } else if (name == "--no-torch") {
      torch = false;
    } else if (name == "--library") {
      if (!value(name, &library)) return fail("record: --library needs a path");
    } else {
      return fail("record: unknown option '" + a + "' (see allocscope record --help)");
    }
  }
  if (i >= args.size()) return fail("record: no program to run (allocscope record [options] -- PROGRAM ARGS)");
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  // The library reads these inside the job's cuInit, where a bad value can only be a line on stderr and no
  // recording: refuse them here, with the library's own parser, before the job starts.
  if (auto opts = capture::options_from_env(); !opts.ok()) return fail("record: " + opts.error().describe());
  const std::string lib = find_library(library);
  if (lib.empty())
    return fail("record: the capture library (liballocscope_capture.so) was not built: it needs the CUDA toolkit with "
                "CUPTI at build time (configure with --preset cuda)");
  if (!exists(lib)) return fail("record: " + lib + ": no such file");
  setenv("CUDA_INJECTION64_PATH", absolute(lib).c_str(), 1);
  setenv("ALLOCSCOPE_CAPTURE_LIBRARY", absolute(lib).c_str(), 1);  // the bootstrap asks it for the output's name
  const std::string boot = torch ? find_bootstrap() : std::string();
  if (!boot.empty()) {
    const char* old = std::getenv("PYTHONPATH");
    setenv("PYTHONPATH", (absolute(boot) + (old && *old ? std::string(":") + old : std::string())).c_str(), 1);
    setenv("ALLOCSCOPE_TORCH", "1", 1);
    unsetenv("ALLOCSCOPE_TORCH_OFF");
    if (const char* m = std::getenv("ALLOCSCOPE_MAX_ENTRIES")) setenv("ALLOCSCOPE_TORCH_MAX_ENTRIES", m, 1);
  } else {
    // The capture writes why into its file (native/capture/src/notes.cpp), where `summary` reads it.
    unsetenv("ALLOCSCOPE_TORCH");
    setenv("ALLOCSCOPE_TORCH_OFF",
           torch ? "allocscope record found no Python bootstrap (python/sitecustomize.py beside it, or "
                   "../share/allocscope/python)"
                 : "allocscope record ran with --no-torch",
           1);
  }
  tell_what_it_sees(absolute(lib), boot, torch);
  std::vector<char*> argv;
  for (size_t k = i; k < args.size(); ++k) argv.push_back(const_cast<char*>(args[k].c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  return fail("record: cannot run '" + args[i] + "': " + std::strerror(errno));
}

const RegisterVerb kRegister({"record", "run a CUDA job with memory capture injected; writes a snapshot", kUsage,
                              run_record, 90});

}  // namespace
}  // namespace allocscope::cli
