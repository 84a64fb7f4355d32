// The process-wide capture session shared by the C ABI and the CUPTI front-end: owns the recorder, dumps (on request,
// at exit, on OOM, from a signal through a helper thread) and talks to the event source through a small Backend.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "allocscope/result.h"
#include "notes.h"
#include "options.h"
#include "recorder.h"

namespace allocscope::capture {

// The event source (CUPTI in liballocscope_capture.so; none in CPU-only builds and tests).
struct Backend {
  Status (*subscribe)();     // error when it cannot (e.g. another CUPTI subscriber exists)
  void (*unsubscribe)();
  int16_t (*current_device)();  // for annotations of user ranges
};
void set_backend(const Backend* backend);
const Backend* backend();

class Session {
 public:
  static Session& get();  // never destroyed: hooks and atexit may run late in process teardown

  Status start(const Options& options);
  Status stop();
  // Writes a snapshot to `path` ("" = the configured output path, "%p" expanded). Never call from a signal handler.
  // `summary` (optional) receives "wrote PATH (N trace entries, M segments) in T ms" for the log line.
  Status dump(const std::string& path = "", std::string* summary = nullptr);
  // Writes the snapshot merged with PyTorch's own (outside.h): PyTorch's file `pytorch_snapshot` plus what this
  // capture saw outside PyTorch's allocator, to the configured output. The Python bootstrap calls it right after
  // PyTorch's recorder dumps, so both are the same moment. `final`: the job is ending; the capture's own exit dump,
  // which runs later, then leaves the merged file as it is.
  Status dump_merged(const std::string& pytorch_snapshot, bool final, std::string* summary = nullptr);
  // Called by hooks after an OOM event: dumps now when configured (we are on an ordinary thread, not in a handler).
  void after_oom();
  // One stderr line for an automatic dump ("at exit", "on OOM", "on signal"): the summary, or the failure (each
  // distinct failure once). The job goes on either way.
  void report(const char* when, const Status& st, const std::string& summary);
  // The process that started the recording (a forked child is not it).
  pid_t owner_pid() const { return owner_pid_.load(std::memory_order_acquire); }
  bool merged_final() const { return merged_final_.load(std::memory_order_acquire); }
  // A note for the file (notes.h): what this capture will not see, from the job's bootstrap; "" withdraws it.
  void note(const std::string& key, const std::string& text);

  // The recorder hooks write to, or nullptr when not recording. Old recorders are kept alive after stop so a hook
  // that raced with stop() never touches freed memory.
  Recorder* recorder() const { return active_.load(std::memory_order_acquire); }
  // The last recorder (active or stopped): what dump() writes.
  Recorder* last_recorder() const { return last_.load(std::memory_order_acquire); }

 private:
  Session() = default;
  Status write_snapshot_to(const std::string& path, const std::string& pytorch_snapshot, bool final,
                           std::string* summary);
  void install_signal(int sig);
  static void on_signal(int);
  static void helper_loop(int fd);
  static void before_fork();
  static void after_fork_in_parent();
  static void after_fork_in_child();

  std::mutex mu_;        // start/stop
  std::mutex dump_mu_;   // one dump at a time
  std::atomic<Recorder*> active_{nullptr};
  std::atomic<Recorder*> last_{nullptr};
  bool atexit_registered_ = false;
  std::atomic<bool> merged_final_{false};  // dump_merged(final) succeeded: dump_at_exit writes nothing
  bool atfork_registered_ = false;
  std::atomic<pid_t> owner_pid_{0};
  std::atomic<pid_t> forked_from_{0};  // in a forked child: the parent that owns the recording
  // In a forked child: the parent's recorders, never used or freed there (a thread that no longer exists may hold
  // their locks), but kept reachable so leak checkers do not report them at the child's exit.
  Recorder* parents_recorders_[2] = {nullptr, nullptr};
  // Recorders of earlier start()/stop() rounds: a callback that read the pointer before stop() may still be running on
  // one, so they are never freed; kept here (reachable) so leak checkers see held memory, not a leak.
  std::vector<Recorder*> retired_;
  std::mutex notes_mu_;
  Notes notes_;
  std::string start_failure_;  // why the last start() did not record (another CUPTI subscriber ...), for dump errors
  std::mutex report_mu_;
  std::string last_failure_;
  bool warned_subscriber_ = false;
  int installed_signal_ = 0;
};

}  // namespace allocscope::capture
