// `cmake --install` into a temporary prefix: the installed tool answers without the build tree, and finds its viewer,
// capture library and Python bootstrap in its own prefix (PREFIX/share/allocscope/site, PREFIX/lib,
// PREFIX/share/allocscope/python) before anything of the source tree.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace {

namespace fs = std::filesystem;

int sh(const std::string& command) { return std::system((command + " > /dev/null 2>&1").c_str()); }
std::string q(const std::string& s) { return "'" + s + "'"; }

class Installed : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    prefix_ = new std::string(clitest::temp_path("prefix"));
    status_ = sh("cmake --install " + q(ALLOCSCOPE_BUILD_DIR) + " --prefix " + q(*prefix_));
  }
  static std::string* prefix_;
  static int status_;
};
std::string* Installed::prefix_ = nullptr;
int Installed::status_ = -1;

std::string run(const std::string& command, int* status) {
  const std::string out = clitest::temp_path("out");
  *status = std::system((command + " > " + q(out) + " 2>&1").c_str());
  return clitest::read_text(out);
}

TEST_F(Installed, TheToolAnswersFromThePrefix) {
  ASSERT_EQ(status_, 0);
  const std::string& p = *prefix_;
  for (const char* f : {"bin/allocscope", "lib/liballocscope.so", "include/allocscope.h"})
    EXPECT_TRUE(fs::exists(p + "/" + f)) << f;
  int status = 0;
  const std::string out = run(q(p + "/bin/allocscope") + " summary " + q(clitest::snapshot_path("oom")),
                              &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("peak allocated"), std::string::npos) << out;
}

// The installed libraries run where Debian's packages are not: the capture library is injected into users' CUDA jobs
// and liballocscope loads into their Python. Each may need only what such a machine has (the C and C++ runtimes,
// zlib, and for the capture CUPTI and libunwind), never a library only our build machine has (libsimdjson.so.14 was).
TEST_F(Installed, TheLibrariesNeedOnlyWhatAJobsMachineHas) {
  ASSERT_EQ(status_, 0);
  std::vector<std::string> allowed = {"libc.so", "libm.so", "libstdc++.so", "libgcc_s.so", "ld-linux", "libdl.so",
                                            "libpthread.so", "librt.so", "libz.so", "libcupti.so", "libunwind.so"};
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitizer build links its runtimes into everything it builds; that is the build, not what we ship.
  allowed.insert(allowed.end(), {"libasan.so", "libubsan.so", "libtsan.so"});
#endif
  int libraries = 0;
  for (const char* lib : {"lib/liballocscope.so", "lib/liballocscope_capture.so"}) {
    if (!fs::exists(*prefix_ + "/" + lib)) continue;
    ++libraries;
    int status = 0;
    const std::string out = run("readelf -d " + q(*prefix_ + "/" + lib), &status);
    ASSERT_EQ(status, 0) << out;
    size_t at = 0;
    int needed = 0;
    while ((at = out.find("Shared library: [", at)) != std::string::npos) {
      at += 17;
      const std::string name = out.substr(at, out.find(']', at) - at);
      ++needed;
      bool ok = false;
      for (const auto& a : allowed) ok |= name.rfind(a, 0) == 0;
      EXPECT_TRUE(ok) << lib << " needs " << name;
    }
    EXPECT_GT(needed, 0) << out;
  }
  EXPECT_GE(libraries, 1);
}

TEST_F(Installed, PlotTakesTheViewerOfItsOwnPrefix) {
  ASSERT_EQ(status_, 0);
  // A site in the prefix with a marked wasm file: the page `plot` writes must carry that one, not a build's.
  const std::string site = *prefix_ + "/share/allocscope/site";
  fs::create_directories(site);
  fs::copy(std::string(ALLOCSCOPE_SOURCE_DIR) + "/web", site,
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  std::ofstream(site + "/allocscope.js") << "/* glue */";
  std::ofstream(site + "/allocscope.wasm") << "installed-prefix-marker";
  const std::string page = clitest::temp_path("report.html");
  int status = 0;
  const std::string out = run(q(*prefix_ + "/bin/allocscope") + " plot " +
                                  q(clitest::snapshot_path("oom")) + " -o " + q(page), &status);
  ASSERT_EQ(status, 0) << out;
  // base64 of "installed-prefix-marker"
  EXPECT_NE(clitest::read_text(page).find("aW5zdGFsbGVkLXByZWZpeC1tYXJrZXI="), std::string::npos);
  fs::remove_all(site);
}

#ifdef ALLOCSCOPE_HAVE_CAPTURE
TEST_F(Installed, RecordInjectsThePrefixsLibraryAndBootstrap) {
  ASSERT_EQ(status_, 0);
  const std::string& p = *prefix_;
  ASSERT_TRUE(fs::exists(p + "/lib/liballocscope_capture.so"));
  ASSERT_TRUE(fs::exists(p + "/share/allocscope/python/sitecustomize.py"));
  int status = 0;
  // `env` as the job prints what record set up for it (no CUDA runs, so nothing is recorded).
  const std::string out = run("env -u ALLOCSCOPE_CAPTURE_LIBRARY " + q(p + "/bin/allocscope") +
                                  " record -o " + q(clitest::temp_path("x.pickle")) + " -- env", &status);
  ASSERT_EQ(status, 0) << out;
  const std::string lib = fs::canonical(p + "/lib/liballocscope_capture.so").string();
  const std::string boot = fs::canonical(p + "/share/allocscope/python").string();
  EXPECT_NE(out.find("CUDA_INJECTION64_PATH=" + lib + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("PYTHONPATH=" + boot), std::string::npos) << out;
}
#endif

}  // namespace
