#include "vmm.h"

#include <mutex>
#include <unordered_map>

#include "act/config.h"
#include "act/placement.h"
#include "core/guard.h"
#include "core/log.h"
#include "core/runtime.h"
#include "driver/budget.h"
#include "trace/trace.h"

namespace gms::act {
namespace {

struct Handle {
  uint64_t bytes = 0;
  int dev = 0;
  bool on_host = false;  // made in host memory in place of device memory
  int refs = 1;
};

struct Handles {
  std::mutex mu;
  std::unordered_map<CUmemGenericAllocationHandle, Handle> of;
};

Handles& handles() {
  static NoDestructor<Handles> h;
  return *h;
}

void book(const Handle& h, int sign) {
  DeviceLedger& l = ledger();
  if (h.on_host) {
    sign > 0 ? l.add_created(h.bytes) : l.sub_created(h.bytes);
  } else {
    sign > 0 ? l.add_used(h.dev, h.bytes) : l.sub_used(h.dev, h.bytes);
  }
}

void say(const char* what, size_t size, int dev, const char* reason) {
  Line l;
  l.str("cuMemCreate of ").bytes(size).str(" on device ").i64(dev).str(": ").str(what).str(" (").str(reason)
      .str("; device budget ").bytes(budget::limit(dev)).str(", in use ").bytes(ledger().used(dev)).str(")");
  log(LogLevel::info, l);
}

}  // namespace

CUresult vmm_create(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                    unsigned long long flags, CUresult (*real)(CUmemGenericAllocationHandle*, size_t,
                                                               const CUmemAllocationProp*, unsigned long long)) {
  // Host memory the program asks for itself, and malformed requests, are the driver's business.
  if (!handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return real(handle, size, prop, flags);
  Handle h;
  h.bytes = size;
  h.dev = prop->location.id;
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
  if (!placement_active()) {
    r = real(handle, size, prop, flags);
  } else {
    const auto& cfg = placement_config();
    const policy::DeviceBudget within = placement_budget(h.dev);
    policy::VmmRequest req;
    req.bytes = size;
    policy::Placement p = policy::place_vmm(cfg, within, ledger().created(), req);
    if (p.where == policy::Where::device) {
      r = real(handle, size, prop, flags);
      if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        req.device_refused = true;  // the card is fuller than the budget says: other processes
        p = policy::place_vmm(cfg, within, ledger().created(), req);
      }
    }
    if (p.where == policy::Where::pinned) {
      // The same handle, host-located: the program's cuMemMap and cuMemSetAccess for the device
      // work on it unchanged, and its kernels reach it over the link. Shareable handle types stay
      // asked for (PyTorch asks on every segment): a process that imports it maps host memory.
      CUmemAllocationProp host = *prop;
      host.location = {CU_MEM_LOCATION_TYPE_HOST, 0};
      host.allocFlags.compressionType = 0;
      host.allocFlags.gpuDirectRDMACapable = 0;
      r = real(handle, size, &host, flags);
      if (r != CUDA_SUCCESS && r != CUDA_ERROR_OUT_OF_MEMORY) {
        host.location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};  // what drivers without plain host take
        r = real(handle, size, &host, flags);
      }
      if (r != CUDA_SUCCESS) r = CUDA_ERROR_OUT_OF_MEMORY;  // as the driver says when memory is short
      h.on_host = r == CUDA_SUCCESS;
      say(h.on_host ? "made in host memory" : "host memory refused too", size, h.dev, p.reason);
      if (h.on_host) runtime_stats().decision(Decision::spilled_vmm, size);
      if (trace::enabled()) trace::decision(h.on_host ? "spill_vmm_host" : "refuse", 0, size, h.dev, p.reason);
    } else if (p.where == policy::Where::out_of_memory) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
      say("refused", size, h.dev, p.reason);
      runtime_stats().decision(Decision::refused, size);
      if (trace::enabled()) trace::decision("refuse", 0, size, h.dev, p.reason);
    }
  }
  if (r != CUDA_SUCCESS) return r;
  Handles& t = handles();
  std::lock_guard lock(t.mu);
  book(h, +1);
  t.of.insert_or_assign(*handle, h);
  return r;
}

void vmm_retained(CUmemGenericAllocationHandle handle) {
  Handles& t = handles();
  std::lock_guard lock(t.mu);
  auto it = t.of.find(handle);
  if (it != t.of.end()) ++it->second.refs;
}

void vmm_released(CUmemGenericAllocationHandle handle) {
  Handles& t = handles();
  std::lock_guard lock(t.mu);
  auto it = t.of.find(handle);
  if (it == t.of.end() || --it->second.refs > 0) return;
  // The driver frees the memory once it is unmapped as well; the books let it go at the last
  // release, whatever is still mapped (a program that releases first unmaps soon after).
  book(it->second, -1);
  t.of.erase(it);
}

}  // namespace gms::act
