// The injection front-end: the driver loads this library (CUDA_INJECTION64_PATH) and calls InitializeInjection; CUPTI
// driver-API callbacks, read at API exit where results and out-pointers are valid, become recorder hooks.
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <generated_nvtx_meta.h>

#include <atomic>
#include <initializer_list>
#include <cstdio>
#include <cstdlib>

#include "session.h"
#include "unwind.h"

namespace allocscope::capture {
namespace {

CUpti_SubscriberHandle g_subscriber = nullptr;

// The few driver calls we make ourselves, resolved at subscribe time: linking libcuda would stop the library (and
// programs linked to it) from even loading on machines without a driver, where they should just report "no GPU".
struct Driver {
  decltype(&cuCtxGetDevice) ctx_get_device = nullptr;
  decltype(&cuMemGetInfo_v2) mem_get_info = nullptr;
  decltype(&cuMemGetAddressRange_v2) mem_get_address_range = nullptr;
  decltype(&cuMemPoolGetAttribute) mem_pool_get_attribute = nullptr;  // optional: trims say "?" without it
};
Driver g_driver;

bool load_driver() {
  if (g_driver.ctx_get_device) return true;
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!h) h = dlopen("libcuda.so.1", RTLD_LAZY);
  if (!h) return false;
  g_driver.mem_get_info = reinterpret_cast<decltype(&cuMemGetInfo_v2)>(dlsym(h, "cuMemGetInfo_v2"));
  g_driver.mem_get_address_range =
      reinterpret_cast<decltype(&cuMemGetAddressRange_v2)>(dlsym(h, "cuMemGetAddressRange_v2"));
  g_driver.ctx_get_device = reinterpret_cast<decltype(&cuCtxGetDevice)>(dlsym(h, "cuCtxGetDevice"));
  g_driver.mem_pool_get_attribute =
      reinterpret_cast<decltype(&cuMemPoolGetAttribute)>(dlsym(h, "cuMemPoolGetAttribute"));
  return g_driver.ctx_get_device && g_driver.mem_get_info && g_driver.mem_get_address_range;
}
thread_local int t_depth = 0;  // recursion guard: our own driver calls (cuMemGetInfo, ...) are never recorded
// Whether memory may exist that was allocated before we subscribed. Not when injected: InitializeInjection runs
// inside cuInit, before any allocation, so every free finds its allocation and the API-entry lookup can be skipped.
std::atomic<bool> g_may_have_untracked{true};

struct DepthGuard {
  DepthGuard() { ++t_depth; }
  ~DepthGuard() { --t_depth; }
};

int16_t current_device_uncached() {
  CUdevice dev = 0;
  if (!g_driver.ctx_get_device || g_driver.ctx_get_device(&dev) != CUDA_SUCCESS) return 0;
  return static_cast<int16_t>(dev);
}

// Device of the context current in a callback, cached per thread (contexts rarely change on a thread).
int16_t device_of(CUcontext ctx) {
  thread_local CUcontext t_ctx = nullptr;
  thread_local int16_t t_dev = 0;
  if (ctx && ctx == t_ctx) return t_dev;
  t_dev = current_device_uncached();
  t_ctx = ctx;
  return t_dev;
}

bool is_alloc(CUpti_CallbackId id) {
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate:
      return true;
    default:
      return false;
  }
}

// A _ptsz call's stream 0 is the calling thread's default stream, not the legacy one: record it as
// CU_STREAM_PER_THREAD (what cudaStreamPerThread is), so the two are told apart.
CUstream ptsz_stream(CUstream s) { return s ? s : CU_STREAM_PER_THREAD; }

// Bytes a pool reserves now (kUnknownBytes when the driver does not say).
uint64_t pool_reserved(CUmemoryPool pool) {
  cuuint64_t v = 0;
  if (!g_driver.mem_pool_get_attribute ||
      g_driver.mem_pool_get_attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
    return kUnknownBytes;
  return v;
}

// Requested bytes, stream, pool and API of an allocation call.
struct AllocCall {
  CUdeviceptr* dptr = nullptr;
  uint64_t size = 0;
  CUstream stream = nullptr;
  uint64_t pool = 0;
  Api api = Api::kUser;
  SegmentKind kind = SegmentKind::kPlain;
};

AllocCall alloc_call(CUpti_CallbackId id, const void* p) {
  AllocCall c;
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      auto* a = static_cast<const cuMemAlloc_v2_params*>(p);
      c = {a->dptr, a->bytesize, nullptr, 0, Api::kMemAlloc, SegmentKind::kPlain};
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      auto* a = static_cast<const cuMemAllocPitch_v2_params*>(p);
      c = {a->dptr, a->WidthInBytes * a->Height, nullptr, 0, Api::kMemAllocPitch, SegmentKind::kPlain};
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      auto* a = static_cast<const cuMemAllocManaged_params*>(p);
      c = {a->dptr, a->bytesize, nullptr, 0, Api::kMemAllocManaged, SegmentKind::kManaged};
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync: {
      auto* a = static_cast<const cuMemAllocAsync_params*>(p);
      c = {a->dptr, a->bytesize, a->hStream, 0, Api::kMemAllocAsync, SegmentKind::kAsync};
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      auto* a = static_cast<const cuMemAllocAsync_ptsz_params*>(p);
      c = {a->dptr, a->bytesize, ptsz_stream(a->hStream), 0, Api::kMemAllocAsyncPtsz, SegmentKind::kAsync};
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync: {
      auto* a = static_cast<const cuMemAllocFromPoolAsync_params*>(p);
      c = {a->dptr, a->bytesize, a->hStream, reinterpret_cast<uint64_t>(a->pool), Api::kMemAllocFromPoolAsync,
           SegmentKind::kAsync};
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      auto* a = static_cast<const cuMemAllocFromPoolAsync_ptsz_params*>(p);
      c = {a->dptr, a->bytesize, ptsz_stream(a->hStream), reinterpret_cast<uint64_t>(a->pool),
           Api::kMemAllocFromPoolAsyncPtsz, SegmentKind::kAsync};
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      auto* a = static_cast<const cuMemCreate_params*>(p);
      c = {nullptr, a->size, nullptr, 0, Api::kMemCreate, SegmentKind::kMapped};
      break;
    }
    default:
      break;
  }
  return c;
}

// The size looked up at API entry for a free of memory we never saw allocated (0 when no lookup was made).
uint64_t size_hint(const CUpti_CallbackData* cb) {
  return g_may_have_untracked.load(std::memory_order_relaxed) && cb->correlationData ? *cb->correlationData : 0;
}

void on_driver(Recorder* r, CUpti_CallbackId id, const CUpti_CallbackData* cb) {
  const bool free_call = id == CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2 || id == CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync ||
                         id == CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    // What a trimmed pool reserved before the trim (a rare call: one driver query).
    if (id == CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo && cb->correlationData)
      *cb->correlationData = pool_reserved(static_cast<const cuMemPoolTrimTo_params*>(cb->functionParams)->pool);
    // A free of memory allocated before recording began: its size is only knowable before the call.
    if (free_call && cb->correlationData && g_may_have_untracked.load(std::memory_order_relaxed)) {
      const CUdeviceptr p = id == CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2
                                ? static_cast<const cuMemFree_v2_params*>(cb->functionParams)->dptr
                                : static_cast<const cuMemFreeAsync_params*>(cb->functionParams)->dptr;
      *cb->correlationData = 0;
      if (p && !r->is_live(p)) {
        CUdeviceptr base = 0;
        size_t size = 0;
        if (g_driver.mem_get_address_range(&base, &size, p) == CUDA_SUCCESS) *cb->correlationData = size;
      }
    }
    return;
  }
  const CUresult rc = cb->functionReturnValue ? *static_cast<const CUresult*>(cb->functionReturnValue) : CUDA_SUCCESS;
  Site site;
  site.context = cb->contextUid;
  site.device = device_of(cb->context);
  if (rc == CUDA_ERROR_OUT_OF_MEMORY && is_alloc(id)) {
    const AllocCall c = alloc_call(id, cb->functionParams);
    site.api = c.api;
    site.stream = reinterpret_cast<int64_t>(c.stream);
    site.pool = c.pool;
    size_t free_b = 0, total_b = 0;
    g_driver.mem_get_info(&free_b, &total_b);  // the rare path only
    r->on_oom(site, c.size, free_b, 0);
    Session::get().after_oom();
    return;
  }
  if (rc != CUDA_SUCCESS) return;
  if (id == CUPTI_DRIVER_TRACE_CBID_cuMemCreate) {  // a physical handle is not addressable until cuMemMap
    const auto* a = static_cast<const cuMemCreate_params*>(cb->functionParams);
    if (a->handle) r->note_created({HandleKind::kPhysical, *a->handle, a->size, site.context, site.device, now_us()});
    return;
  }
  if (is_alloc(id)) {
    const AllocCall c = alloc_call(id, cb->functionParams);
    if (!c.dptr) return;
    site.api = c.api;
    site.stream = reinterpret_cast<int64_t>(c.stream);
    site.pool = c.pool;
    uint64_t size = c.size;
    if (id == CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2) {
      auto* a = static_cast<const cuMemAllocPitch_v2_params*>(cb->functionParams);
      if (a->pPitch) size = *a->pPitch * a->Height;
    }
    r->on_alloc(site, *c.dptr, size, c.kind, 0);
    return;
  }
  switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2: {
      site.api = Api::kMemFree;
      const auto* a = static_cast<const cuMemFree_v2_params*>(cb->functionParams);
      if (a->dptr) r->on_free(site, a->dptr, size_hint(cb), false, 0);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync: {
      site.api = Api::kMemFreeAsync;
      const auto* a = static_cast<const cuMemFreeAsync_params*>(cb->functionParams);
      site.stream = reinterpret_cast<int64_t>(a->hStream);
      if (a->dptr) r->on_free(site, a->dptr, size_hint(cb), true, 0);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
      site.api = Api::kMemFreeAsyncPtsz;
      const auto* a = static_cast<const cuMemFreeAsync_ptsz_params*>(cb->functionParams);
      site.stream = reinterpret_cast<int64_t>(ptsz_stream(a->hStream));
      if (a->dptr) r->on_free(site, a->dptr, size_hint(cb), true, 0);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo: {
      site.api = Api::kMemPoolTrimTo;
      const auto* a = static_cast<const cuMemPoolTrimTo_params*>(cb->functionParams);
      const uint64_t before = cb->correlationData ? *cb->correlationData : kUnknownBytes;
      r->on_pool_trim(site, reinterpret_cast<uint64_t>(a->pool), a->minBytesToKeep, before, pool_reserved(a->pool));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease: {
      const CUmemGenericAllocationHandle h = static_cast<const cuMemRelease_params*>(cb->functionParams)->handle;
      r->note_destroyed(HandleKind::kPhysical, h);
      r->note_destroyed(HandleKind::kImported, h);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle: {
      const auto* a = static_cast<const cuMemImportFromShareableHandle_params*>(cb->functionParams);
      if (a->handle) r->note_created({HandleKind::kImported, *a->handle, 0, site.context, site.device, now_us()});
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
      const auto* a = static_cast<const cuMemAddressReserve_params*>(cb->functionParams);
      if (a->ptr) r->note_created({HandleKind::kReservation, *a->ptr, a->size, site.context, site.device, now_us()});
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree:
      r->note_destroyed(HandleKind::kReservation, static_cast<const cuMemAddressFree_params*>(cb->functionParams)->ptr);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolCreate: {
      const auto* a = static_cast<const cuMemPoolCreate_params*>(cb->functionParams);
      if (a->pool)
        r->note_created({HandleKind::kPool, reinterpret_cast<uint64_t>(*a->pool), 0, site.context, site.device, now_us()});
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemPoolDestroy:
      r->note_destroyed(HandleKind::kPool,
                        reinterpret_cast<uint64_t>(static_cast<const cuMemPoolDestroy_params*>(cb->functionParams)->pool));
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      const auto* a = static_cast<const cuMemMap_params*>(cb->functionParams);
      site.api = r->imported(a->handle) ? Api::kMemMapImported : Api::kMemMap;
      r->on_map(site, a->ptr, a->size, 0);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      site.api = Api::kMemUnmap;
      const auto* a = static_cast<const cuMemUnmap_params*>(cb->functionParams);
      r->on_unmap(site, a->ptr, a->size, 0);
      break;
    }
    default:
      break;
  }
}

const char* nvtx_message(const nvtxEventAttributes_t* a) {
  if (!a) return nullptr;
  if (a->messageType == NVTX_MESSAGE_TYPE_ASCII) return a->message.ascii;
  return nullptr;
}

void on_nvtx(Recorder* r, CUpti_CallbackId id, const CUpti_NvtxData* d) {
  const int16_t dev = 0;  // NVTX ranges are host-side; PyTorch's external_annotations name device 0 likewise
  switch (id) {
    case CUPTI_CBID_NVTX_nvtxRangePushA:
      r->push_range(static_cast<const nvtxRangePushA_params*>(d->functionParams)->message, dev);
      break;
    case CUPTI_CBID_NVTX_nvtxRangePushEx: {
      const char* m = nvtx_message(static_cast<const nvtxRangePushEx_params*>(d->functionParams)->eventAttrib);
      r->push_range(m ? m : "nvtx", dev);
      break;
    }
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
      const char* m =
          nvtx_message(static_cast<const nvtxDomainRangePushEx_params*>(d->functionParams)->core.eventAttrib);
      r->push_range(m ? m : "nvtx", dev);
      break;
    }
    case CUPTI_CBID_NVTX_nvtxRangePop:
    case CUPTI_CBID_NVTX_nvtxDomainRangePop:
      r->pop_range(dev);
      break;
    default:
      break;
  }
}

void CUPTIAPI callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void* data) {
  if (t_depth) return;
  Recorder* r = Session::get().recorder();
  if (!r) return;
  DepthGuard guard;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    on_driver(r, id, static_cast<const CUpti_CallbackData*>(data));
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
    const auto* rd = static_cast<const CUpti_ResourceData*>(data);
    uint32_t uid = 0;
    if (cuptiGetContextId(rd->context, &uid) == CUPTI_SUCCESS) r->on_context_destroy(uid);
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_STREAM_CREATED) {
    const auto* rd = static_cast<const CUpti_ResourceData*>(data);
    uint32_t uid = 0;
    cuptiGetContextId(rd->context, &uid);
    r->note_created({HandleKind::kStream, reinterpret_cast<uint64_t>(rd->resourceHandle.stream), 0, uid,
                     device_of(nullptr), now_us()});
  } else if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING) {
    const auto* rd = static_cast<const CUpti_ResourceData*>(data);
    r->note_destroyed(HandleKind::kStream, reinterpret_cast<uint64_t>(rd->resourceHandle.stream));
  } else if (domain == CUPTI_CB_DOMAIN_NVTX) {
    on_nvtx(r, id, static_cast<const CUpti_NvtxData*>(data));
  }
}

const CUpti_CallbackId kDriverCallbacks[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemImportFromShareableHandle,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolDestroy,
    CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo,
};

Status subscribe() {
  if (g_subscriber) return {};
  if (!load_driver()) return Error{"the CUDA driver (libcuda.so.1) could not be loaded"};
  const CUptiResult rc = cuptiSubscribe(&g_subscriber, callback, nullptr);
  if (rc != CUPTI_SUCCESS) {
    g_subscriber = nullptr;
    if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      return Error{"another CUPTI subscriber is active (Nsight Systems, Nsight Compute, a profiler?); "
                   "leaving the job alone"};
    const char* msg = nullptr;
    cuptiGetResultString(rc, &msg);
    return Error{std::string("cuptiSubscribe failed: ") + (msg ? msg : "unknown error")};
  }
  // Frames inside the driver, CUPTI and this library are dropped from the top of every stack.
  add_skip_module_of(reinterpret_cast<const void*>(&callback));
  add_skip_modules_named("libcuda.so");
  add_skip_modules_named("libcupti.so");
  for (CUpti_CallbackId id : kDriverCallbacks) cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
  for (CUpti_CallbackId id : {CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, CUPTI_CBID_RESOURCE_STREAM_CREATED,
                              CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING})
    cuptiEnableCallback(1, g_subscriber, CUPTI_CB_DOMAIN_RESOURCE, id);
  cuptiEnableDomain(1, g_subscriber, CUPTI_CB_DOMAIN_NVTX);
  return {};
}

void unsubscribe() {
  if (!g_subscriber) return;
  cuptiUnsubscribe(g_subscriber);
  g_subscriber = nullptr;
}

int16_t current_device() {
  DepthGuard guard;
  return current_device_uncached();
}

const Backend kBackend{subscribe, unsubscribe, current_device};
const bool kRegistered = (set_backend(&kBackend), true);

// NVTX reaches CUPTI only through NVTX_INJECTION64_PATH naming libcupti; set it (if unset) before the job's first
// NVTX call, which NVTX checks lazily.
void route_nvtx_to_cupti() {
  if (std::getenv("NVTX_INJECTION64_PATH")) return;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&cuptiSubscribe), &info) && info.dli_fname)
    setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
}

}  // namespace
}  // namespace allocscope::capture

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  using namespace allocscope::capture;
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return 1;
  (void)kRegistered;
  auto opts = options_from_env();
  if (!opts.ok()) {
    std::fprintf(stderr, "allocscope capture: not recording: %s\n", opts.error().describe().c_str());
    return 1;  // never fail the job's CUDA initialisation because of us
  }
  route_nvtx_to_cupti();
  g_may_have_untracked.store(false);
  (void)Session::get().start(*opts);  // on error Session says so once on stderr
  return 1;
}
