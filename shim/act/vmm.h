#pragma once
// Memory the program builds itself with the driver's virtual memory management (cuMemCreate,
// cuMemMap: PyTorch's expandable segments, JAX, NCCL): each device handle counts against the
// budget from its creation to its last release, and one past the budget is made in host memory
// instead (policy/placement.h, place_vmm), which the program's own mappings reach over the link.
#include "driver/cuda_driver.h"

namespace gms::act {

// cuMemCreate: `real` makes the handle with the properties given.
CUresult vmm_create(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                    unsigned long long flags, CUresult (*real)(CUmemGenericAllocationHandle*, size_t,
                                                               const CUmemAllocationProp*, unsigned long long));
// cuMemRetainAllocationHandle returned `handle`: one more release to come.
void vmm_retained(CUmemGenericAllocationHandle handle);
// cuMemRelease of `handle` succeeded: its memory leaves the books with its last reference.
void vmm_released(CUmemGenericAllocationHandle handle);

}  // namespace gms::act
