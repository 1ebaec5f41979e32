#include "single_channel_planner.hpp"

#include <algorithm>
#include <sstream>

#include "mconv/types.hpp"

namespace mconv::detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

int64_t single_channel_smem_budget(const HardwareModel& hw) {
  return std::min(hw.smem_per_sm / 2, hw.smem_per_block_optin);
}

int64_t single_channel_strip_cols(const Problem& p) {
  return (p.q() - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1;
}
int64_t single_channel_strip_rows(const Problem& p, int64_t out_rows) {
  return (out_rows - 1) * p.stride_h + (p.r - 1) * p.dil_h + 1;
}

SingleChannelDivision plan_single_channel(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why) {
  if (p.c_per_group() != 1)
    throw Error(Status::Unsupported, "algorithm: single_channel needs one input channel per group (C/G = 1), got " +
                                         std::to_string(p.c_per_group()));
  const int64_t M = p.k_per_group(), rs = p.r * p.s, rows_out = p.p(), cols_out = p.q();
  const int64_t wx = single_channel_strip_cols(p), nsm = hw.sm_count;
  const int64_t smem = single_channel_smem_budget(hw);
  const double n_fma = hw.n_fma();
  auto d_of = [&](int64_t filters, int64_t out_rows) {
    return (rs * filters + single_channel_strip_rows(p, out_rows) * wx) * 4;
  };
  auto th_of = [&](int64_t filters, int64_t out_rows) { return double(rs) * filters * out_rows * cols_out; };

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
  for (auto* m : {&m1, &m2}) {
    m->d_bytes = d_of(m->filters_per_block, m->rows_per_block);
    m->th = th_of(m->filters_per_block, m->rows_per_block);
    m->blocks = ceil_div(M, m->filters_per_block) * ceil_div(rows_out, m->rows_per_block);
  }
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
        best.rows_per_block = int(ceil_div(best.rows_per_block, 2));
      else
        best.filters_per_block = int(ceil_div(best.filters_per_block, 2));
      best.d_bytes = d_of(best.filters_per_block, best.rows_per_block);
      best.th = th_of(best.filters_per_block, best.rows_per_block);
      best.blocks = ceil_div(M, best.filters_per_block) * ceil_div(rows_out, best.rows_per_block);
    }
    std::ostringstream v;
    v << "single_channel V_s fallback: Th < N_FMA, refined to " << best.filters_per_block << " filters x "
      << best.rows_per_block << " rows, " << best.blocks << " blocks x " << best.d_bytes << " B vs V_s = " << vs
      << " B";
    why.push_back(v.str());
  }
  return best;
}

}  // namespace mconv::detail
