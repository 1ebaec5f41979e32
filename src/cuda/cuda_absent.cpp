// Stand-in for the CUDA executor in builds without nvcc: every call reports NoDevice.
#include "cuda_backend.hpp"

namespace mconv::detail::cuda_backend {
namespace {
[[noreturn]] void absent() {
  throw Error(Status::NoDevice, "target: mconv was built without CUDA");
}
}  // namespace

bool compiled() {
  return false;
}
bool available() {
  return false;
}
DeviceSummary summary() {
  return {};
}
void* upload_table(const Plan&, int) {
  absent();
}
void free_table(void*, int) {}
void check_device_pointer(const void*, const char*, int) {
  absent();
}
void implicit_precomp_forward(const Plan&, const void*, const float*, const float*, float*, const Epilogue&, void*) {
  absent();
}
void direct_block_forward(const Plan&, const float*, const float*, float*, const Epilogue&, void*) {
  absent();
}
void single_channel_forward(const Plan&, const float*, const float*, float*, const Epilogue&, void*) {
  absent();
}
void stride_fixed_forward(const Plan&, const float*, const float*, float*, const Epilogue&, void*) {
  absent();
}
int current_device() {
  absent();
}
void synchronize(void*) {}
HardwareModel reported_hardware(int) {
  absent();
}
void measure_memory(int, double&, double&) {
  absent();
}
void set_device(int) {
  absent();
}

}  // namespace mconv::detail::cuda_backend
