// The hardware model: its text and JSON forms and the reference H100. Measuring a device and the
// on-disk cache are the runtime's (src/runtime/hardware_cache.cpp, device_probe.cu).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

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

HardwareModel HardwareModel::reference_h100() {
  // `mconv device` on the H100 80GB HBM3 (SXM5) this project measures on.
  HardwareModel m;
  m.name = "H100 (reference model: no GPU visible)";
  m.cc_major = 9;
  m.sm_count = 132;
  m.cores_per_sm = 128;
  m.smem_per_sm = 228 * 1024;
  m.smem_per_block_optin = 227 * 1024;
  m.l2_bytes = 50ll << 20;
  m.regs_per_sm = 65536;
  m.max_threads_per_sm = 2048;
  m.clock_mhz = 1980;
  m.latency_cycles = 283;
  m.bandwidth = 2.959e12;
  return m;
}

}  // namespace mconv
