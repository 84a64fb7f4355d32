// On a real GPU (skipped without one): cudaMalloc/cudaFree, cudaMallocAsync/cudaFreeAsync on two streams,
// cuMemCreate+cuMemMap, managed memory and a forced OOM, recorded both with the library linked (start/dump) and
// injected through `allocscope record`; every event, size, stream and the OOM must be in the snapshot, and the
// stacks must name this file's functions.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "allocscope/loader.h"
#include "allocscope_capture.h"

using namespace allocscope;

namespace {

std::string g_self;  // this binary, for the injected run

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TMPDIR");
  return std::string(d && *d ? d : "/tmp") + "/allocscope_gpu_" + std::to_string(getpid()) + "_" + name;
}

// What the scenario did, for the checks: name -> value.
using Facts = std::map<std::string, uint64_t>;

#define CK(x)                                                                              \
  do {                                                                                     \
    auto _e = (x);                                                                         \
    if (_e != 0) {                                                                         \
      std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #x, int(_e));     \
      std::exit(3);                                                                        \
    }                                                                                      \
  } while (0)

__attribute__((noinline)) void gpu_scenario_malloc_free(Facts& f) {
  void* p = nullptr;
  CK(cudaMalloc(&p, (3u << 20) + 123));
  f["malloc_addr"] = reinterpret_cast<uint64_t>(p);
  CK(cudaFree(p));
  void* keep = nullptr;
  CK(cudaMalloc(&keep, 5u << 20));  // still alive at dump: must be in `segments`
  f["keep_addr"] = reinterpret_cast<uint64_t>(keep);
  asm volatile("");
}

__attribute__((noinline)) void gpu_scenario_async_two_streams(Facts& f) {
  cudaStream_t s1, s2;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  void *a = nullptr, *b = nullptr;
  CK(cudaMallocAsync(&a, 1u << 20, s1));
  CK(cudaMallocAsync(&b, 2u << 20, s2));
  f["async_a"] = reinterpret_cast<uint64_t>(a);
  f["async_b"] = reinterpret_cast<uint64_t>(b);
  f["stream1"] = reinterpret_cast<uint64_t>(s1);
  f["stream2"] = reinterpret_cast<uint64_t>(s2);
  CK(cudaFreeAsync(a, s1));
  CK(cudaFreeAsync(b, s2));
  CK(cudaStreamSynchronize(s1));
  CK(cudaStreamSynchronize(s2));
  asm volatile("");
}

// Driver entry points through dlsym: the binary must load (and skip) on machines without a driver.
template <typename F>
F driver_fn(const char* name) {
  static void* h = dlopen("libcuda.so.1", RTLD_LAZY);
  void* p = h ? dlsym(h, name) : nullptr;
  if (!p) {
    std::fprintf(stderr, "driver function %s not found\n", name);
    std::exit(3);
  }
  return reinterpret_cast<F>(p);
}
#define DRV(fn) driver_fn<decltype(&fn)>(#fn)

__attribute__((noinline)) void gpu_scenario_vmm(Facts& f) {
  int dev = 0;
  CK(cudaGetDevice(&dev));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  CK(DRV(cuMemGetAllocationGranularity)(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const size_t size = gran * 2;
  CUmemGenericAllocationHandle h;
  CK(DRV(cuMemCreate)(&h, size, &prop, 0));
  CUdeviceptr ptr = 0;
  CK(DRV(cuMemAddressReserve)(&ptr, size, 0, 0, 0));
  CK(DRV(cuMemMap)(ptr, size, 0, h, 0));
  CUmemAccessDesc acc = {};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(DRV(cuMemSetAccess)(ptr, size, &acc, 1));
  f["vmm_addr"] = ptr;
  f["vmm_size"] = size;
  CK(DRV(cuMemUnmap)(ptr, size));
  CK(DRV(cuMemAddressFree)(ptr, size));
  CK(DRV(cuMemRelease)(h));
  asm volatile("");
}

__attribute__((noinline)) void gpu_scenario_managed(Facts& f) {
  void* m = nullptr;
  CK(cudaMallocManaged(&m, 1u << 20));
  f["managed_addr"] = reinterpret_cast<uint64_t>(m);
  CK(cudaFree(m));
  asm volatile("");
}

__attribute__((noinline)) void gpu_scenario_oom(Facts& f) {
  void* p = nullptr;
  const size_t huge = size_t(1) << 50;  // 1 PiB: no GPU has it
  const cudaError_t e = cudaMalloc(&p, huge);
  f["oom_error"] = e == cudaErrorMemoryAllocation;
  f["oom_size"] = huge;
  cudaGetLastError();  // clear the sticky-free error state of the runtime
  asm volatile("");
}

Facts run_scenario() {
  Facts f;
  CK(cudaFree(nullptr));  // make the context before timing-insensitive work
  gpu_scenario_malloc_free(f);
  gpu_scenario_async_two_streams(f);
  gpu_scenario_vmm(f);
  gpu_scenario_managed(f);
  gpu_scenario_oom(f);
  return f;
}

void write_facts(const Facts& f, const std::string& path) {
  std::ofstream out(path);
  for (const auto& [k, v] : f) out << k << " " << v << "\n";
}

[[maybe_unused]] Facts read_facts(const std::string& path) {
  Facts f;
  std::ifstream in(path);
  std::string k;
  uint64_t v;
  while (in >> k >> v) f[k] = v;
  return f;
}

struct Row {
  Action action;
  uint64_t addr, size;
  int64_t stream;
  std::vector<std::string> frames;
  std::string meta;
};

std::vector<Row> rows(const Snapshot& s) {
  std::vector<Row> out;
  for (size_t i = 0; i < s.events.size_rows(); ++i) {
    Row r{s.events.action[i], s.events.addr[i], s.events.size[i], s.events.stream[i], {},
          std::string(s.str(s.events.user_metadata[i]))};
    for (FrameId fr : s.stack(s.events.stack[i])) r.frames.emplace_back(s.str(s.frames[fr].name));
    out.push_back(std::move(r));
  }
  return out;
}

const Row* find(const std::vector<Row>& rs, Action a, uint64_t addr) {
  for (const Row& r : rs)
    if (r.action == a && r.addr == addr) return &r;
  return nullptr;
}

bool names(const Row* r, const std::string& fn) {
  if (!r) return false;
  for (const std::string& s : r->frames)
    if (s.find(fn) != std::string::npos) return true;
  return false;
}

std::string describe(const Row* r) {
  if (!r) return "(no event)";
  std::string s = std::string(action_name(r->action)) + " size=" + std::to_string(r->size) + " " + r->meta + " frames:";
  for (const std::string& f : r->frames) s += " | " + f;
  return s;
}

void check_snapshot(const Snapshot& s, const Facts& f) {
  const std::vector<Row> rs = rows(s);
  ASSERT_FALSE(rs.empty());
  // cudaMalloc / cudaFree
  const Row* a = find(rs, Action::kAlloc, f.at("malloc_addr"));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->size, (3u << 20) + 123);
  EXPECT_NE(find(rs, Action::kSegmentAlloc, f.at("malloc_addr")), nullptr);
  const Row* fc = find(rs, Action::kFreeCompleted, f.at("malloc_addr"));
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->size, (3u << 20) + 123);
  EXPECT_NE(find(rs, Action::kSegmentFree, f.at("malloc_addr")), nullptr);
  EXPECT_TRUE(names(a, "gpu_scenario_malloc_free")) << describe(a);
  EXPECT_TRUE(names(fc, "gpu_scenario_malloc_free")) << describe(fc);
  EXPECT_NE(a->meta.find("api=cuMemAlloc"), std::string::npos) << a->meta;
  // cudaMallocAsync / cudaFreeAsync on two streams
  for (const char* which : {"async_a", "async_b"}) {
    const bool first = which[6] == 'a';
    const int64_t stream = static_cast<int64_t>(f.at(first ? "stream1" : "stream2"));
    const Row* al = find(rs, Action::kAlloc, f.at(which));
    ASSERT_NE(al, nullptr) << which;
    EXPECT_EQ(al->size, first ? 1u << 20 : 2u << 20);
    EXPECT_EQ(al->stream, stream);
    EXPECT_TRUE(names(al, "gpu_scenario_async_two_streams")) << describe(al);
    const Row* fr = find(rs, Action::kFreeRequested, f.at(which));
    ASSERT_NE(fr, nullptr) << which;
    EXPECT_EQ(fr->stream, stream);
    EXPECT_NE(find(rs, Action::kFreeCompleted, f.at(which)), nullptr);
  }
  // cuMemCreate + cuMemMap
  const Row* map = find(rs, Action::kSegmentMap, f.at("vmm_addr"));
  ASSERT_NE(map, nullptr);
  EXPECT_EQ(map->size, f.at("vmm_size"));
  EXPECT_TRUE(names(map, "gpu_scenario_vmm")) << describe(map);
  const Row* unmap = find(rs, Action::kSegmentUnmap, f.at("vmm_addr"));
  ASSERT_NE(unmap, nullptr);
  EXPECT_EQ(unmap->size, f.at("vmm_size"));
  // Managed memory
  const Row* man = find(rs, Action::kAlloc, f.at("managed_addr"));
  ASSERT_NE(man, nullptr);
  EXPECT_EQ(man->size, 1u << 20);
  EXPECT_NE(man->meta.find("cuMemAllocManaged"), std::string::npos);
  EXPECT_NE(find(rs, Action::kSegmentFree, f.at("managed_addr")), nullptr);
  // OOM: size asked and device_free
  EXPECT_EQ(f.at("oom_error"), 1u);
  const Row* oom = nullptr;
  for (const Row& r : rs)
    if (r.action == Action::kOom) oom = &r;
  ASSERT_NE(oom, nullptr);
  EXPECT_EQ(oom->size, f.at("oom_size"));
  EXPECT_GT(oom->addr, 0u);  // device_free
  EXPECT_TRUE(names(oom, "gpu_scenario_oom")) << describe(oom);
  // The live 5 MiB allocation is a segment, nothing freed is.
  bool keep = false;
  for (const Segment& g : s.segments) {
    if (g.address == f.at("keep_addr")) {
      keep = g.total_size == (5u << 20);
      continue;  // the driver may hand the freed 3 MiB range out again for this one
    }
    EXPECT_NE(g.address, f.at("malloc_addr"));
    EXPECT_NE(g.address, f.at("async_a"));
    EXPECT_NE(g.address, f.at("managed_addr"));
  }
  EXPECT_TRUE(keep);
  // Live driver objects: both streams (created, never destroyed) in allocator_settings; the VMM reservation and the
  // physical handle were released, so they are not.
  const Setting* cap = nullptr;
  for (const Setting& st : s.allocator_settings)
    if (st.key == "allocscope_capture") cap = &st;
  ASSERT_NE(cap, nullptr);
  std::string streams, reservations;
  for (const Setting& c : cap->children) {
    if (c.key == "streams") streams = c.repr();
    if (c.key == "va_reservations") reservations = c.repr();
  }
  char hex[2][32];
  std::snprintf(hex[0], sizeof hex[0], "0x%llx", static_cast<unsigned long long>(f.at("stream1")));
  std::snprintf(hex[1], sizeof hex[1], "0x%llx", static_cast<unsigned long long>(f.at("stream2")));
  EXPECT_NE(streams.find(hex[0]), std::string::npos) << streams;
  EXPECT_NE(streams.find(hex[1]), std::string::npos) << streams;
  char vmm[32];
  std::snprintf(vmm, sizeof vmm, "0x%llx", static_cast<unsigned long long>(f.at("vmm_addr")));
  EXPECT_EQ(reservations.find(vmm), std::string::npos) << reservations;
}

}  // namespace

TEST(CaptureGpu, LinkedStartDumpStop) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const std::string out = tmp_path("linked.pickle.gz");
  const std::string oom_out = tmp_path("linked_oom.pickle");
  allocscope_capture_options o;
  allocscope_capture_default_options(&o);
  o.output_path = oom_out.c_str();
  o.dump_on_oom = 1;
  o.dump_at_exit = 0;
  ASSERT_EQ(allocscope_capture_start(&o), 0) << allocscope_capture_last_error();
  allocscope_capture_push("scenario");
  const Facts f = run_scenario();
  allocscope_capture_pop();
  ASSERT_EQ(allocscope_capture_dump(out.c_str()), 0) << allocscope_capture_last_error();
  ASSERT_EQ(allocscope_capture_stop(), 0);
  auto s = load_snapshot_file(out);
  ASSERT_TRUE(s.ok()) << s.error().describe();
  check_snapshot(*s, f);
  EXPECT_EQ(s->annotations.size(), 2u);
  // dump_on_oom wrote a snapshot at the OOM, whose last event is the oom.
  auto at_oom = load_snapshot_file(oom_out);
  ASSERT_TRUE(at_oom.ok()) << at_oom.error().describe();
  ASSERT_GT(at_oom->events.size_rows(), 0u);
  EXPECT_EQ(at_oom->events.action[at_oom->events.size_rows() - 1], Action::kOom);
  if (const char* keep = std::getenv("ALLOCSCOPE_GPU_TEST_KEEP")) {
    std::rename(out.c_str(), (std::string(keep) + "/linked.pickle.gz").c_str());
  } else {
    std::remove(out.c_str());
  }
  std::remove(oom_out.c_str());
}

TEST(CaptureGpu, InjectedThroughRecord) {
#ifndef ALLOCSCOPE_CLI
  GTEST_SKIP() << "built without the allocscope CLI path";
#else
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const std::string out = tmp_path("injected.pickle");
  const std::string facts = tmp_path("injected.facts");
  const std::string cli = std::getenv("ALLOCSCOPE_CLI_PATH") ? std::getenv("ALLOCSCOPE_CLI_PATH") : ALLOCSCOPE_CLI;
  const std::string cmd = cli + " record -o " + out + " --no-dump-on-oom -- " + g_self + " --child=" + facts;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto s = load_snapshot_file(out);
  ASSERT_TRUE(s.ok()) << s.error().describe();
  check_snapshot(*s, read_facts(facts));
  if (const char* keep = std::getenv("ALLOCSCOPE_GPU_TEST_KEEP")) {
    std::rename(out.c_str(), (std::string(keep) + "/injected.pickle").c_str());
  } else {
    std::remove(out.c_str());
  }
  std::remove(facts.c_str());
#endif
}

void CUPTIAPI noop_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// Nsight Systems, a profiler or another tool holding CUPTI: we say so and record nothing; the job runs on untouched.
TEST(CaptureGpu, AnotherSubscriberIsReportedAndLeftAlone) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  if (allocscope_capture_active()) allocscope_capture_stop();
  CUpti_SubscriberHandle other;
  ASSERT_EQ(cuptiSubscribe(&other, noop_callback, nullptr), CUPTI_SUCCESS);
  allocscope_capture_options o;
  allocscope_capture_default_options(&o);
  o.dump_at_exit = 0;
  EXPECT_EQ(allocscope_capture_start(&o), -1);
  EXPECT_NE(std::string(allocscope_capture_last_error()).find("another CUPTI subscriber"), std::string::npos)
      << allocscope_capture_last_error();
  EXPECT_EQ(allocscope_capture_active(), 0);
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);  // the job is unaffected
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  cuptiUnsubscribe(other);
}

int main(int argc, char** argv) {
  g_self = argv[0];
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) g_self.assign(buf, static_cast<size_t>(n));
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--child=", 8) == 0) {  // the job run under `allocscope record`
      write_facts(run_scenario(), argv[i] + 8);
      return 0;
    }
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
