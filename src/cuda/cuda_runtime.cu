// Device discovery, plan-table upload and pointer checks for the CUDA executor.
#include "cuda_backend.hpp"
#include "cuda_check.cuh"

namespace mconv::detail::cuda_backend {

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

DeviceSummary summary() {
  int dev = 0, sms = 0, smem = 0;
  MCONV_CUDA_CHECK(cudaGetDevice(&dev));
  MCONV_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  MCONV_CUDA_CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return {sms, smem};
}

int current_device() {
  int dev = 0;
  MCONV_CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}

void set_device(int device) {
  int count = 0;
  MCONV_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count)
    throw Error(Status::BadParam,
                "device: index " + std::to_string(device) + " but " + std::to_string(count) + " device(s) are visible");
  MCONV_CUDA_CHECK(cudaSetDevice(device));
}

void* upload_table(const Plan& plan, int device) {
  set_device(device);
  void* table = nullptr;
  const auto& rows = plan.offset_table();
  MCONV_CUDA_CHECK(cudaMalloc(&table, rows.size() * sizeof(OffsetRow)));
  MCONV_CUDA_CHECK(cudaMemcpy(table, rows.data(), rows.size() * sizeof(OffsetRow), cudaMemcpyHostToDevice));
  return table;
}

void free_table(void* table, int) {
  cudaFree(table);
}

void check_device_pointer(const void* p, const char* field, int device) {
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
}

void synchronize(void* stream) {
  MCONV_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

}  // namespace mconv::detail::cuda_backend
