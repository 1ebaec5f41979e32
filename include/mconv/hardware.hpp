// mconv: the hardware model of technique 4. What the device reports, plus global-memory latency
// (pointer chase) and bandwidth (device copy) measured once per device and cached on disk, and the
// quantities the planner derives from them.
#pragma once

#include <cstdint>
#include <string>

namespace mconv {

/// Shared memory the CUDA runtime keeps for itself in every resident block (sm_80 and later): a
/// block using B bytes takes B + this from its SM.
inline constexpr int64_t kRuntimeSmemPerBlock = 1024;

struct HardwareModel {
  // Reported by the runtime.
  std::string name, uuid;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0, cores_per_sm = 0;  // FP32 lanes per SM (from the compute capability)
  int64_t smem_per_sm = 0, smem_per_block_optin = 0, l2_bytes = 0;
  int regs_per_sm = 0, max_threads_per_sm = 0;
  double clock_mhz = 0;
  // Measured (cached).
  double latency_cycles = 0;  ///< dependent global loads missing L2, cycles each
  double bandwidth = 0;       ///< bytes/s, device copy counting bytes read + written

  /// N_FMA = latency * cores_per_sm * 2: FMAs an SM must have in hand to hide one memory latency.
  double n_fma() const { return latency_cycles * cores_per_sm * 2; }
  /// Bytes the whole device moves per SM clock cycle.
  double bytes_per_cycle() const { return bandwidth / (clock_mhz * 1e6); }
  /// V_s = bytes_per_cycle * latency: bytes that must be in flight to keep memory busy.
  double v_s() const { return bytes_per_cycle() * latency_cycles; }

  /// The H100 80GB HBM3 as `mconv device` measured it: what plans are made for where no GPU is
  /// visible (so that a CUDA plan can be inspected, and tested, on any machine).
  static HardwareModel reference_h100();

  std::string to_text() const;
  std::string to_json() const;
  /// Parses to_json(); throws Error(IoError) on anything malformed or incomplete.
  static HardwareModel from_json(const std::string& text);
};

/// The cache folder: $XDG_CACHE_HOME/mconv, else $HOME/.cache/mconv.
std::string hardware_cache_dir();

/// The model of CUDA device `device`: from the cache when it is present, parses, and matches the
/// device (name, UUID, SM count, clock) and the cache version; otherwise measured and rewritten.
/// `refresh` forces a measurement. Throws Error(NoDevice) without CUDA.
HardwareModel hardware_model(int device = 0, bool refresh = false, std::string* cache_note = nullptr);

}  // namespace mconv
