// A snapshot file mapped read-only for the loader, and the table of mappings a SIGBUS handler consults (private to
// shared/src/snapshot; mapped_input_at in allocscope/loader.h is the public side).
//
// A mapping sees the file as it is now, not as it was opened: when another process truncates it (a training job
// that dumps its snapshot again to the same path opens it with "wb"), the parser's next read past the new end
// raises SIGBUS, and the process died with no answer (an audit: `summary` exited 135). read() would have said "the
// file shrank"; a mapping can only say it through the signal. So every mapping is listed while it lives, and a
// program that wants a one-line error instead (the CLI does) installs a handler that asks mapped_input_at whether
// the faulting address is one of ours and which file it was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

// Native builds map files; WebAssembly never reads files (the browser hands it bytes).
#if !defined(__EMSCRIPTEN__) && __has_include(<sys/mman.h>)
#define ALLOCSCOPE_HAVE_MMAP 1
#else
#define ALLOCSCOPE_HAVE_MMAP 0
#endif

namespace allocscope::detail {

#if ALLOCSCOPE_HAVE_MMAP
// A regular file mapped read-only, or nothing (a pipe, /proc, an empty file: the caller reads those). Reading a
// 160 MB snapshot into a vector zeroed the pages, then copied the file into them: a third of `summary`'s time was
// page faults, memset and copies; a mapping is read by the parser straight from the page cache. Listed in the
// table of mappings from construction to destruction.
class MappedFile {
 public:
  // Files up to `populate_up_to` bytes are faulted in at once (fewer faults); larger ones as they are read.
  MappedFile(const std::string& path, uint64_t populate_up_to);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  bool ok() const { return data_ != nullptr; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int slot_ = -1;  // its row in the table, or -1 when the table was full (then a truncation is not named)
};
#endif

}  // namespace allocscope::detail
