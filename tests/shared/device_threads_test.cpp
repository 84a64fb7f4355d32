// Devices are analysed on several threads (shared/src/util/parallel.h: lifetimes and the summary's per-device
// analyses): the answer must be the one a single thread gives, byte for byte. The tsan preset runs this too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "allocscope/frame_filter.h"
#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"
#include "allocscope/summary.h"
#include "util/parallel.h"

namespace allocscope {
namespace {

std::string answer(const Snapshot& s, const FrameFilter& ff) {
  const Lifetimes lt = build_lifetimes(s);
  const Summary sum = summarize(s, lt, ff);
  return to_json(s, sum) + to_text(s, sum);
}

TEST(DeviceThreads, OneThreadAndSeveralGiveTheSameAnswer) {
  for (const char* name : {"external/pt28_4dev_expandable_oom.pickle.gz", "ddp_rank1.pickle",
                           "external/pt21_select_n_4dev.pickle.gz"}) {
    SCOPED_TRACE(name);
    auto s = load_snapshot_file(std::string(ALLOCSCOPE_FIXTURES) + "/" + name);
    ASSERT_TRUE(s.ok()) << s.error().describe();
    const FrameFilter ff(s.value());
    setenv("ALLOCSCOPE_THREADS", "1", 1);
    const std::string one = answer(s.value(), ff);
    unsetenv("ALLOCSCOPE_THREADS");
    const std::string many = answer(s.value(), ff);
    EXPECT_EQ(one, many);
    EXPECT_NE(one.find("device"), std::string::npos);
  }
  // pt28 traces three devices: the threads had work to share.
  auto s = load_snapshot_file(std::string(ALLOCSCOPE_FIXTURES) + "/external/pt28_4dev_expandable_oom.pickle.gz");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(build_lifetimes(s.value()).devices.size(), 3u);
}

// detail::both: with no core to spare, `a` runs before `b` on the calling thread; with one, both run, and the caller
// sees both results once it returns.
TEST(DeviceThreads, BothRunsEachPieceOnceInOrderWhenNoCoreIsSpare) {
  std::vector<int> order;
  detail::both(false, [&] { order.push_back(1); }, [&] { order.push_back(2); });
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  int a = 0, b = 0;
  detail::both(true, [&] { a = 7; }, [&] { b = 9; });
  EXPECT_EQ(a, 7);
  EXPECT_EQ(b, 9);
}

}  // namespace
}  // namespace allocscope
