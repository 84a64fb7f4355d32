// MappedFile and the table of live mappings behind mapped_input_at (mapped_file.h says why).
#include "snapshot/mapped_file.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "allocscope/loader.h"

#if ALLOCSCOPE_HAVE_MMAP
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace allocscope {

#if ALLOCSCOPE_HAVE_MMAP
namespace {

// A fixed table of plain atomics, so that a signal handler can read it: no lock, no allocation. A verb maps one file
// at a time, `diff` two (`ranks` reads its files instead), so 64 rows are never all in use; a mapping that finds
// none is still made, only not named if it is truncated.
struct Row {
  std::atomic<int> used{0};             // claimed by a MappedFile (its path is being written or is set)
  std::atomic<uintptr_t> begin{0};      // published last (release), cleared first: 0 means "not listed"
  std::atomic<uintptr_t> end{0};
  std::atomic<uint64_t> file_size{0};
  char path[1024] = {};
};
Row g_rows[64];

int list_mapping(const uint8_t* data, size_t size, const std::string& path) {
  for (int i = 0; i < static_cast<int>(std::size(g_rows)); ++i) {
    int expected = 0;
    if (!g_rows[i].used.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) continue;
    Row& r = g_rows[i];
    const size_t n = std::min(path.size(), sizeof r.path - 1);
    std::memcpy(r.path, path.data(), n);
    r.path[n] = '\0';
    r.file_size.store(size, std::memory_order_relaxed);
    r.end.store(reinterpret_cast<uintptr_t>(data) + size, std::memory_order_relaxed);
    r.begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
    return i;
  }
  return -1;
}

void unlist_mapping(int slot) {
  if (slot < 0) return;
  g_rows[slot].begin.store(0, std::memory_order_release);
  g_rows[slot].used.store(0, std::memory_order_release);
}

}  // namespace

namespace detail {

MappedFile::MappedFile(const std::string& path, uint64_t populate_up_to) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    const int populate = static_cast<uint64_t>(st.st_size) <= populate_up_to ? MAP_POPULATE : 0;
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE | populate, fd, 0);
    if (p != MAP_FAILED) {
      data_ = static_cast<const uint8_t*>(p);
      size_ = static_cast<size_t>(st.st_size);
      ::madvise(p, size_, MADV_SEQUENTIAL);
      slot_ = list_mapping(data_, size_, path);
    }
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (!data_) return;
  unlist_mapping(slot_);  // before the range can be mapped again by something else
  ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace detail

MappedInput mapped_input_at(const void* addr) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  for (const Row& r : g_rows) {
    const uintptr_t begin = r.begin.load(std::memory_order_acquire);
    if (begin == 0 || a < begin || a >= r.end.load(std::memory_order_relaxed)) continue;
    return {r.path, a - begin, r.file_size.load(std::memory_order_relaxed)};
  }
  return {};
}

#else

MappedInput mapped_input_at(const void*) { return {}; }

#endif

}  // namespace allocscope
