// A do-nothing CUPTI injection library subscribing to the same driver callbacks as liballocscope_capture.so, so the
// benchmark can split the capture's overhead into CUPTI's own dispatch and our recorder's work.
#include <cupti.h>

#include <initializer_list>

namespace {
void CUPTIAPI noop(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}
}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  CUpti_SubscriberHandle sub;
  if (cuptiSubscribe(&sub, noop, nullptr) != CUPTI_SUCCESS) return 1;
  for (CUpti_CallbackId id : {CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
                              CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2})
    cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, id);
  return 1;
}
