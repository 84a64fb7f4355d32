// Session lifetime and dumping. Dumps from a signal go through a pipe to a helper thread: the handler only write()s.
#include "session.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <new>
#include <string>
#include <thread>

#include "allocscope/loader.h"
#include "allocscope/outside.h"
#include "allocscope/writer.h"
#include "python_frames.h"
#include "snapshot_builder.h"
#include "unwind.h"

namespace allocscope::capture {
namespace {

std::atomic<const Backend*> g_backend{nullptr};
int g_signal_pipe[2] = {-1, -1};
// Whether this thread holds Session::mu_ (start/stop): a fork from inside start() (cuptiSubscribe initialising the
// driver may run nvidia-modprobe) must not wait on the lock its own thread holds.
thread_local bool t_holds_mu = false;
thread_local bool g_fork_locked = false;  // prepare, parent and child handlers run on the forking thread

struct HoldMu {
  explicit HoldMu(std::mutex& m) : lock(m) { t_holds_mu = true; }
  ~HoldMu() { t_holds_mu = false; }
  std::lock_guard<std::mutex> lock;
};

void dump_at_exit() {
  Session& s = Session::get();
  // A forked child (e.g. a data-loader worker) inherits this handler but recorded nothing of its own: let it be.
  if (getpid() != s.owner_pid()) return;
  Recorder* r = s.last_recorder();
  if (!r || !r->options().dump_at_exit) return;
  if (s.merged_final()) return;  // the bootstrap wrote the merged snapshot at the job's exit (Session::dump_merged)
  // A process that never allocated device memory (torchrun's launcher, a CPU-only helper) writes no file: under a
  // launcher it would be an empty snapshot beside every rank's.
  if (r->recorded() == 0) {
    std::fprintf(stderr, "allocscope capture: at exit: process %d made no CUDA allocation; nothing written\n",
                 static_cast<int>(getpid()));
    return;
  }
  std::string summary;
  s.report("at exit", s.dump("", &summary), summary);
}

}  // namespace

void set_backend(const Backend* b) { g_backend.store(b, std::memory_order_release); }
const Backend* backend() { return g_backend.load(std::memory_order_acquire); }

Session& Session::get() {
  static Session* s = new Session();  // leaked on purpose
  return *s;
}

Status Session::start(const Options& options) {
  HoldMu hold(mu_);
  if (active_.load()) return {};
  if (options.max_entries == 0 || options.max_entries > kMaxEntriesLimit)
    return Error{"max_entries must be 1.." + std::to_string(kMaxEntriesLimit) + ", not " +
                 std::to_string(options.max_entries)};
  if (options.dump_signal != 0 && !dump_signal_allowed(options.dump_signal))
    return Error{"dump_signal " + std::to_string(options.dump_signal) +
                 " is not one a job can spare (USR1, USR2, HUP, PROF, WINCH, URG or a real-time signal)"};
  // The ring is allocated here, inside the job's cuInit when injected: no memory is an error, not the job's end.
  Recorder* rec = nullptr;
  try {
    rec = new Recorder(options);
  } catch (const std::bad_alloc&) {
    return Error{"not recording: no memory for a ring of " + std::to_string(options.max_entries) + " entries"};
  }
  if (Recorder* previous = last_.load()) retired_.push_back(previous);
  // Publish before subscribing so the first callbacks already find it.
  last_.store(rec, std::memory_order_release);
  active_.store(rec, std::memory_order_release);
  if (const Backend* b = backend(); b && b->subscribe) {
    const Status st = b->subscribe();
    if (!st.ok()) {
      active_.store(nullptr, std::memory_order_release);
      last_.store(nullptr, std::memory_order_release);
      retired_.push_back(rec);  // another thread's annotation call may have read it in the meantime
      start_failure_ = st.error().describe();
      if (!warned_subscriber_) {
        warned_subscriber_ = true;
        std::fprintf(stderr, "allocscope capture: not recording: %s\n", st.error().describe().c_str());
      }
      return st;
    }
  }
  start_failure_.clear();
  owner_pid_.store(getpid(), std::memory_order_release);
  forked_from_.store(0, std::memory_order_relaxed);
  if (!atfork_registered_) {
    atfork_registered_ = true;
    pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
  }
  if (options.dump_at_exit && !atexit_registered_) {
    atexit_registered_ = true;
    std::atexit(dump_at_exit);
  }
  if (options.dump_signal > 0 && installed_signal_ != options.dump_signal) install_signal(options.dump_signal);
  return {};
}

Status Session::stop() {
  HoldMu hold(mu_);
  if (!active_.load()) return {};
  if (const Backend* b = backend(); b && b->unsubscribe) b->unsubscribe();
  active_.store(nullptr, std::memory_order_release);
  return {};
}

Status Session::dump(const std::string& path, std::string* summary) {
  return write_snapshot_to(path, "", false, summary);
}

Status Session::dump_merged(const std::string& pytorch_snapshot, bool final, std::string* summary) {
  if (pytorch_snapshot.empty()) return Error{"dump_merged: no PyTorch snapshot named"};
  return write_snapshot_to("", pytorch_snapshot, final, summary);
}

Status Session::write_snapshot_to(const std::string& path, const std::string& pytorch_snapshot, bool final,
                                  std::string* summary) {
  Recorder* r = last_recorder();
  if (const pid_t parent = forked_from_.load(std::memory_order_relaxed); !r && parent)
    return Error{"nothing recorded in this process: it is a fork of process " + std::to_string(parent) +
                 ", whose recording stays with it"};
  if (!r) {
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mu_);
      why = start_failure_;
    }
    return Error{why.empty() ? std::string("nothing recorded: capture was never started")
                             : "nothing recorded: the capture did not start (" + why + ")"};
  }
  std::lock_guard<std::mutex> lock(dump_mu_);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string out = path.empty() ? job_output_path(r->options().output_path) : expand_output_path(path);
  Frozen frozen = r->freeze();
  Snapshot snap = build_snapshot(frozen);
  {
    std::lock_guard<std::mutex> notes_lock(notes_mu_);
    add_notes(&snap, notes_, !pytorch_snapshot.empty());
  }
  Status st;
  size_t entries = snap.events.size_rows(), segments = snap.segments.size();
  if (pytorch_snapshot.empty()) {
    st = write_snapshot_file(snap, out);
  } else {
    auto bytes = read_file(pytorch_snapshot);
    if (!bytes.ok()) return bytes.error();
    std::vector<uint8_t> torch = std::move(bytes).value();
    if (is_gzip(torch)) {
      auto raw = gunzip(torch);
      if (!raw.ok()) return Error{pytorch_snapshot + ": " + raw.error().describe()};
      torch = std::move(raw).value();
    }
    auto merged = merge_capture(torch, snap);
    if (!merged.ok()) return Error{pytorch_snapshot + ": " + merged.error().describe()};
    entries = merged.value().outside_events, segments = merged.value().outside_segments;
    st = write_pickle_file(std::move(merged.value().bytes), out);
    if (st.ok() && final) merged_final_.store(true, std::memory_order_release);
  }
  if (st.ok() && summary) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f ms", ms);
    *summary = "wrote " + out + (pytorch_snapshot.empty() ? " (" : " (PyTorch's snapshot with, outside it, ") +
               std::to_string(entries) + " trace entries, " + std::to_string(segments) + " live segments) in " + buf;
  }
  return st;
}

void Session::note(const std::string& key, const std::string& text) {
  std::lock_guard<std::mutex> lock(notes_mu_);
  std::erase_if(notes_, [&](const auto& n) { return n.first == key; });
  if (!text.empty()) notes_.emplace_back(key, text);
}

void Session::after_oom() {
  Recorder* r = recorder();
  if (!r || !r->options().dump_on_oom) return;
  std::string summary;
  report("on OOM", dump("", &summary), summary);
}

void Session::report(const char* when, const Status& st, const std::string& summary) {
  if (st.ok()) {
    std::fprintf(stderr, "allocscope capture: %s: %s\n", when, summary.c_str());
    return;
  }
  // One line per distinct failure: a job that OOMs in a loop with an unwritable output path is told once.
  const std::string msg = st.error().describe();
  {
    std::lock_guard<std::mutex> lock(report_mu_);
    if (msg == last_failure_) return;
    last_failure_ = msg;
  }
  std::fprintf(stderr, "allocscope capture: dump %s failed: %s (the job goes on)\n", when, msg.c_str());
}

// fork(): the child must never wait on a lock held by a thread that does not exist in it, and never writes the
// parent's recording (CUDA does not work in a child forked after initialisation, and the output is the parent's).
// Start/stop are serialized across the fork; the child starts with no recording and no signal helper.
void Session::before_fork() {
  g_fork_locked = !t_holds_mu;
  if (g_fork_locked) get().mu_.lock();
}

void Session::after_fork_in_parent() {
  if (g_fork_locked) get().mu_.unlock();
}

void Session::after_fork_in_child() {
  Session& s = get();
  s.forked_from_.store(s.owner_pid_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  s.parents_recorders_[0] = s.active_.exchange(nullptr, std::memory_order_acq_rel);
  s.parents_recorders_[1] = s.last_.exchange(nullptr, std::memory_order_acq_rel);
  s.installed_signal_ = 0;
  // The helper thread that reads the pipe lives in the parent only: a signal to the child must not make the parent
  // dump, and a start() in the child makes its own pipe and helper.
  for (int& fd : g_signal_pipe) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  python_frames_after_fork_in_child();
  unwind_off_after_fork();
  if (g_fork_locked) s.mu_.unlock();
}

void Session::on_signal(int) {
  const int saved = errno;
  if (g_signal_pipe[1] >= 0) {
    const char c = 'S';
    [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &c, 1);  // async-signal-safe; a full pipe drops a repeat
  }
  errno = saved;
}

void Session::helper_loop(int fd) {
  for (;;) {
    char c;
    const ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    std::string summary;
    get().report("on signal", get().dump("", &summary), summary);
  }
}

void Session::install_signal(int sig) {
  if (g_signal_pipe[0] < 0) {
    if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) return;
    fcntl(g_signal_pipe[1], F_SETFL, fcntl(g_signal_pipe[1], F_GETFL) | O_NONBLOCK);
    std::thread(helper_loop, g_signal_pipe[0]).detach();
  }
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, nullptr);
  installed_signal_ = sig;
}

}  // namespace allocscope::capture
