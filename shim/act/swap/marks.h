#pragma once
// Events and the copy gate of movable memory: a pool of events per device, the marks they make on
// streams (a launch's last use of a range, the end of a round's copies), the shim's own copy
// streams, and the gate that keeps copies to the host from slowing down mappings.
#include <cstdint>
#include <vector>

#include "base.h"

namespace gms::act::swap {

// An event and the device of the context it was made in (its pool).
struct Mark {
  CUevent event = nullptr;
  CUstream stream = nullptr;  // where it was last recorded (for a launch's use)
  int dev = 0;
};

// The marks of one chunk of movable memory under GPUMEMSHIM_SWAP_ORDER=scan: the last launch on
// each stream that the scan saw use it, and the copies in that launches must wait for. A move
// waits for these instead of the context.
struct RangeMarks {
  std::vector<Mark> uses;
  Mark ready;
  // Launches and transfers between their await_ready and their mark: another thread's round must
  // not park the range under them (they would fault, not read the host copy).
  int in_flight = 0;
};

// Records a mark on `stream`; a failed record destroys the event (it may be broken).
bool record(Mark& m, CUstream stream);
// Moves `m` (taking an event first if it has none) to the end of what is queued on `stream`.
bool mark_end(Mark& m, CUstream stream);
// Work on `stream` (per_thread: the per-thread default) waits on the GPU for `m`, or here when
// the driver will not queue the wait.
void gpu_wait(const Mark& m, CUstream stream, bool per_thread);
// The calling thread waits for the work before `m` (no mark: nothing to wait for); the time goes
// to swap_wait_ns only when there was work left.
void host_wait(const Mark& m);
// A copy of device-visible memory on `stream`.
CUresult copy(CUdeviceptr dst, CUdeviceptr src, uint64_t n, CUstream stream, bool per_thread);

// The state of this part. Caller holds mu().
struct Marks {
  std::vector<CUevent> events[kMaxDevices];  // idle events, by the device of their context
  // Scan order: the shim's own streams for copies out (0), copies in (1) and the checks of chunks
  // that kept their host copy (2: act/swap/sums.h), by context device.
  CUstream copy_streams[kMaxDevices][3] = {};
  // The gate on copies to the host (copy_out), by device: a host word the GPU reads, and its
  // address there; null when there is none (not made yet, or the driver would not).
  uint32_t* gate_word[kMaxDevices] = {};
  CUdeviceptr gate_at[kMaxDevices] = {};
  bool gate_tried[kMaxDevices] = {};
  // The end of the last round's copies in, and of its copies out, by context device.
  Mark last_copies[kMaxDevices];
  Mark last_outs[kMaxDevices];

  // An idle event of the current context's pool, or a new one; null when there is none.
  Mark take();
  void give(Mark& m);
  void give_all(RangeMarks& r);
  // The gate of `dev` (the current context's device), made at the first use.
  uint32_t* gate(int dev);
  // A copy to the host behind the gate of `dev`, piece by piece (ungated for dev -1, when there is
  // no gate, or when the driver refuses a wait: from then on for good).
  CUresult copy_out(CUdeviceptr dst, CUdeviceptr src, uint64_t n, CUstream stream, bool per_thread, int dev);
  // The shim's own stream for copies out (0), in (1) or checks (2) in the current context; null if
  // none.
  CUstream copy_stream(int which);
  // The program holds no movable memory any more: the last copies' marks and every idle event go.
  void release_all();
};
Marks& marks();

// Shuts the gate of `dev`, if it has one, while it lives. Caller holds mu() (one at a time).
class GateShut {
 public:
  explicit GateShut(int dev);
  ~GateShut();
  GateShut(const GateShut&) = delete;
  GateShut& operator=(const GateShut&) = delete;

 private:
  uint32_t* word_ = nullptr;
};

}  // namespace gms::act::swap
