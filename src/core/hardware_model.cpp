// The hardware model: text/JSON forms and the on-disk cache. Measurement is in src/cuda/device_probe.cu.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../cuda/cuda_backend.hpp"
#include "mconv/hardware.hpp"
#include "mconv/types.hpp"

namespace mconv {
namespace {

constexpr int kCacheVersion = 1;  // bump when the measurement method changes

}  // namespace

std::string HardwareModel::to_text() const {
  std::ostringstream os;
  os << std::fixed;
  os << "device                  " << name << " (sm_" << cc_major << cc_minor << ")\n"
     << "SMs x FP32 cores        " << sm_count << " x " << cores_per_sm << "\n"
     << "shared memory           " << smem_per_sm / 1024 << " KiB per SM, " << smem_per_block_optin / 1024
     << " KiB per block (opt-in)\n"
     << "registers per SM        " << regs_per_sm << ", threads per SM " << max_threads_per_sm << "\n"
     << "L2                      " << l2_bytes / (1024 * 1024) << " MiB\n"
     << "SM clock                " << std::setprecision(0) << clock_mhz << " MHz\n"
     << "memory latency          " << std::setprecision(0) << latency_cycles << " cycles (measured, pointer chase)\n"
     << "memory bandwidth        " << std::setprecision(0) << bandwidth / 1e9 << " GB/s (measured, device copy)\n"
     << "bytes per cycle         " << std::setprecision(1) << bytes_per_cycle() << "\n"
     << "N_FMA                   " << std::setprecision(0) << n_fma() << " FMAs per SM in flight to hide one latency\n"
     << "V_s                     " << std::setprecision(0) << v_s() / 1024 << " KiB in flight to keep memory busy\n"
     << "FMAs in flight/thread   " << std::setprecision(1)
     << (max_threads_per_sm > 0 ? n_fma() / max_threads_per_sm : 0.0) << " independent FMAs per thread at "
     << max_threads_per_sm << " resident threads per SM\n";
  return os.str();
}

std::string HardwareModel::to_json() const {
  nlohmann::json j = {{"version", kCacheVersion},
                      {"name", name},
                      {"uuid", uuid},
                      {"cc_major", cc_major},
                      {"cc_minor", cc_minor},
                      {"sm_count", sm_count},
                      {"cores_per_sm", cores_per_sm},
                      {"smem_per_sm", smem_per_sm},
                      {"smem_per_block_optin", smem_per_block_optin},
                      {"l2_bytes", l2_bytes},
                      {"regs_per_sm", regs_per_sm},
                      {"max_threads_per_sm", max_threads_per_sm},
                      {"clock_mhz", clock_mhz},
                      {"latency_cycles", latency_cycles},
                      {"bandwidth", bandwidth},
                      {"n_fma", n_fma()},
                      {"v_s", v_s()}};
  return j.dump(2);
}

HardwareModel HardwareModel::from_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    if (j.at("version").get<int>() != kCacheVersion) throw Error(Status::IoError, "hardware cache: version mismatch");
    HardwareModel m;
    m.name = j.at("name");
    m.uuid = j.at("uuid");
    m.cc_major = j.at("cc_major");
    m.cc_minor = j.at("cc_minor");
    m.sm_count = j.at("sm_count");
    m.cores_per_sm = j.at("cores_per_sm");
    m.smem_per_sm = j.at("smem_per_sm");
    m.smem_per_block_optin = j.at("smem_per_block_optin");
    m.l2_bytes = j.at("l2_bytes");
    m.regs_per_sm = j.at("regs_per_sm");
    m.max_threads_per_sm = j.at("max_threads_per_sm");
    m.clock_mhz = j.at("clock_mhz");
    m.latency_cycles = j.at("latency_cycles");
    m.bandwidth = j.at("bandwidth");
    if (m.sm_count <= 0 || m.latency_cycles <= 0 || m.bandwidth <= 0 || m.clock_mhz <= 0)
      throw Error(Status::IoError, "hardware cache: non-positive measurement");
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw Error(Status::IoError, std::string("hardware cache: malformed (") + e.what() + ")");
  }
}

std::string hardware_cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/mconv";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/mconv";
  return ".mconv-cache";
}

HardwareModel hardware_model(int device, bool refresh, std::string* note) {
  HardwareModel reported = detail::cuda_backend::reported_hardware(device);
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
  detail::cuda_backend::measure_memory(device, m.latency_cycles, m.bandwidth);
  std::error_code ec;
  std::filesystem::create_directories(hardware_cache_dir(), ec);
  std::ofstream out(path);
  if (out) out << m.to_json();
  if (note && note->empty())
    *note = out ? "measured; cached in " + path : "measured; cache not writable (" + path + ")";
  else if (note)
    *note += out ? "; cached in " + path : "";
  return m;
}

}  // namespace mconv
