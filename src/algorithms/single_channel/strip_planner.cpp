// The paper's single-channel planner (methods 1 and 2, section 3.1) for the strip kernel, with
// mconv's reshaping (Note [single-channel block shape]).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "../common/host_math.hpp"
#include "mconv/types.hpp"
#include "planner.hpp"

namespace mconv::detail {
int64_t single_channel_smem_budget(const HardwareModel& hw) {
  return std::min(hw.smem_per_sm / 2, hw.smem_per_block_optin);
}

int64_t single_channel_strip_cols(const Problem& p) {
  return (p.q() - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1;
}
int64_t single_channel_strip_rows(const Problem& p, int64_t out_rows) {
  return (out_rows - 1) * p.stride_h + (p.r - 1) * p.dil_h + 1;
}

bool single_channel_register_window(const Problem& p) {
  return p.r == p.s && (p.r == 1 || p.r == 3 || p.r == 5 || p.r == 7) && p.dil_h == 1 &&
         (p.stride_h == 1 || p.stride_h == 2);
}

int single_channel_longest_run(const Problem& p, int64_t filters_per_block, int64_t rows_per_block) {
  const int64_t taps = p.r * p.s;
  int longest = taps <= 9 ? 2 : 4;
  if (taps <= 25 && filters_per_block >= 32 && rows_per_block >= 8) longest /= 2;
  if (single_channel_register_window(p))
    while (longest > 1 && single_channel_window_floats(longest, p.stride_h, p.r, p.s) > kSingleChannelWindowFloats)
      longest /= 2;
  return longest;
}

int single_channel_run(const Problem& p, int64_t filters_per_block, int64_t rows_per_block) {
  const int longest = single_channel_longest_run(p, filters_per_block, rows_per_block);
  for (int run : {4, 2})
    if (run <= longest && ceil_div(rows_per_block, run) * run * 4 <= rows_per_block * 5) return run;
  return 1;
}

int64_t single_channel_strip_pitch(const Problem& p) {
  return (single_channel_strip_cols(p) + 3) / 4 * 4;
}

int64_t single_channel_filter_pitch(const Problem& p) {
  return (p.s + 3) / 4 * 4;
}

int64_t single_channel_smem_bytes(const Problem& p, int64_t filters, int64_t out_rows) {
  const int64_t run = single_channel_run(p, filters, out_rows);
  const int64_t filter_floats = filters * p.r * single_channel_filter_pitch(p);
  const int64_t bias_floats = (filters + 3) / 4 * 4;
  const int64_t strip_floats =
      single_channel_strip_rows(p, ceil_div(out_rows, run) * run) * single_channel_strip_pitch(p);
  return (filter_floats + bias_floats + strip_floats) * 4;
}

bool single_channel_column_pairs(const Problem& p, const TensorDesc& y) {
  const auto& ys = y.strides;
  return ys[3] == 1 && ys[2] % 2 == 0 && ys[1] % 2 == 0 && ys[0] % 2 == 0 && p.stride_w == 1 && p.dil_w == 1;
}

int single_channel_threads(const Problem& p, int64_t filters, int64_t out_rows) {
  const int64_t runs = ceil_div(out_rows, single_channel_run(p, filters, out_rows)) * p.q();
  const int64_t lanes = ceil_div(filters, kSingleChannelFiltersPerThread);
  return int(std::clamp<int64_t>(ceil_div(runs * lanes, 32) * 32, 64, kSingleChannelMaxThreads));
}

SingleChannelDivision plan_single_channel(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why,
                                          bool shape) {
  if (p.c_per_group() != 1)
    throw Error(Status::Unsupported, "algorithm: single_channel needs one input channel per group (C/G = 1), got " +
                                         std::to_string(p.c_per_group()));
  const int64_t M = p.k_per_group(), rs = p.r * p.s, rows_out = p.p(), cols_out = p.q();
  const int64_t wx = single_channel_strip_cols(p), nsm = hw.sm_count;
  const int64_t smem = single_channel_smem_budget(hw);
  const double n_fma = hw.n_fma();
  auto d_of = [&](int64_t filters, int64_t out_rows) { return single_channel_smem_bytes(p, filters, out_rows); };
  // A block of `filters` x `out_rows` and what follows from it: D, Th and the blocks per image and group.
  auto set_block = [&](SingleChannelDivision& d, int64_t filters, int64_t out_rows) {
    d.filters_per_block = int(filters);
    d.rows_per_block = int(out_rows);
    d.d_bytes = d_of(filters, out_rows);
    d.th = double(rs) * filters * out_rows * cols_out;
    d.blocks = ceil_div(M, filters) * ceil_div(rows_out, out_rows);
  };

  // Method 1: ceil(M/N_sm) filters per block; smallest P (pieces along y) whose D fits.
  SingleChannelDivision m1;
  m1.method = 1;
  m1.filters_per_block = int(ceil_div(M, nsm));
  bool m1_ok = false;
  for (int64_t P = 1; P <= rows_out; ++P) {
    const int64_t rows = ceil_div(rows_out, P);
    if (d_of(m1.filters_per_block, rows) <= smem) {
      m1.pieces = int(P);
      m1.rows_per_block = int(rows);
      m1_ok = true;
      break;
    }
  }
  // Method 2: ceil(P_out/N_sm) rows per block; smallest Q (pieces of the filters) whose D fits.
  SingleChannelDivision m2;
  m2.method = 2;
  m2.rows_per_block = int(ceil_div(rows_out, nsm));
  bool m2_ok = false;
  for (int64_t Q = 1; Q <= M; ++Q) {
    const int64_t f = ceil_div(M, Q);
    if (d_of(f, m2.rows_per_block) <= smem) {
      m2.pieces = int(Q);
      m2.filters_per_block = int(f);
      m2_ok = true;
      break;
    }
  }
  if (!m1_ok && !m2_ok)
    throw Error(Status::Unsupported, "algorithm: single_channel: no division fits " + std::to_string(smem / 1024) +
                                         " KB of shared memory (map rows too wide: " + std::to_string(wx) +
                                         " columns)");
  for (auto* m : {&m1, &m2}) set_block(*m, m->filters_per_block, m->rows_per_block);
  SingleChannelDivision best = !m2_ok || (m1_ok && m1.d_bytes <= m2.d_bytes) ? m1 : m2;
  std::ostringstream os;
  os << "single_channel method " << best.method << " (D1 = " << (m1_ok ? std::to_string(m1.d_bytes) : "-")
     << " B, D2 = " << (m2_ok ? std::to_string(m2.d_bytes) : "-") << " B; shared memory " << smem
     << " B): " << (best.method == 1 ? "P = " : "Q = ") << best.pieces << ", " << best.filters_per_block
     << " filters x " << best.rows_per_block << " rows per block, Th = " << best.th << " FMAs vs N_FMA = " << n_fma;
  why.push_back(os.str());
  if (best.th < n_fma) {
    // The map is too small to hide latency by prefetching within a block: refine the division until
    // the blocks together move at least V_s bytes, so the whole device keeps memory busy.
    best.vs_fallback = true;
    const double vs = hw.v_s();
    while (double(best.blocks) * best.d_bytes < vs && (best.rows_per_block > 1 || best.filters_per_block > 1)) {
      if (best.rows_per_block > 1)
        set_block(best, best.filters_per_block, ceil_div(best.rows_per_block, 2));
      else
        set_block(best, ceil_div(best.filters_per_block, 2), best.rows_per_block);
    }
    std::ostringstream v;
    v << "single_channel V_s fallback: Th < N_FMA, refined to " << best.filters_per_block << " filters x "
      << best.rows_per_block << " rows, " << best.blocks << " blocks x " << best.d_bytes << " B vs V_s = " << vs
      << " B";
    why.push_back(v.str());
  }
  if (shape && (best.rows_per_block < std::min<int64_t>(kShapedRows, rows_out) ||
                best.filters_per_block < std::min<int64_t>(kShapedMinFilters, M))) {
    // Note [single-channel block shape]: kShapedRows rows; the fewest equal filter groups whose
    // blocks (over every image and group) reach 3/4 of the SMs.
    const int64_t rows = std::min<int64_t>(kShapedRows, rows_out);
    const int64_t pieces = ceil_div(rows_out, rows) * p.n * p.groups;
    int64_t filters = M;
    while (filters > 1 && 4 * ceil_div(M, filters) * pieces < 3 * nsm) filters = ceil_div(filters, 2);
    if (d_of(filters, rows) <= smem) {
      best.shaped = true;
      set_block(best, filters, rows);
      std::ostringstream sh;
      sh << "single_channel block shape: reshaped to " << filters << " filters x " << rows << " rows, "
         << best.blocks * p.n * p.groups << " blocks for " << nsm << " SMs (D = " << best.d_bytes
         << " B, Th = " << best.th << " FMAs)";
      why.push_back(sh.str());
    }
  }
  best.run = single_channel_run(p, best.filters_per_block, best.rows_per_block);
  // Note [single-channel runs]: the strip covers whole runs; the planner's D is this layout.
  best.strip_rows = static_cast<int>(single_channel_strip_rows(p, ceil_div(best.rows_per_block, best.run) * best.run));
  best.strip_cols = static_cast<int>(single_channel_strip_cols(p));
  best.strip_pitch = static_cast<int>(single_channel_strip_pitch(p));
  best.filter_pitch = static_cast<int>(single_channel_filter_pitch(p));
  best.launch = {ceil_div(rows_out, best.rows_per_block), ceil_div(M, best.filters_per_block), p.n * p.groups,
                 single_channel_threads(p, best.filters_per_block, best.rows_per_block),
                 single_channel_smem_bytes(p, best.filters_per_block, best.rows_per_block)};
  if (best.launch.grid_z > 65535 || best.launch.grid_y > 65535)
    throw Error(Status::Unsupported, "n*groups: single_channel grid exceeds the launch limits");
  why.back() +=
      "; runs of " + std::to_string(best.run) + " rows, " + std::to_string(best.launch.threads) + " threads per block";
  return best;
}

}  // namespace mconv::detail
