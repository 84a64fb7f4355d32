// usable_cores, and SingleThreaded: what threads_for (util/parallel.h) reads before any thread starts.
#include "allocscope/threads.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

#include "util/cores.h"
#include "util/parallel.h"

#if !defined(__EMSCRIPTEN__)
#include <sched.h>

#include <thread>
#endif

namespace allocscope {

namespace detail {

std::optional<unsigned> cores_in_cpu_max(std::string_view text) {
  const size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view quota = text.substr(0, space);
  std::string_view period = text.substr(space + 1);
  while (!period.empty() && (period.back() == '\n' || period.back() == ' ')) period.remove_suffix(1);
  uint64_t q = 0, p = 0;
  if (quota == "max") return std::nullopt;
  auto read = [](std::string_view s, uint64_t* v) {
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
    return ec == std::errc() && end == s.data() + s.size() && *v > 0;
  };
  if (!read(quota, &q) || !read(period, &p)) return std::nullopt;
  const uint64_t cores = q / p + (q % p != 0);
  return static_cast<unsigned>(std::clamp<uint64_t>(cores, 1, 1u << 20));
}

std::optional<std::string> cgroup_v2_path(std::string_view text) {
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    if (line.substr(0, 3) == "0::") return std::string(line.substr(3));
    at = end + 1;
  }
  return std::nullopt;
}

}  // namespace detail

#if defined(__EMSCRIPTEN__)

unsigned usable_cores() { return 1; }
SingleThreaded::SingleThreaded(bool) : was_(true) {}  // one thread there already
SingleThreaded::~SingleThreaded() = default;

#else

namespace {

std::string read_small_file(const std::string& path) {
  std::ifstream f(path);
  std::string text;
  std::getline(f, text, '\0');
  return text.size() > 65536 ? std::string() : text;
}

unsigned count_usable_cores() {
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  // The affinity mask, sized for up to 8,192 CPUs (the kernel refuses a mask smaller than its own).
  for (int ncpu = 1024; ncpu <= 8192; ncpu *= 2) {
    cpu_set_t* set = CPU_ALLOC(ncpu);
    if (!set) break;
    const size_t bytes = CPU_ALLOC_SIZE(ncpu);
    const bool got = sched_getaffinity(0, bytes, set) == 0;
    const int n = got ? CPU_COUNT_S(bytes, set) : 0;
    CPU_FREE(set);
    if (got) {
      if (n > 0) cores = static_cast<unsigned>(n);
      break;
    }
  }
  // A CPU quota on the process's cgroup or any above it (each one's cpu.max limits all below).
  if (auto path = detail::cgroup_v2_path(read_small_file("/proc/self/cgroup"))) {
    std::string dir = *path;
    for (;;) {
      if (auto quota = detail::cores_in_cpu_max(read_small_file("/sys/fs/cgroup" + dir + "/cpu.max")))
        cores = std::min(cores, *quota);
      if (dir.empty() || dir == "/") break;
      const size_t slash = dir.rfind('/');
      dir = slash == std::string::npos ? std::string() : dir.substr(0, slash);
    }
  }
  return std::max(1u, cores);
}

}  // namespace

unsigned usable_cores() {
  static const unsigned cores = count_usable_cores();
  return cores;
}

SingleThreaded::SingleThreaded(bool on) : was_(detail::t_single_threaded) { detail::t_single_threaded = was_ || on; }
SingleThreaded::~SingleThreaded() { detail::t_single_threaded = was_; }

#endif

}  // namespace allocscope
