// Stand-in for the CUDA runtime in builds without nvcc: every call reports NoDevice.
#include "cuda_device.hpp"

namespace mconv::detail::cuda_device {
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
void check_index(int) {
  absent();
}
DeviceGuard::DeviceGuard(int) {
  absent();
}
DeviceGuard::~DeviceGuard() = default;
std::shared_ptr<const void> upload_table(const Plan&, int) {
  absent();
}
void check_device_pointer(const void*, const char*, int, int64_t) {
  absent();
}
void synchronize(void*) {}
struct StreamFork::Handles {};
StreamFork::StreamFork(int) {
  absent();
}
StreamFork::~StreamFork() = default;
StreamFork::Fork::Fork(StreamFork& owner, void* origin) : owner_(owner), lock_(owner.mutex_), origin_(origin) {
  absent();
}
StreamFork::Fork::~Fork() = default;
void* StreamFork::Fork::stream(size_t) {
  absent();
}
HardwareModel reported_hardware(int) {
  absent();
}
void measure_memory(int, double&, double&) {
  absent();
}

}  // namespace mconv::detail::cuda_device
