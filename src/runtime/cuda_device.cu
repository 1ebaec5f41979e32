// Device discovery, the device guard, plan-table upload and pointer checks.
#include <cuda.h>  // the driver API's types, for cuMemGetAddressRange (found at run time)

#include <mutex>
#include <unordered_map>

#include "../algorithms/common/cuda_check.cuh"
#include "cuda_device.hpp"

namespace mconv::detail::cuda_device {

bool compiled() {
  return true;
}

bool available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  return count > 0;
}

void check_index(int device) {
  int count = 0;
  MCONV_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    throw Error(Status::BadParam,
                "device: index " + std::to_string(device) + " but " + std::to_string(count) + " device(s) are visible");
}

DeviceGuard::DeviceGuard(int device) {
  int current = 0;
  MCONV_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device) {
    MCONV_CUDA_CHECK(cudaSetDevice(device));
    previous_ = current;
  }
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

std::shared_ptr<const void> upload_table(const Plan& plan, int device) {
  const auto& rows = plan.offset_table();
  void* table = nullptr;
  MCONV_CUDA_CHECK(cudaMalloc(&table, rows.size() * sizeof(OffsetRow)));
  std::shared_ptr<const void> owned(table, [device](const void* p) {
    DeviceGuard guard(device);
    cudaFree(const_cast<void*>(p));
  });
  // A stream of its own: waiting on it does not wait for the caller's queued work, and a launch on a
  // stream that does not synchronise with the legacy one (cudaStreamNonBlocking) still finds the
  // table complete. Plan time only; made once per device and kept for the process.
  static std::mutex mutex;
  static std::unordered_map<int, cudaStream_t> streams;
  cudaStream_t upload = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = streams.find(device);
    if (it == streams.end()) {
      MCONV_CUDA_CHECK(cudaStreamCreateWithFlags(&upload, cudaStreamNonBlocking));
      it = streams.emplace(device, upload).first;
    }
    upload = it->second;
  }
  MCONV_CUDA_CHECK(
      cudaMemcpyAsync(table, rows.data(), rows.size() * sizeof(OffsetRow), cudaMemcpyHostToDevice, upload));
  MCONV_CUDA_CHECK(cudaStreamSynchronize(upload));
  return owned;
}

namespace {

using AddressRangeFn = CUresult(CUDAAPI*)(CUdeviceptr*, size_t*, CUdeviceptr);

// cuMemGetAddressRange through the runtime's driver entry points (no link to libcuda); null where
// the driver does not offer it.
AddressRangeFn address_range() {
  static const AddressRangeFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return AddressRangeFn(nullptr);
    }
    return reinterpret_cast<AddressRangeFn>(f);
  }();
  return fn;
}

}  // namespace

void check_device_pointer(const void* p, const char* field, int device, int64_t bytes) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(Status::BadParam, std::string(field) + ": not a pointer the CUDA runtime knows");
  }
  const bool on_device = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
  if (!on_device)
    throw Error(Status::BadParam, std::string(field) + ": host memory given to the cuda target (need device memory)");
  if (attr.type == cudaMemoryTypeDevice && attr.device != device)
    throw Error(Status::BadParam, std::string(field) + ": memory of device " + std::to_string(attr.device) +
                                      " given to an engine on device " + std::to_string(device));
  CUdeviceptr base = 0;
  size_t size = 0;
  const auto ptr = reinterpret_cast<CUdeviceptr>(p);
  if (attr.type == cudaMemoryTypeDevice && address_range() && address_range()(&base, &size, ptr) == CUDA_SUCCESS &&
      ptr + static_cast<CUdeviceptr>(bytes) > base + size)
    throw Error(Status::BadParam, std::string(field) + ": the tensor spans " + std::to_string(bytes) +
                                      " bytes from this pointer, but its allocation ends " +
                                      std::to_string(base + size - ptr) + " bytes after it");
}

void synchronize(void* stream) {
  MCONV_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

struct StreamFork::Handles {
  int device;
  cudaEvent_t forked = nullptr;
  cudaStream_t side[kSideStreams] = {};
  cudaEvent_t done[kSideStreams] = {};
  ~Handles() {
    // Never throws: an Engine may go at process exit, when the runtime may already refuse calls.
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess || (previous != device && cudaSetDevice(device) != cudaSuccess)) {
      (void)cudaGetLastError();
      return;
    }
    for (int i = 0; i < kSideStreams; ++i) {
      if (done[i]) cudaEventDestroy(done[i]);
      if (side[i]) cudaStreamDestroy(side[i]);
    }
    if (forked) cudaEventDestroy(forked);
    if (previous != device) (void)cudaSetDevice(previous);
  }
};

StreamFork::StreamFork(int device) : handles_(std::make_unique<Handles>()) {
  handles_->device = device;
  DeviceGuard guard(device);
  // Non-blocking: the side streams order themselves after the caller's stream through the events
  // only, whatever that stream is (the legacy default stream included).
  MCONV_CUDA_CHECK(cudaEventCreateWithFlags(&handles_->forked, cudaEventDisableTiming));
  for (int i = 0; i < kSideStreams; ++i) {
    MCONV_CUDA_CHECK(cudaStreamCreateWithFlags(&handles_->side[i], cudaStreamNonBlocking));
    MCONV_CUDA_CHECK(cudaEventCreateWithFlags(&handles_->done[i], cudaEventDisableTiming));
  }
}

StreamFork::~StreamFork() = default;

StreamFork::Fork::Fork(StreamFork& owner, void* origin) : owner_(owner), lock_(owner.mutex_), origin_(origin) {
  MCONV_CUDA_CHECK(cudaEventRecord(owner_.handles_->forked, static_cast<cudaStream_t>(origin)));
}

void* StreamFork::Fork::stream(size_t i) {
  const size_t side = i % (kSideStreams + 1);
  if (side == 0) return origin_;
  if (!used_[side - 1]) {
    MCONV_CUDA_CHECK(cudaStreamWaitEvent(owner_.handles_->side[side - 1], owner_.handles_->forked, 0));
    used_[side - 1] = true;
  }
  return owner_.handles_->side[side - 1];
}

StreamFork::Fork::~Fork() {
  // Joins even after a failed launch, so that origin never runs ahead of work queued on a side stream.
  for (int i = 0; i < kSideStreams; ++i)
    if (used_[i] && cudaEventRecord(owner_.handles_->done[i], owner_.handles_->side[i]) == cudaSuccess)
      (void)cudaStreamWaitEvent(static_cast<cudaStream_t>(origin_), owner_.handles_->done[i], 0);
}

}  // namespace mconv::detail::cuda_device
