// Trace entries decoded ahead of the parser on a second core (private to shared/src/pickle).
//
// A 1M-event snapshot is 1M trace-entry dicts, and the parser spends most of its time reading their bytes. That
// part (decode_entry, entry_decode.h) depends on nothing but the bytes, so this thread scans the input for
// EMPTY_DICT and decodes what follows each one into a ring; the parser, reaching an EMPTY_DICT at the same offset,
// takes the decoded entry and only applies it (Machine::apply_entry). A scan may start at a byte that is not an
// opcode (a 0x7D inside a number): its decode describes those bytes all the same, and the parser never reaches that
// offset as an opcode, so it skips it. Nothing the parser does depends on whether this thread ran, how far it got,
// or what it decoded wrongly: it only ever saves the parser a decode it would have made identically.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#if !defined(__EMSCRIPTEN__)
#include <thread>
#endif

#include "pickle/entry_decode.h"
#include "pickle/opcodes.h"
#include "pickle/run_cache.h"

namespace allocscope::pickle::detail {

class Predecoder {
 public:
  // Starts the thread over `input`, which must outlive this object. `spare_time` (may be empty) is called while
  // the ring is full, as LoadOptions::spare_time is by the thread that reads ahead.
  Predecoder(std::span<const uint8_t> input, const std::function<bool()>* spare_time)
      : begin_(input.data()), end_(input.data() + input.size()), spare_time_(spare_time) {
#if !defined(__EMSCRIPTEN__)
    try {
      ring_.reset(new DecodedEntry[kRing]);
      thread_ = std::thread([this] { run(); });
    } catch (...) {  // no memory or no thread: the parser decodes everything itself, as without this
    }
#endif
  }
  ~Predecoder() { stop(); }
  Predecoder(const Predecoder&) = delete;
  Predecoder& operator=(const Predecoder&) = delete;

  void stop() {
    stop_.store(true, std::memory_order_release);
#if !defined(__EMSCRIPTEN__)
    if (thread_.joinable()) thread_.join();
#endif
  }
  // Stops the thread, then throws what it threw (out of memory; the caller's spare-time work), as if the parser had.
  void stop_and_rethrow() {
    stop();
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

  // Parser side: the entry decoded at offset `at` (the byte after its EMPTY_DICT), or null when there is none (the
  // parser decodes it itself). Valid until the next call. Never waits: when the thread has not got this far, the
  // parser decodes the entry itself and tells the thread where it is, and the thread moves ahead of it (run()).
  // So the two share the decoding whichever is faster, on this machine at this moment.
  const DecodedEntry* take(uint64_t at) {
    bool passed = false;
    if (const DecodedEntry* d = ready(at, &passed)) return d;
    if (!passed && scanned_.load(std::memory_order_acquire) <= at && ++behind_ % kPublish == 1)
      parser_at_.store(at, std::memory_order_release);
    return nullptr;
  }
  // The same without waiting: the entry at `at` if it is already decoded. `*passed`: the entries decoded so far go
  // beyond `at`, so there will be none for it.
  const DecodedEntry* ready(uint64_t at, bool* passed) {
    // Every entry handed out before is done with. Published now and then: each store sends the line to the other
    // core's next look at it.
    if (next_ - published_ >= kPublish) read_.store(published_ = next_, std::memory_order_release);
    if (next_ == written_seen_) written_seen_ = written_.load(std::memory_order_acquire);
    for (; next_ < written_seen_; ++next_) {
      const DecodedEntry& d = ring_[next_ % kRing];
      if (d.at < at) continue;  // an offset the parser never reached as an opcode, or decoded itself
      if (d.at > at) {
        *passed = true;
        return nullptr;
      }
      // The next entry's lines are on the other core: ask for them now, while this one is applied.
      const char* const following = reinterpret_cast<const char*>(&ring_[(next_ + 1) % kRing]);
      for (size_t line = 0; line < sizeof(DecodedEntry) / 2; line += 64) __builtin_prefetch(following + line);
      return &ring_[next_++ % kRing];
    }
    return nullptr;
  }

 private:
  static constexpr size_t kRing = 1024;
  static constexpr uint64_t kPublish = 64;
  // How far ahead of the parser the thread moves when the parser has caught up with it: a few hundred entries.
  static constexpr uint64_t kLead = 64u << 10;

#if !defined(__EMSCRIPTEN__)
  // A run of memo references ending at APPENDS, as the parser's cached_run finds it, in this thread's own cache.
  uint32_t find_run(const uint8_t* p, const uint8_t** run_end, uint64_t context) {
    return known_run(runs_, p, end_, context, /*add=*/true, run_end);
  }

  void run() {
    try {
      const uint8_t* p = begin_;
      uint64_t written = 0, read = 0;
      auto find = [this](const uint8_t* run, const uint8_t** run_end, uint64_t context) {
        return find_run(run, run_end, context);
      };
      while (!stop_.load(std::memory_order_relaxed)) {
        // Behind the parser (it decoded entries itself meanwhile): what is left here it has read already.
        if (const uint64_t parser = parser_at_.load(std::memory_order_acquire);
            static_cast<uint64_t>(p - begin_) <= parser)
          p = begin_ + std::min<uint64_t>(parser + kLead, static_cast<uint64_t>(end_ - begin_));
        const void* hit = std::memchr(p, kEMPTY_DICT, static_cast<size_t>(end_ - p));
        if (!hit) break;
        p = static_cast<const uint8_t*>(hit) + 1;
        while (written - read >= kRing) {  // full: wait for the parser, doing the caller's spare work meanwhile
          read = read_.load(std::memory_order_acquire);
          if (written - read < kRing) break;
          if (stop_.load(std::memory_order_relaxed)) return;
          if (!(spare_time_ && *spare_time_ && (*spare_time_)())) std::this_thread::yield();
        }
        DecodedEntry& d = ring_[written % kRing];
        if (decode_entry(p, begin_, end_, find, &d)) {
          written_.store(++written, std::memory_order_release);
          p = begin_ + d.setitems + 1;
          scanned_.store(d.setitems + 1, std::memory_order_release);
        } else {
          scanned_.store(static_cast<uint64_t>(p - begin_) + 1, std::memory_order_release);
        }
      }
    } catch (...) {  // out of memory, or thrown by the spare-time work: the caller's, once the parse stops
      failure_ = std::current_exception();
    }
  }
#endif

  const uint8_t* const begin_;
  const uint8_t* const end_;
  [[maybe_unused]] const std::function<bool()>* const spare_time_;  // unused in wasm (no thread)
  std::unique_ptr<DecodedEntry[]> ring_;
  alignas(64) RunCache runs_;  // this thread's, written every entry: off the line of ring_, which the parser reads
  std::exception_ptr failure_;  // the thread's, read after it is joined
  // The thread's, published: entries written, and the offset below which every EMPTY_DICT has been looked at.
  alignas(64) std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> scanned_{0};
  // The parser's, published now and then, on a line of their own: entries it is done with (every kPublish), read by
  // the thread when the ring looks full; where it decoded an entry itself. Then the stop, written once.
  alignas(64) std::atomic<uint64_t> read_{0};
  std::atomic<uint64_t> parser_at_{0};  // where the parser last decoded an entry itself, not found decoded
  alignas(64) std::atomic<bool> stop_{false};
  alignas(64) uint64_t next_ = 0, written_seen_ = 0, published_ = 0, behind_ = 0;  // the parser's own
#if !defined(__EMSCRIPTEN__)
  std::thread thread_;
#endif
};

}  // namespace allocscope::pickle::detail
