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
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "allocscope/loader.h"
#include "allocscope/owners.h"
#include "allocscope_capture.h"
#include "gpu_check.h"

using namespace allocscope;

namespace gpu_ptsz {
void gpu_scenario_ptsz(Facts& f);  // gpu_ptsz.cpp (per-thread default stream)
}

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

// VMM properties for pinned memory on the current device, and their minimum granularity.
CUmemAllocationProp pinned_on_current_device(size_t* gran) {
  int dev = 0;
  CK(cudaGetDevice(&dev));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  CK(DRV(cuMemGetAllocationGranularity)(gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  return prop;
}

__attribute__((noinline)) void gpu_scenario_vmm(Facts& f) {
  size_t gran = 0;
  const CUmemAllocationProp prop = pinned_on_current_device(&gran);
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

// A handle exported as a file descriptor and imported back (what NCCL does with a peer's buffer, here in one
// process): its mapping must carry the capture's mark, api=cuMemMap(imported); the handle made here must not.
__attribute__((noinline)) void gpu_scenario_vmm_imported(Facts& f) {
  size_t gran = 0;
  CUmemAllocationProp prop = pinned_on_current_device(&gran);
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  const size_t size = gran;
  CUmemGenericAllocationHandle made, imported;
  CK(DRV(cuMemCreate)(&made, size, &prop, 0));
  int fd = -1;
  CK(DRV(cuMemExportToShareableHandle)(&fd, made, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CK(DRV(cuMemImportFromShareableHandle)(&imported, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  CUdeviceptr own = 0, peer = 0;
  CK(DRV(cuMemAddressReserve)(&own, size, 0, 0, 0));
  CK(DRV(cuMemAddressReserve)(&peer, size, 0, 0, 0));
  CK(DRV(cuMemMap)(own, size, 0, made, 0));
  CK(DRV(cuMemMap)(peer, size, 0, imported, 0));
  f["vmm_own_addr"] = own;
  f["vmm_imported_addr"] = peer;
  CK(DRV(cuMemUnmap)(peer, size));
  CK(DRV(cuMemUnmap)(own, size));
  CK(DRV(cuMemAddressFree)(peer, size));
  CK(DRV(cuMemAddressFree)(own, size));
  CK(DRV(cuMemRelease)(imported));
  CK(DRV(cuMemRelease)(made));
  close(fd);
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
  gpu_scenario_vmm_imported(f);
  gpu_scenario_managed(f);
  gpu_scenario_oom(f);
  gpu_ptsz::gpu_scenario_ptsz(f);
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

const Row* find_last(const std::vector<Row>& rs, Action a, uint64_t addr) {
  for (auto it = rs.rbegin(); it != rs.rend(); ++it)
    if (it->action == a && it->addr == addr) return &*it;
  return nullptr;
}

const Row* find_after(const std::vector<Row>& rs, Action a, uint64_t addr, const Row* after) {
  for (const Row* r = after + 1; r < rs.data() + rs.size(); ++r)
    if (r->action == a && r->addr == addr) return r;
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

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

const Setting* capture_setting(const Snapshot& s, const std::string& key) {
  for (const Setting& st : s.allocator_settings)
    if (st.key == "allocscope_capture")
      for (const Setting& c : st.children)
        if (c.key == key) return &c;
  return nullptr;
}

std::string capture_setting_text(const Snapshot& s, const std::string& key) {
  const Setting* c = capture_setting(s, key);
  return c ? c->repr() : std::string();
}

const Segment* segment_at(const Snapshot& s, uint64_t addr) {
  for (const Segment& g : s.segments)
    if (g.address == addr) return &g;
  return nullptr;
}

// Replaying the whole trace forward leaves exactly the `segments` alive (addresses and sizes), which is what lets
// viewers replay backwards from them. Frees of memory allocated before recording began find nothing to remove.
void expect_trace_agrees_with_segments(const Snapshot& s) {
  EXPECT_EQ(capture_setting_text(s, "dropped_events"), "0");
  std::map<uint64_t, uint64_t> live;
  for (size_t i = 0; i < s.events.size_rows(); ++i) {
    const Action a = s.events.action[i];
    if (a == Action::kSegmentAlloc || a == Action::kSegmentMap) live[s.events.addr[i]] = s.events.size[i];
    if (a == Action::kSegmentFree || a == Action::kSegmentUnmap) live.erase(s.events.addr[i]);
  }
  std::map<uint64_t, uint64_t> segs;
  for (const Segment& g : s.segments) segs[g.address] = g.total_size;
  EXPECT_EQ(live, segs);
}

// The per-thread-default-stream calls: their own API names, the per-thread stream (CU_STREAM_PER_THREAD) where
// stream 0 was passed, the pool, sizes, and cuMemPoolTrimTo's annotation with what the pool reserved before/after.
void check_ptsz_and_pool(const Snapshot& s, const std::vector<Row>& rs, const Facts& f) {
  const int64_t per_thread = reinterpret_cast<int64_t>(CU_STREAM_PER_THREAD);
  const int64_t explicit_stream = static_cast<int64_t>(f.at("ptsz_stream"));
  const std::string pool = hex(f.at("pool")), trim_pool = hex(f.at("trim_pool"));
  struct Want { const char* key; uint64_t size; int64_t stream; const char* api; std::string pool; };
  // The pools hand out addresses the earlier scenarios freed: look at the events after this scenario's allocation.
  for (const Want& w : {Want{"ptsz_a", 768u << 10, per_thread, "api=cuMemAllocAsync_ptsz ", ""},
                        Want{"ptsz_b", 640u << 10, explicit_stream, "api=cuMemAllocAsync_ptsz ", ""},
                        Want{"ptsz_c", 1536u << 10, per_thread, "api=cuMemAllocFromPoolAsync_ptsz ", trim_pool},
                        Want{"ptsz_d", 2560u << 10, explicit_stream, "api=cuMemAllocFromPoolAsync_ptsz ", pool}}) {
    const Row* al = find_last(rs, Action::kAlloc, f.at(w.key));
    ASSERT_NE(al, nullptr) << w.key;
    EXPECT_EQ(al->size, w.size) << w.key;
    EXPECT_EQ(al->stream, w.stream) << w.key;
    EXPECT_NE(al->meta.find(w.api), std::string::npos) << w.key << ": " << al->meta;
    if (!w.pool.empty()) {
      EXPECT_NE(al->meta.find("pool=" + w.pool), std::string::npos) << al->meta;
    }
    EXPECT_TRUE(names(al, "gpu_scenario_ptsz")) << describe(al);
    if (std::string(w.key) == "ptsz_d") continue;  // still allocated
    const Row* fr = find_after(rs, Action::kFreeRequested, f.at(w.key), al);
    ASSERT_NE(fr, nullptr) << w.key;
    EXPECT_EQ(fr->stream, w.stream) << w.key;
    EXPECT_NE(fr->meta.find("api=cuMemFreeAsync_ptsz "), std::string::npos) << fr->meta;
    EXPECT_EQ(fr->size, w.size) << w.key;
    const Row* fc = find_after(rs, Action::kFreeCompleted, f.at(w.key), al);
    ASSERT_NE(fc, nullptr) << w.key;
    EXPECT_EQ(fc->stream, w.stream) << w.key;  // completes on the allocation's stream
  }
  const Segment* d = segment_at(s, f.at("ptsz_d"));
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->total_size, 2560u << 10);
  EXPECT_EQ(d->stream, explicit_stream);
  // cuMemPoolTrimTo: an instant annotation with the reservations the runtime also saw, the pool's trim count.
  const std::string trim = "cuMemPoolTrimTo pool=" + trim_pool + " keep=0 reserved=" +
                           std::to_string(f.at("pool_reserved_before_trim")) + "->" +
                           std::to_string(f.at("pool_reserved_after_trim"));
  int starts = 0, ends = 0;
  for (const Annotation& a : s.annotations)
    if (s.str(a.name) == trim) (a.start ? starts : ends)++;
  EXPECT_EQ(starts, 1) << trim;
  EXPECT_EQ(ends, 1) << trim;
  EXPECT_GT(f.at("pool_reserved_before_trim"), f.at("pool_reserved_after_trim"));
  const std::string pools = capture_setting_text(s, "memory_pools");
  EXPECT_NE(pools.find(pool + " device="), std::string::npos) << pools;
  EXPECT_NE(pools.find(trim_pool + " device="), std::string::npos) << pools;
  EXPECT_NE(pools.find("trims=1 reserved_after_last_trim=" + std::to_string(f.at("pool_reserved_after_trim"))),
            std::string::npos)
      << pools;
  std::printf("pool trim: %s\n", trim.c_str());
  EXPECT_EQ(capture_setting_text(s, "pool_trims"), "1");
}

void check_snapshot(const Snapshot& s, const Facts& f) {
  const std::vector<Row> rs = rows(s);
  ASSERT_FALSE(rs.empty());
  check_ptsz_and_pool(s, rs, f);
  expect_trace_agrees_with_segments(s);
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
  // A mapping of an imported handle carries the mark (api=cuMemMap(imported)), and the loader leaves it out as another
  // process's memory, saying so; the mapping of the handle made here stays, unmarked.
  const Row* own = find(rs, Action::kSegmentMap, f.at("vmm_own_addr"));
  ASSERT_NE(own, nullptr);
  EXPECT_EQ(own->meta.rfind("api=cuMemMap ", 0), 0u) << own->meta;
  EXPECT_FALSE(is_imported_mapping(own->meta));
  EXPECT_EQ(find(rs, Action::kSegmentMap, f.at("vmm_imported_addr")), nullptr);
  bool said = false;
  for (const std::string& w : s.warnings) said |= w.rfind("1 mapping(s) of memory another process allocated", 0) == 0;
  EXPECT_TRUE(said);
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
    if (g.address == f.at("ptsz_d")) continue;  // a new pool may reuse address space the default pool released
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
  EXPECT_EQ(s->annotations.size(), 4u);  // the "scenario" range and the pool trim's instant
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

// ---- Capture behaviours inside a job's life (issue #6), each run as a fresh process of this binary. ----

namespace {

// Writes facts to `path`; returns 0.
int finish(const Facts& f, const std::string& path) {
  write_facts(f, path);
  return 0;
}

void start_linked(const std::string& out) {
  allocscope_capture_options o;
  allocscope_capture_default_options(&o);
  o.output_path = out.c_str();
  o.dump_at_exit = 1;
  if (allocscope_capture_start(&o) != 0) {
    std::fprintf(stderr, "start: %s\n", allocscope_capture_last_error());
    std::exit(4);
  }
}

bool file_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

// CUDA initialised, memory allocated and a stream created before the library starts (linked): what came before is
// invisible except a later free of it (its size from cuMemGetAddressRange at API entry); everything after is seen.
__attribute__((noinline)) int job_late_start(const std::string& out, const std::string& facts) {
  Facts f;
  CK(cudaFree(nullptr));
  void *early_keep = nullptr, *early_freed = nullptr, *early_async = nullptr, *late = nullptr;
  cudaStream_t s;
  CK(cudaMalloc(&early_keep, 2u << 20));
  CK(cudaMalloc(&early_freed, (3u << 20) + 5));
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaMallocAsync(&early_async, 1u << 20, s));
  CK(cudaStreamSynchronize(s));
  start_linked(out);
  CK(cudaMalloc(&late, 1u << 20));
  CK(cudaFree(early_freed));
  CK(cudaFreeAsync(early_async, s));
  CK(cudaStreamSynchronize(s));
  f["early_keep"] = reinterpret_cast<uint64_t>(early_keep);
  f["early_freed"] = reinterpret_cast<uint64_t>(early_freed);
  f["early_async"] = reinterpret_cast<uint64_t>(early_async);
  f["early_stream"] = reinterpret_cast<uint64_t>(s);
  f["late"] = reinterpret_cast<uint64_t>(late);
  return finish(f, facts);  // exits with `late` and `early_keep` still allocated
}

// Started before any CUDA call (linked), the job exits with a cudaMalloc, a cudaMallocAsync and a cuMemMap still
// alive: the dump at exit must list them as segments (the driver tears contexts down after our atexit handler).
__attribute__((noinline)) int job_exit_live(const std::string& out, const std::string& facts) {
  start_linked(out);
  Facts f;
  void *m = nullptr, *am = nullptr;
  CK(cudaMalloc(&m, 4u << 20));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaMallocAsync(&am, 1u << 20, s));
  CK(cudaStreamSynchronize(s));
  size_t gran = 0;
  const CUmemAllocationProp prop = pinned_on_current_device(&gran);
  CUmemGenericAllocationHandle h;
  CK(DRV(cuMemCreate)(&h, gran, &prop, 0));
  CUdeviceptr ptr = 0;
  CK(DRV(cuMemAddressReserve)(&ptr, gran, 0, 0, 0));
  CK(DRV(cuMemMap)(ptr, gran, 0, h, 0));
  f["live_malloc"] = reinterpret_cast<uint64_t>(m);
  f["live_async"] = reinterpret_cast<uint64_t>(am);
  f["live_map"] = ptr;
  f["live_map_size"] = gran;
  return finish(f, facts);
}

// A job that forks: one child tries CUDA (which does not work in a child forked after initialisation) and exits
// through exit(), another just exits; the parent's output must not exist before the parent exits, and the parent
// goes on recording. `out` empty: injected (allocscope record), else linked.
__attribute__((noinline)) int job_fork(const std::string& out, const std::string& facts, bool linked) {
  if (linked) start_linked(out);
  Facts f;
  void* keep = nullptr;
  CK(cudaMalloc(&keep, 1u << 20));
  f["keep"] = reinterpret_cast<uint64_t>(keep);
  std::fflush(nullptr);
  pid_t c = fork();
  if (c == 0) {
    alarm(60);
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, 1u << 20);
    if (linked && allocscope_capture_active()) std::exit(100);
    if (linked && allocscope_capture_dump(out.c_str()) != -1) std::exit(101);
    std::exit(e == cudaSuccess ? 0 : 10 + (int(e) % 80));  // exit(): atexit handlers run in the child
  }
  int st = 0;
  waitpid(c, &st, 0);
  f["child_exited"] = WIFEXITED(st);
  f["child_status"] = WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
  f["out_after_child"] = file_exists(out);
  std::fflush(nullptr);
  c = fork();
  if (c == 0) std::exit(0);
  waitpid(c, &st, 0);
  f["out_after_child2"] = file_exists(out);
  void* after = nullptr;
  CK(cudaMalloc(&after, 2u << 20));  // the parent still records after its children
  f["after"] = reinterpret_cast<uint64_t>(after);
  return finish(f, facts);
}

// Runs this binary as a job (`mode`), through `allocscope record` when `injected`; returns the facts it wrote.
Facts run_job(const std::string& mode, const std::string& out, bool injected) {
  const std::string facts = tmp_path(mode + ".facts");
  std::string cmd = "timeout 120 ";
  if (injected) {
    const char* cli_env = std::getenv("ALLOCSCOPE_CLI_PATH");
#ifdef ALLOCSCOPE_CLI
    const std::string cli = cli_env ? cli_env : ALLOCSCOPE_CLI;
#else
    const std::string cli = cli_env ? cli_env : "allocscope";
#endif
    cmd += cli + " record -o " + out + " -- ";
  }
  cmd += g_self + " --job=" + mode + " --out=" + out + " --facts=" + facts;
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  Facts f = read_facts(facts);
  std::remove(facts.c_str());
  return f;
}

void keep_or_remove(const std::string& path, const std::string& name) {
  if (const char* keep = std::getenv("ALLOCSCOPE_GPU_TEST_KEEP")) {
    std::rename(path.c_str(), (std::string(keep) + "/" + name).c_str());
  } else {
    std::remove(path.c_str());
  }
}

bool any_meta(const Snapshot& s, const std::string& needle) {
  for (size_t i = 0; i < s.events.size_rows(); ++i)
    if (std::string(s.str(s.events.user_metadata[i])).find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(CaptureGpuJob, CudaInitialisedBeforeStart) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const std::string out = tmp_path("late_start.pickle");
  const Facts f = run_job("late-start", out, false);
  ASSERT_FALSE(f.empty());
  auto s = load_snapshot_file(out);
  ASSERT_TRUE(s.ok()) << s.error().describe();
  const std::vector<Row> rs = rows(*s);
  // Before start: no event and no segment for what was allocated then and never freed.
  for (const Row& r : rs) EXPECT_NE(r.addr, f.at("early_keep")) << describe(&r);
  EXPECT_EQ(segment_at(*s, f.at("early_keep")), nullptr);
  // A free of memory allocated before start: free_completed + segment_free with the driver's size of the range.
  const Row* fc = find(rs, Action::kFreeCompleted, f.at("early_freed"));
  ASSERT_NE(fc, nullptr);
  EXPECT_GE(fc->size, (3u << 20) + 5);
  EXPECT_NE(find(rs, Action::kSegmentFree, f.at("early_freed")), nullptr);
  EXPECT_EQ(find(rs, Action::kAlloc, f.at("early_freed")), nullptr);
  const Row* fa = find(rs, Action::kFreeRequested, f.at("early_async"));
  ASSERT_NE(fa, nullptr);
  EXPECT_GE(fa->size, 1u << 20);
  EXPECT_EQ(fa->stream, static_cast<int64_t>(f.at("early_stream")));
  std::printf("late start: free of a pre-start cudaMalloc(3 MiB + 5) recorded with size %llu, of a pre-start "
              "cudaMallocAsync(1 MiB) with size %llu\n",
              static_cast<unsigned long long>(fc->size), static_cast<unsigned long long>(fa->size));
  // After start: seen, and alive at exit.
  const Segment* late = segment_at(*s, f.at("late"));
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->total_size, 1u << 20);
  // Streams created before start are not listed (their creation was not seen).
  EXPECT_EQ(capture_setting_text(*s, "streams").find(hex(f.at("early_stream"))), std::string::npos);
  expect_trace_agrees_with_segments(*s);
  keep_or_remove(out, "late_start.pickle");
}

TEST(CaptureGpuJob, ExitWithLiveAllocationsListsThemAsSegments) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const std::string out = tmp_path("exit_live.pickle");
  const Facts f = run_job("exit-live", out, false);
  ASSERT_FALSE(f.empty());
  auto s = load_snapshot_file(out);
  ASSERT_TRUE(s.ok()) << s.error().describe();
  EXPECT_FALSE(any_meta(*s, "api=context_destroy")) << "the context was torn down before the dump at exit";
  const Segment* m = segment_at(*s, f.at("live_malloc"));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->total_size, 4u << 20);
  const Segment* a = segment_at(*s, f.at("live_async"));
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->total_size, 1u << 20);
  const Segment* v = segment_at(*s, f.at("live_map"));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->total_size, f.at("live_map_size"));
  EXPECT_TRUE(v->is_expandable);
  EXPECT_NE(capture_setting_text(*s, "va_reservations").find(hex(f.at("live_map"))), std::string::npos);
  expect_trace_agrees_with_segments(*s);
  keep_or_remove(out, "exit_live.pickle");
}

void check_fork(const std::string& out, const Facts& f) {
  ASSERT_FALSE(f.empty());
  std::printf("fork: the child's cudaMalloc -> exit status %llu (10 + cudaError_t; 0 = it worked)\n",
              static_cast<unsigned long long>(f.at("child_status")));
  EXPECT_EQ(f.at("child_exited"), 1u) << "child status " << f.at("child_status") << " (1000+signal: hung or killed)";
  EXPECT_LT(f.at("child_status"), 100u) << "the child saw the parent's recording";
  EXPECT_EQ(f.at("out_after_child"), 0u) << "a child wrote the parent's output";
  EXPECT_EQ(f.at("out_after_child2"), 0u) << "a child wrote the parent's output";
  auto s = load_snapshot_file(out);
  ASSERT_TRUE(s.ok()) << s.error().describe();
  ASSERT_NE(segment_at(*s, f.at("keep")), nullptr);
  const Segment* after = segment_at(*s, f.at("after"));
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(after->total_size, 2u << 20);
  expect_trace_agrees_with_segments(*s);
}

TEST(CaptureGpuJob, ForkLinked) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const std::string out = tmp_path("fork_linked.pickle");
  check_fork(out, run_job("fork-linked", out, false));
  keep_or_remove(out, "fork_linked.pickle");
}

TEST(CaptureGpuJob, ForkInjected) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const std::string out = tmp_path("fork_injected.pickle");
  check_fork(out, run_job("fork-injected", out, true));
  keep_or_remove(out, "fork_injected.pickle");
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
  std::string job, out, facts;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--job=", 6) == 0) job = argv[i] + 6;
    if (std::strncmp(argv[i], "--out=", 6) == 0) out = argv[i] + 6;
    if (std::strncmp(argv[i], "--facts=", 8) == 0) facts = argv[i] + 8;
  }
  if (job == "late-start") return job_late_start(out, facts);
  if (job == "exit-live") return job_exit_live(out, facts);
  if (job == "fork-linked") return job_fork(out, facts, true);
  if (job == "fork-injected") return job_fork(out, facts, false);
  if (!job.empty()) return 2;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
