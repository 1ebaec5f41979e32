// The hardware model of a device: read from the on-disk cache when it matches the device, else
// measured (device_probe.cu) and cached.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cuda_device.hpp"
#include "mconv/file.hpp"
#include "mconv/hardware.hpp"

namespace mconv {

std::string hardware_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/mconv";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/mconv";
  return ".mconv-cache";
}

HardwareModel hardware_model(int device, bool refresh, std::string* note) {
  if (!detail::cuda_device::available())
    throw Error(Status::NoDevice, detail::cuda_device::compiled() ? "device: no CUDA device is visible"
                                                                  : "device: mconv was built without CUDA");
  HardwareModel reported = detail::cuda_device::reported_hardware(device);
  const std::string path =
      hardware_cache_dir() + "/hardware-" + (reported.uuid.empty() ? std::to_string(device) : reported.uuid) + ".json";
  if (!refresh) {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      try {
        HardwareModel cached = HardwareModel::from_json(ss.str());
        if (cached.name == reported.name && cached.uuid == reported.uuid && cached.sm_count == reported.sm_count &&
            cached.clock_mhz == reported.clock_mhz) {
          if (note) *note = "from cache " + path;
          return cached;
        }
        if (note) *note = "cache " + path + " is stale (another device or clock): measured again";
      } catch (const Error& e) {
        if (note) *note = std::string(e.what()) + ": measured again";
      }
    }
  }
  HardwareModel m = reported;
  detail::cuda_device::measure_memory(device, m.latency_cycles, m.bandwidth);
  // Written atomically: two processes measuring at once each rename a whole file into place, and a
  // read-only cache folder only costs a measurement next time.
  std::error_code ec;
  std::filesystem::create_directories(hardware_cache_dir(), ec);
  std::string written = "cached in " + path;
  try {
    file::write_atomically(path, m.to_json());
  } catch (const Error& e) {
    written = std::string("cache not written: ") + e.what();
  }
  if (note) *note = note->empty() ? "measured; " + written : *note + "; " + written;
  return m;
}

}  // namespace mconv
