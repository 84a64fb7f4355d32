// The pieces of usable_cores (allocscope/threads.h) that read text, apart so that tests can give them any.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace allocscope::detail {

// Cores allowed by a cgroup v2 `cpu.max` ("QUOTA PERIOD" in microseconds, or "max PERIOD": no limit), rounded up,
// at least 1; nothing when it sets no limit or does not read as one.
std::optional<unsigned> cores_in_cpu_max(std::string_view cpu_max);

// The cgroup v2 path of a process from its /proc/PID/cgroup text (the "0::/path" line); nothing on a host with v1
// controllers only.
std::optional<std::string> cgroup_v2_path(std::string_view proc_cgroup);

}  // namespace allocscope::detail
