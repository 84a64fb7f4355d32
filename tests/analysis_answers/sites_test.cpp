// The one site rule (FrameFilter::site) on files recorded with C++ frames (stacks='all', PyTorch's default) and with
// Python frames only: the site is the user's innermost line where the stack has one, the autograd node on the
// engine's threads, and never the unwinder, the allocator or the interpreter. Printed stacks drop the unwinder.
#include <gtest/gtest.h>

#include <fstream>
#include <cctype>
#include <map>
#include <regex>

#include <string>
#include <string_view>
#include <vector>

#include "allocscope/oom.h"
#include "allocscope/peak.h"
#include "allocscope/summary.h"
#include "answers_fixtures.h"
#include "../cli/synthetic.h"

namespace allocscope::test {
namespace {

// The spec, written out independently of FrameFilter: a user frame is a .py file that is not an installed package,
// the standard library, PyTorch, or code torch.compile generated (Inductor's cache, /tmp/torchinductor_<user>/).
// A Windows path names the same folders with backslashes and any case (C:\Python310\Lib\, ...\Lib\site-packages\).
bool plainly_user(std::string_view written) {
  std::string file(written);
  for (char& c : file) c = c == '\\' ? '/' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!file.ends_with(".py")) return false;
  for (std::string_view lib : {"site-packages/", "dist-packages/", "/torch/", "/torchinductor_"})
    if (file.find(lib) != std::string::npos) return false;
  static const std::regex stdlib("/lib(64)?/python[0-9.]+t?/");
  // Windows: python.org (Python310, Python312-32), uv (uv\python\cpython-3.10.19-windows-x86_64-none\Lib, as
  // pt29_decomfl's copy.py), pyenv-win (versions\3.11.7\Lib), the Microsoft Store.
  static const std::regex windows_stdlib(
      "/python[0-9]+(-32)?/lib/|/cpython-[^/]*/lib/|/pyenv-win/versions/[0-9.]+/lib/|"
      "/pythonsoftwarefoundation\\.python\\.[^/]*/lib/");
  return !std::regex_search(file, stdlib) && !std::regex_search(file, windows_stdlib);
}

struct SiteCounts {
  size_t stacks = 0, with_user = 0, backward_nodes = 0;
};

SiteCounts check_sites(const std::string& name) {
  SiteCounts n;
  const Loaded* l = load(name);
  EXPECT_TRUE(l) << name;
  if (!l) return n;
  const Snapshot& s = l->s;
  for (const DeviceLifetimes& lt : l->lifetimes.devices) {
    for (uint32_t i = 0; i < lt.count(); ++i) {
      const StackId st = lt.stack[i];
      const auto frames = s.stack(st);
      if (frames.empty()) continue;
      ++n.stacks;
      const FrameId site = l->ff.site(st);
      EXPECT_NE(site, kNoFrame) << name;
      if (site == kNoFrame) continue;
      const std::string text = FrameFilter::site_text(s, site);
      for (const char* never : {"unwind::unwind", "CapturedTraceback", "gather_with_cpp", "CachingAllocator",
                                "_PyEval_", "c10::impl::", "thread_main("})
        EXPECT_EQ(text.find(never), std::string::npos) << name << ": site " << text;
      FrameId want = kNoFrame;
      for (FrameId f : frames)
        if (plainly_user(s.str(s.frames[f].filename))) {
          want = f;
          break;
        }
      if (want != kNoFrame) {
        ++n.with_user;
        EXPECT_EQ(site, want) << name << ": site " << text << ", innermost user frame "
                              << FrameFilter::format(s, want);
      }
      n.backward_nodes += text.rfind("backward: ", 0) == 0 && text != "backward: autograd engine";
    }
  }
  return n;
}

// A capture names native frames by their binary when it has no line table: the interpreter's executable is never
// the user's code, a script whose name starts with "python" is.
TEST(Sites, TheInterpretersBinaryIsALibraryFrame) {
  for (std::string_view f : {"/usr/bin/python3.12", "/opt/conda/bin/python", "python3", "/usr/local/bin/python3.11"})
    EXPECT_TRUE(is_library_frame("python3.12+0x58216f", f)) << f;
  for (std::string_view f : {"/home/me/train.py", "/home/me/python_utils.py", "/work/python3.py", "/work/bin/trainer"})
    EXPECT_FALSE(is_library_frame("main", f)) << f;
  // Start-up hooks wrap the job's calls (allocscope's bootstrap lends frames from a wrapper in its sitecustomize):
  // the wrapper is between the job's line and the library, never the answer.
  for (std::string_view f : {"/opt/allocscope/share/allocscope/python/sitecustomize.py", "sitecustomize.py",
                             "/home/me/.local/usercustomize.py"})
    EXPECT_TRUE(is_library_frame("lent", f)) << f;
  EXPECT_FALSE(is_library_frame("main", "/home/me/my_sitecustomize.py"));
}

// Captures with Python frames (tests/fixtures/capture_python, recorded on the GPU machine by
// tests/capture/pyframes/run_gpu.sh): every stack that ran Python reaches down to the job's own script, so its site
// is the job's line; the only allocations without one are the autograd engine's threads' (no Python runs there).
// (Frees may lack it: the job's objects are released at exit by the interpreter's own atexit functions.)
TEST(Sites, CapturesWithPythonFramesNameTheJobsLine) {
  for (const char* job : {"torch", "torch_nocache", "cupy", "jax", "nccl"}) {
    SCOPED_TRACE(job);
    const SiteCounts n = check_sites(std::string("capture_python/") + job);
    EXPECT_GT(n.with_user, 0u);
    const Loaded* l = load(std::string("capture_python/") + job);
    ASSERT_TRUE(l);
    const Snapshot& s = l->s;
    size_t python = 0, engine = 0;
    for (const DeviceLifetimes& lt : l->lifetimes.devices)
    for (uint32_t i = 0; i < lt.count(); ++i) {
      const StackId st = lt.stack[i];
      bool any_py = false, script = false;
      for (FrameId f : s.stack(st)) {
        const std::string_view file = s.str(s.frames[f].filename);
        any_py |= file.ends_with(".py");
        script |= file.ends_with("_job.py");
      }
      python += any_py;
      engine += !any_py && FrameFilter::site_text(s, l->ff.site(st)).rfind("backward: ", 0) == 0;
      if (any_py) {
        EXPECT_TRUE(script) << "a Python stack that does not reach the job's script";
        EXPECT_TRUE(l->ff.has_user_frame(st));
      }
    }
    EXPECT_GT(python, 0u);
    if (std::string_view(job) != "cupy" && std::string_view(job) != "jax") {
      EXPECT_GT(engine, 0u);  // the backward pass's own threads
    }
  }
}

// The same PyTorch jobs recorded with the bootstrap's backward wrapper (tests/fixtures/capture_lent, H100, PyTorch's
// recorder off): the autograd engine's threads run no Python, and the thread that waits in backward lends them its
// frames, so every gradient's site is the line that called backward (torch_job.py:20, nccl_job.py:19, both
// `loss.backward()`), and every byte alive at the peak has a line of the job's script as its site.
TEST(Sites, GradientsNameTheLineThatCalledBackward) {
  struct Job { const char* name; const char* script; int backward_line; };
  for (const Job& j : {Job{"capture_lent/torch", "torch_job.py", 20}, Job{"capture_lent/torch_nocache", "torch_job.py", 20},
                       Job{"capture_lent/nccl", "nccl_job.py", 19}, Job{"capture_nccl2/lent/rank0", "nccl_job.py", 19},
                       Job{"capture_nccl2/lent/rank1", "nccl_job.py", 19}}) {
    SCOPED_TRACE(j.name);
    const Loaded* l = load(j.name);
    ASSERT_TRUE(l);
    const Snapshot& s = l->s;
    const DeviceLifetimes& lt = traced_device(*l);
    size_t engine = 0;
    for (uint32_t i = 0; i < lt.count(); ++i) {
      bool on_engine = false;
      for (FrameId f : s.stack(lt.stack[i]))
        on_engine |= s.str(s.frames[f].name).find("autograd::Engine::thread_main") != std::string_view::npos;
      if (!on_engine || lt.alloc_event[i] == kNoEvent) continue;
      ++engine;
      const FrameId site = l->ff.site(lt.stack[i]);
      ASSERT_NE(site, kNoFrame);
      EXPECT_TRUE(s.str(s.frames[site].filename).ends_with(j.script)) << FrameFilter::site_text(s, site);
      EXPECT_EQ(s.frames[site].line, j.backward_line) << FrameFilter::site_text(s, site);
    }
    EXPECT_GT(engine, 3u);
    PeakOptions po;
    po.top = 100000;
    const Peak p = find_peak(s, lt, nullptr, l->ff, nullptr, po);
    uint64_t script = 0;
    for (size_t k = 0; k < p.site.size(); ++k)
      if (p.site[k] != kNoFrame && s.str(s.frames[p.site[k]].filename).ends_with(j.script)) script += p.site_bytes[k];
    EXPECT_EQ(script, p.allocated_bytes);
  }
}

// Two ranks of DDP on NCCL over two H100s (tests/fixtures/capture_nccl2/lent, tests/capture/owners/run_nccl2.sh,
// PyTorch's recorder off): NCCL maps its peer-to-peer buffers on its own proxy thread (ncclProxyService), which runs
// no Python, while the job's thread waits in the first collective on the communicator, inside DDP's constructor. The
// bootstrap's wrappers of torch.distributed's collectives lend that thread's frames, so those buffers' site is the
// DDP(...) line, nccl_job.py:13 (before the wrappers: "libnccl.so.2:0:ncclCuMemAlloc", 288 MiB per rank); and the
// wrapper's own frame (sitecustomize.py) is never the site of what the job's thread allocates inside it.
TEST(Sites, NcclsProxyThreadNamesTheLineThatSetUpTheCommunicator) {
  for (const char* rank : {"rank0", "rank1"}) {
    SCOPED_TRACE(rank);
    const Loaded* l = load(std::string("capture_nccl2/lent/") + rank);
    ASSERT_TRUE(l);
    const Snapshot& s = l->s;
    const DeviceLifetimes& lt = traced_device(*l);
    uint64_t proxy_bytes = 0, in_wrapper = 0;
    std::map<uint64_t, uint32_t> proxy_sizes;  // size -> allocations
    for (uint32_t i = 0; i < lt.count(); ++i) {
      if (lt.alloc_event[i] == kNoEvent) continue;
      bool proxy = false, wrapped = false;
      for (FrameId f : s.stack(lt.stack[i])) {
        proxy |= s.str(s.frames[f].name).find("ncclProxyService") != std::string_view::npos;
        wrapped |= s.str(s.frames[f].filename).ends_with("sitecustomize.py");
      }
      const FrameId site = l->ff.site(lt.stack[i]);
      if (proxy) {
        ASSERT_NE(site, kNoFrame);
        EXPECT_TRUE(s.str(s.frames[site].filename).ends_with("nccl_job.py")) << FrameFilter::site_text(s, site);
        EXPECT_EQ(s.frames[site].line, 13) << FrameFilter::site_text(s, site);
        proxy_bytes += lt.size[i];
        ++proxy_sizes[lt.size[i]];
      }
      if (wrapped) {
        ++in_wrapper;
        ASSERT_NE(site, kNoFrame);
        EXPECT_FALSE(s.str(s.frames[site].filename).ends_with("sitecustomize.py")) << FrameFilter::site_text(s, site);
      }
    }
    // One receive buffer of 10 MiB (p2pRecvProxySetup) and one send buffer of 2 MiB (p2pSendProxySetup) per channel
    // to the peer, and NCCL's own log (the same job in run_nccl2_log.sh) says how many channels it connected
    // "via P2P/CUMEM": the count of buffers is NCCL's; their sizes are the capture's.
    std::ifstream log(std::string(ALLOCSCOPE_FIXTURES) + "/capture_nccl2/nccl_log/nccl." + rank + ".log");
    uint32_t channels = 0;
    for (std::string line; std::getline(log, line);) channels += line.find("via P2P/CUMEM") != std::string::npos;
    EXPECT_EQ(channels, 24u);
    EXPECT_EQ(proxy_sizes, (std::map<uint64_t, uint32_t>{{2ull << 20, channels}, {10ull << 20, channels}}));
    EXPECT_EQ(proxy_bytes, 288ull << 20);
    EXPECT_GT(in_wrapper, 90u);  // (the peer's buffers NCCL maps, also made there, are left out at load: owners.h)
  }
}

TEST(Sites, CppStacksNameTheUsersLine) {
  for (const char* name : {"gpt2_cpp", "external/pt28_4dev_expandable_oom", "external/pt21_ftcourse",
                           "external/pt26_cs336_train", "external/pt22_eor_nn", "external/pt25_sqattn_4dev"}) {
    const SiteCounts n = check_sites(name);
    EXPECT_GT(n.with_user, 0u) << name;
  }
}

TEST(Sites, PythonOnlyStacksNameTheUsersLine) {
  for (const char* name : {"resnet50_train", "transformer_leak", "external/pt29_decomfl", "external/pt22_diffusion_tiny",
                           "external/pt26_cs336_compile_fwd"}) {
    const SiteCounts n = check_sites(name);
    EXPECT_GT(n.with_user, 0u) << name;
  }
}

// Two files recorded on Windows, and one of torch.compile's generated code. An audit (2026-11-25) read the stacks of
// their largest allocations: the user's lines are unet.py:134 and model.py:7 (a diffusion U-Net), client.py:176
// (DeComFL), and transformer.py:22, :57, :79 and :142 (the compiled model's own module). Before, PyTorch's
// C:\...\site-packages\torch\nn\modules\linear.py and Inductor's /tmp/torchinductor_<user>/z3/cz3v....py were
// named as the user's code.
TEST(Sites, WindowsPathsAndInductorsGeneratedCodeAreNotTheUsersLine) {
  const struct {
    const char* file;
    std::vector<std::string> top;
  } cases[] = {
      {"external/pt22_diffusion_tiny", {"unet.py:134:forward", "model.py:7:__init__"}},
      {"external/pt29_decomfl", {"client.py:176:reset_model"}},
      {"external/pt26_cs336_compile_fwd",
       {"<no frames>", "transformer.py:22:forward", "transformer.py:57:forward", "transformer.py:79:forward",
        "transformer.py:142:softmax"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const Loaded* l = load(c.file);
    ASSERT_TRUE(l);
    const Summary sum = summarize(l->s, l->lifetimes, l->ff);
    ASSERT_EQ(sum.devices.size(), 1u);
    const DeviceSummary& d = sum.devices[0];
    ASSERT_GE(d.top_site.size(), c.top.size());
    for (size_t k = 0; k < c.top.size(); ++k) EXPECT_EQ(FrameFilter::site_text(l->s, d.top_site[k]), c.top[k]) << k;
  }
  EXPECT_TRUE(is_library_frame("forward", "C:\\Users\\me\\AppData\\Local\\Programs\\Python\\Python310\\lib\\site-packages\\"
                                          "torch\\nn\\modules\\linear.py"));
  EXPECT_TRUE(is_library_frame("__exit__", "C:\\Python312\\Lib\\contextlib.py"));
  EXPECT_TRUE(is_library_frame("call", "/tmp/torchinductor_me/z3/cz3vabc.py"));
  EXPECT_TRUE(is_library_frame("main", "C:\\Python312\\python.exe"));
  EXPECT_TRUE(is_library_frame("deepcopy", "C:\\Users\\me\\anaconda3\\envs\\ml\\Lib\\copy.py"));
  EXPECT_TRUE(is_library_frame("deepcopy", "C:\\Users\\me\\miniconda3\\Lib\\copy.py"));
  EXPECT_FALSE(is_library_frame("step", "D:\\rl\\envs\\atari\\lib\\wrappers.py"));  // an RL project's own envs
  EXPECT_FALSE(is_library_frame("forward", "C:\\Users\\me\\code\\envs\\ml\\Lib\\model.py"));
  EXPECT_FALSE(is_library_frame("forward", "d:\\ai\\proj\\unet.py"));
  EXPECT_FALSE(is_library_frame("train", "D:\\work\\lib\\train.py"));           // a project's own lib folder
  EXPECT_FALSE(is_library_frame("train", "/home/me/python3-work/lib/train.py"));  // the Windows rule stays on Windows
  // Interpreters installed by uv (pt29_decomfl's copy.py), pyenv-win, the Microsoft Store, and 32-bit python.org:
  // their Lib\ is the standard library too (an audit: copy.deepcopy of an EMA model was blamed on copy.py:153).
  for (const char* stdlib :
       {"C:\\Users\\me\\AppData\\Roaming\\uv\\python\\cpython-3.12.4-windows-x86_64-none\\Lib\\copy.py",
        "C:\\Users\\me\\.pyenv\\pyenv-win\\versions\\3.11.7\\Lib\\copy.py",
        "C:\\Program Files\\WindowsApps\\PythonSoftwareFoundation.Python.3.12_3.12.2032.0_x64__qbz5n2kfra8p0\\Lib\\copy.py",
        "C:\\Program Files (x86)\\Python312-32\\Lib\\copy.py", "/usr/lib/python3.13t/copy.py",
        "/opt/conda/lib/python3.11/copy.py"})
    EXPECT_TRUE(is_library_frame("deepcopy", stdlib)) << stdlib;
  // A project's own folders that only start like the library's: lib/python_utils.py is the user's.
  EXPECT_FALSE(is_library_frame("load", "/home/me/proj/lib/python_utils.py"));
  EXPECT_FALSE(is_library_frame("load", "/home/me/proj/lib/python/loader.py"));
  // A notebook cell (Colab, IPython before 8) and code typed at a prompt are the user's lines; exec'd and
  // generated code is not.
  EXPECT_FALSE(is_library_frame("train_step", "<ipython-input-5-8d3f0a2c1b7e>"));
  EXPECT_FALSE(is_library_frame("<module>", "<stdin>"));
  EXPECT_TRUE(is_library_frame("__init__", "<string>"));
  EXPECT_TRUE(is_library_frame("_run_module_as_main", "<frozen runpy>"));
}

// A frame's name or file from the snapshot is printed on a terminal by the text answers: control characters are
// written as \xNN, so a crafted name cannot set the window's title or clear the screen.
TEST(Sites, ControlCharactersInFramesArePrintedAsEscapes) {
  Snapshot s;
  s.frames.push_back({s.strings.intern("\x1b]0;PWNED\x07\x1b[2Jred"), s.strings.intern("a\rb.py"), 3});
  const std::string text = FrameFilter::site_text(s, 0);
  for (char c : text) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << text;
  EXPECT_EQ(text, "a\\x0db.py:3:\\x1b]0;PWNED\\x07\\x1b[2Jred");
}

// Backward allocations on the engine's threads have no Python frame: the site names the autograd node.
TEST(Sites, BackwardAllocationsNameTheAutogradNode) {
  EXPECT_GT(check_sites("gpt2_cpp").backward_nodes, 100u);
  EXPECT_EQ(autograd_node("torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)"), "MmBackward0");
  EXPECT_EQ(autograd_node("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor>&&)"), "AccumulateGrad");
  EXPECT_EQ(autograd_node("torch::autograd::generated::MmBackward0_apply_functional(std::vector<at::Tensor>&&)"), "");
  EXPECT_EQ(autograd_node("torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"), "");
}

// The OOM on device 1 of a 4-GPU job recorded with C++ frames: every largest live allocation points at the model.
TEST(Sites, OomListsTheUsersLines) {
  const Loaded* l = load("external/pt28_4dev_expandable_oom");
  ASSERT_TRUE(l);
  const auto reports = analyze_ooms(l->s, l->lifetimes);
  ASSERT_EQ(reports.size(), 1u);
  const std::string text = to_text(l->s, l->lifetimes, reports);
  EXPECT_EQ(text.find("unwind"), std::string::npos) << text;
  EXPECT_NE(text.find("models.py:174:update_nodes"), std::string::npos) << text;
  const std::string json = to_json(l->s, l->lifetimes, reports);
  EXPECT_EQ(json.find("unwind::unwind"), std::string::npos);  // printed stacks drop the unwinder's frames
  EXPECT_NE(json.find("\"site\""), std::string::npos);
}

}  // namespace
}  // namespace allocscope::test

namespace allocscope::test {
namespace {
// One rule for "the user's code": the capture's Python frame lending used is_library_frame alone, so a job's
// `def warm_start()` was its line to the capture but not to any answer (PyTorch's filter drops "_start" names).
TEST(Sites, TheUsersFrameIsOneRuleEverywhere) {
  EXPECT_TRUE(is_user_frame("train_step", "/home/me/train.py"));
  EXPECT_FALSE(is_user_frame("warm_start", "/home/me/train.py"));
  EXPECT_FALSE(is_user_frame("forward", "/v/lib/python3.12/site-packages/torch/nn/modules/linear.py"));
  clitest::SnapshotBuilder b;
  const StackId st = b.stack({{"warm_start", "/home/me/train.py", 3}, {"main", "/home/me/train.py", 9}});
  const FrameFilter ff(b.s);
  for (FrameId f : b.s.stack(st))
    EXPECT_EQ(ff.user(f), is_user_frame(b.s.str(b.s.frames[f].name), b.s.str(b.s.frames[f].filename)));
}
}  // namespace
}  // namespace allocscope::test
