// usable_cores' readings of the kernel's text (util/cores.h). The affinity mask is tested on the real binary
// (Binary.OneCpuOfTheMaskStartsNoThreads): this process counts its cores once, before any test could narrow them.
#include <gtest/gtest.h>

#include "util/cores.h"

namespace {

using allocscope::detail::cgroup_v2_path;
using allocscope::detail::cores_in_cpu_max;

TEST(Cores, ACpuQuotaIsRoundedUpToWholeCores) {
  EXPECT_EQ(cores_in_cpu_max("200000 100000\n"), 2u);  // docker --cpus 2
  EXPECT_EQ(cores_in_cpu_max("150000 100000"), 2u);    // 1.5 CPUs can keep two threads half busy
  EXPECT_EQ(cores_in_cpu_max("50000 100000\n"), 1u);   // half a CPU is still one
  EXPECT_EQ(cores_in_cpu_max("6400000 100000\n"), 64u);
}

TEST(Cores, NoQuotaOrTextThatIsNotOneLimitsNothing) {
  EXPECT_EQ(cores_in_cpu_max("max 100000\n"), std::nullopt);
  EXPECT_EQ(cores_in_cpu_max(""), std::nullopt);  // no such file
  EXPECT_EQ(cores_in_cpu_max("100000"), std::nullopt);
  EXPECT_EQ(cores_in_cpu_max("0 100000"), std::nullopt);
  EXPECT_EQ(cores_in_cpu_max("100000 0"), std::nullopt);
  EXPECT_EQ(cores_in_cpu_max("-1 100000"), std::nullopt);  // cgroup v1's "no quota"
  EXPECT_EQ(cores_in_cpu_max("12x 100000"), std::nullopt);
}

TEST(Cores, TheCgroupV2PathIsTheZeroLine) {
  EXPECT_EQ(cgroup_v2_path("0::/user.slice/user-1000.slice/session-3.scope\n"),
            "/user.slice/user-1000.slice/session-3.scope");
  EXPECT_EQ(cgroup_v2_path("0::/\n"), "/");  // a container's own namespace
  // A hybrid host (v1 controllers and the v2 line last), as on this project's CI machines.
  EXPECT_EQ(cgroup_v2_path("4:memory:/process_api/0e7c\n3:cpuset:/\n1:cpu:/\n0::/\n"), "/");
  EXPECT_EQ(cgroup_v2_path("4:memory:/a\n1:cpu,cpuacct:/b\n"), std::nullopt);  // v1 only
  EXPECT_EQ(cgroup_v2_path(""), std::nullopt);
}

}  // namespace
