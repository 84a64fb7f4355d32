// The CLI's answer to a snapshot file truncated while a verb reads it. The loader maps files (mapped_file.h in
// shared/src/snapshot says why and what happens then): a job that dumps its snapshot again to the same path
// truncates it under us, and the next read past the new end raises SIGBUS, which killed the process with no answer
// (exit 135). A SIGBUS whose address is in a mapped input now prints what happened, in one line as every other
// load error, and exits 1. Anything else (a SIGBUS in memory that is not a snapshot's mapping, or one sent by kill)
// gets the default action, as before.
//
// Only what a signal handler may call (signal-safety(7)): write, _exit, signal, raise, pause, and lock-free atomics.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "allocscope/loader.h"
#include "cli_common.h"

namespace allocscope::cli {

namespace {

bool g_stderr_tty = false;  // a progress line may be on stderr's current line: cleared first

void put(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

void put_number(uint64_t v) {
  char buf[24];
  char* p = buf + sizeof buf;
  *--p = '\0';
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  put(p);
}

void on_sigbus(int sig, siginfo_t* info, void*) {
  const MappedInput in = info && info->si_code > 0 ? mapped_input_at(info->si_addr) : MappedInput{};
  if (!in.path) {
    // Not ours: the default action, from the faulting access itself (returning runs it again) or, for a signal
    // that was sent rather than raised by an access, from raising it again.
    ::signal(sig, SIG_DFL);
    if (!info || info->si_code <= 0) ::raise(sig);
    return;
  }
  // The parser and the thread decoding ahead of it can both read past the new end at once: one says so and ends
  // the process; another waits for that (a lock-free atomic, as a handler may use).
  static_assert(std::atomic<bool>::is_always_lock_free);
  static std::atomic<bool> reporting{false};
  if (reporting.exchange(true)) {
    for (;;) ::pause();
  }
  if (g_stderr_tty) put("\r\033[K");
  put("allocscope: ");
  put(in.path);
  put(": the file got shorter while it was read: byte ");
  put_number(in.offset);
  put(" of the ");
  put_number(in.size);
  put(" it had when opened is gone (another process truncated or rewrote it; a job dumping its snapshot again to "
      "this path does); read a copy that nothing writes to\n");
  ::_exit(1);
}

}  // namespace

void guard_mapped_inputs() {
  g_stderr_tty = ::isatty(STDERR_FILENO) == 1;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, nullptr);
}

}  // namespace allocscope::cli
