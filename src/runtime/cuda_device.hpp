// The runtime's view of CUDA devices: discovery, the caller's current device, device memory for
// plan tables, pointer checks, and the hardware model's measurements. Implemented in cuda_device.cu
// and device_probe.cu when mconv is built with CUDA, and by cuda_absent.cpp (NoDevice) otherwise.
#pragma once

#include <memory>
#include <mutex>

#include "mconv/hardware.hpp"
#include "mconv/plan.hpp"

namespace mconv::detail::cuda_device {

bool compiled();
bool available();
/// Throws BadParam when `device` is not a visible device's index.
void check_index(int device);

/// Makes `device` current for its lifetime and restores the caller's device after (a no-op where
/// it is current already, the common case: one cudaGetDevice).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

/// Copies the plan's offset table to the current device on a private non-blocking stream and waits
/// for it, so the table is complete for a launch on any stream (a framework's current stream changes
/// per call); the memory is freed, on `device`, with the last owner.
std::shared_ptr<const void> upload_table(const Plan& plan, int device);

/// Throws BadParam if `p` is not memory of `device` (a driver query: cudaPointerGetAttributes), or if
/// the allocation it points into ends before `bytes` past it (a second query, cuMemGetAddressRange,
/// where the driver answers it: device memory from cudaMalloc and the stream-ordered allocators).
void check_device_pointer(const void* p, const char* field, int device, int64_t bytes);

void synchronize(void* stream);

/// Side streams of one device on which a call's independent launches overlap (the phase steps of a
/// stride-2 dgrad, each a grid too small to fill the GPU alone). A fork records an event on the
/// caller's stream that the side streams wait for, and its join makes the caller's stream wait for
/// an event on each side stream it used: the caller sees one stream's order, and a CUDA graph
/// capture follows the fork and the join. Streams and events are made with the object (plan time,
/// outside any capture); forks are serialised, since they share the events.
class StreamFork {
 public:
  static constexpr int kSideStreams = 3;
  explicit StreamFork(int device);
  ~StreamFork();
  StreamFork(const StreamFork&) = delete;
  StreamFork& operator=(const StreamFork&) = delete;

  /// One fork from `origin`: stream(i) is origin for i % (kSideStreams + 1) == 0, else a side stream
  /// ordered after origin's work so far. The destructor joins (never throws).
  class Fork {
   public:
    Fork(StreamFork& owner, void* origin);
    ~Fork();
    Fork(const Fork&) = delete;
    Fork& operator=(const Fork&) = delete;
    void* stream(size_t i);

   private:
    StreamFork& owner_;
    std::lock_guard<std::mutex> lock_;
    void* origin_;
    bool used_[kSideStreams] = {};
  };

 private:
  struct Handles;
  std::mutex mutex_;
  std::unique_ptr<Handles> handles_;
};

/// What the runtime reports about `device` (no measurement).
HardwareModel reported_hardware(int device);
/// Pointer-chase latency (cycles) and device-copy bandwidth (bytes/s, read + write) of `device`.
void measure_memory(int device, double& latency_cycles, double& bandwidth);

}  // namespace mconv::detail::cuda_device
