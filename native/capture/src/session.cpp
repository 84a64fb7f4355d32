// Session lifetime and dumping. Dumps from a signal go through a pipe to a helper thread: the handler only write()s.
#include "session.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <thread>

#include "allocscope/writer.h"
#include "snapshot_builder.h"

namespace allocscope::capture {
namespace {

std::atomic<const Backend*> g_backend{nullptr};
int g_signal_pipe[2] = {-1, -1};
pid_t g_start_pid = 0;

void dump_at_exit() {
  // A forked child (e.g. a data-loader worker) inherits this handler but recorded nothing of its own: let it be.
  if (getpid() != g_start_pid) return;
  Session& s = Session::get();
  Recorder* r = s.last_recorder();
  if (!r || !r->options().dump_at_exit) return;
  std::string summary;
  const Status st = s.dump("", &summary);
  if (!st.ok()) std::fprintf(stderr, "allocscope capture: dump at exit failed: %s\n", st.error().describe().c_str());
  else std::fprintf(stderr, "allocscope capture: %s\n", summary.c_str());
}

}  // namespace

void set_backend(const Backend* b) { g_backend.store(b, std::memory_order_release); }
const Backend* backend() { return g_backend.load(std::memory_order_acquire); }

Session& Session::get() {
  static Session* s = new Session();  // leaked on purpose
  return *s;
}

Status Session::start(const Options& options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_.load()) return {};
  if (options.max_entries == 0) return Error{"max_entries must be positive"};
  auto* rec = new Recorder(options);
  // Publish before subscribing so the first callbacks already find it.
  last_.store(rec, std::memory_order_release);
  active_.store(rec, std::memory_order_release);
  if (const Backend* b = backend(); b && b->subscribe) {
    const Status st = b->subscribe();
    if (!st.ok()) {
      active_.store(nullptr, std::memory_order_release);
      last_.store(nullptr, std::memory_order_release);
      if (!warned_subscriber_) {
        warned_subscriber_ = true;
        std::fprintf(stderr, "allocscope capture: not recording: %s\n", st.error().describe().c_str());
      }
      return st;
    }
  }
  if (options.dump_at_exit && !atexit_registered_) {
    atexit_registered_ = true;
    g_start_pid = getpid();
    std::atexit(dump_at_exit);
  }
  if (options.dump_signal > 0 && installed_signal_ != options.dump_signal) install_signal(options.dump_signal);
  return {};
}

Status Session::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!active_.load()) return {};
  if (const Backend* b = backend(); b && b->unsubscribe) b->unsubscribe();
  active_.store(nullptr, std::memory_order_release);
  return {};
}

Status Session::dump(const std::string& path, std::string* summary) {
  Recorder* r = last_recorder();
  if (!r) return Error{"nothing recorded: capture was never started"};
  std::lock_guard<std::mutex> lock(dump_mu_);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string out = expand_output_path(path.empty() ? r->options().output_path : path);
  Frozen frozen = r->freeze();
  const Snapshot snap = build_snapshot(frozen);
  Status st = write_snapshot_file(snap, out);
  if (st.ok() && summary) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f ms", ms);
    *summary = "wrote " + out + " (" + std::to_string(snap.events.size_rows()) + " trace entries, " +
               std::to_string(snap.segments.size()) + " live segments) in " + buf;
  }
  return st;
}

void Session::after_oom() {
  Recorder* r = recorder();
  if (!r || !r->options().dump_on_oom) return;
  std::string summary;
  const Status st = dump("", &summary);
  if (!st.ok()) std::fprintf(stderr, "allocscope capture: dump on OOM failed: %s\n", st.error().describe().c_str());
  else std::fprintf(stderr, "allocscope capture: out of memory: %s\n", summary.c_str());
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
    const Status st = get().dump("", &summary);
    if (!st.ok()) std::fprintf(stderr, "allocscope capture: dump on signal failed: %s\n", st.error().describe().c_str());
    else std::fprintf(stderr, "allocscope capture: on signal: %s\n", summary.c_str());
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
