#include "single_channel_planner.hpp"

#include <algorithm>
#include <cmath>
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
  why.back() += "; runs of " + std::to_string(single_channel_run(p, best.filters_per_block, best.rows_per_block)) +
                " rows, " + std::to_string(single_channel_threads(p, best.filters_per_block, best.rows_per_block)) +
                " threads per block";
  return best;
}

}  // namespace mconv::detail

namespace mconv::detail {
namespace {

int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

// Rows and left pad of the layout, and the narrowest row that holds the input and every read.
PlaneStreamLayout base_layout(const Problem& p, int rows_per_block, int64_t& min_pitch) {
  PlaneStreamLayout l;
  const int64_t run_rows = round_up(rows_per_block, plane_stream_run(p));  // every thread computes a full run
  l.rows = int((run_rows - 1) * p.stride_h + p.r);
  l.lpad = int(round_up(p.pad_w, 4));
  const int64_t last_read = l.lpad - p.pad_w + (p.q() - 1) * p.stride_w + p.s;  // one past the last column read
  min_pitch = std::max<int64_t>(l.lpad + p.w, last_read);
  return l;
}

}  // namespace

PlaneStreamLayout planned_plane_stream_layout(const Problem& p, const TileChoice& tile) {
  int64_t min_pitch = 0;
  PlaneStreamLayout l = base_layout(p, tile.block_rows, min_pitch);
  l.pitch = tile.block_pitch;
  l.plane = tile.block_plane_floats;
  return l;
}

PlaneStreamLayout plane_stream_layout(const Problem& p, int rows_per_block) {
  int64_t min_pitch = 0;
  PlaneStreamLayout l = base_layout(p, rows_per_block, min_pitch);
  l.pitch = int(round_up(min_pitch, 4));
  l.plane = l.rows * l.pitch;
  if (p.w % 4 == 0) return l;  // 16-byte copies: rows and planes stay 16-byte aligned
  // Note [plane stream banks]: a warp's 32 items are (plane, run, column) with the column fastest;
  // with Q < 32 one warp reads several runs and planes, which land on the same banks when the run
  // and plane strides are multiples of 32 apart (ncu: 2-way conflicts on every input read at 7x7).
  // Try the 32 pitches and 32 plane strides above the minimum, at most 25% above the aligned
  // layout's size; keep the pair whose first read spreads the warp over the most banks (then the
  // smallest). Larger planes cost planes per block: uncapped, mbv2_dw_c576_h14 went from 9 planes
  // to 6 and ran 6% slower, while c576_h14_s2 ran 6% faster (H100).
  const int run = plane_stream_run(p);
  const int64_t runs = (rows_per_block + run - 1) / run;
  const int64_t cap = l.plane;
  int best = 33;
  for (int64_t pitch = min_pitch; pitch < min_pitch + 32; ++pitch)
    for (int64_t plane = l.rows * pitch; plane < l.rows * pitch + 32 && plane * 4 <= cap * 5; ++plane) {
      int count[32] = {};
      int worst = 0;
      for (int64_t it = 0; it < 32; ++it) {
        const int64_t q = it % p.q(), rest = it / p.q(), r = rest % runs, pl = rest / runs;
        const int64_t addr = pl * plane + r * run * p.stride_h * pitch + q * p.stride_w;
        worst = std::max(worst, ++count[addr % 32]);
      }
      if (worst < best || (worst == best && plane < l.plane)) {
        best = worst;
        l.pitch = int(pitch);
        l.plane = int(plane);
      }
    }
  return l;
}

std::string plane_stream_unsupported(const Problem& p, const TensorDesc& x) {
  if (p.c_per_group() != 1 || p.k_per_group() != 1)
    return "plane stream needs C/G = 1 and K/G = 1, got " + std::to_string(p.c_per_group()) + " and " +
           std::to_string(p.k_per_group());
  if (p.r != p.s || (p.r != 1 && p.r != 3 && p.r != 5 && p.r != 7))
    return "plane stream runs square 1, 3, 5, 7 filters, got " + std::to_string(p.r) + "x" + std::to_string(p.s);
  if (p.stride_h != 1 && p.stride_h != 2) return "plane stream runs stride_h 1 or 2, got " + std::to_string(p.stride_h);
  if (p.dil_h != 1 || p.dil_w != 1) return "plane stream runs undilated filters";
  if (x.strides[3] != 1) return "plane stream needs contiguous input rows (x W stride 1)";
  return "";
}

PlaneStreamDivision plan_plane_stream(const Problem& p, const TensorDesc& x, const HardwareModel& hw,
                                      std::vector<std::string>& why) {
  if (const std::string no = plane_stream_unsupported(p, x); !no.empty())
    throw Error(Status::Unsupported, "algorithm: single_channel: " + no);
  const int V = plane_stream_run(p);
  const int64_t planes = p.n * p.groups, P = p.p();
  const int blocks_per_sm =
      std::max(1, std::min(hw.max_threads_per_sm / kPlaneStreamThreads, plane_stream_resident_blocks(p.r)));
  const int64_t budget = hw.smem_per_sm / blocks_per_sm - kRuntimeSmemPerBlock;
  const double th_row = double(p.r * p.s * p.q());  // FMAs of one output row of one plane
  PlaneStreamDivision d;
  d.th_target = hw.n_fma() / blocks_per_sm;
  auto d_of = [&](int64_t pb, int64_t rows) {
    return pb * (plane_stream_layout(p, int(rows)).plane_floats() + p.r * p.s) * 4;
  };
  const int64_t wave = int64_t(hw.sm_count) * blocks_per_sm;
  int64_t pb = 1, rows = P;
  if (th_row * P >= d.th_target)
    rows = std::min(P, round_up(int64_t(std::ceil(d.th_target / th_row)), V));
  else
    pb = std::min(planes, int64_t(std::ceil(d.th_target / (th_row * P))));
  // Th is the floor. Above it, larger chunks measured faster (H100, depthwise suite, one run each): one
  // resident wave (or as few waves as shared memory allows) ran 1.0-1.25x faster than chunks of Th
  // alone, and 2 x Th fell in between (bench/NOTES.md). Fewer chunks: less halo, fewer block starts.
  if (rows == P)
    pb = std::max(pb, (planes + wave - 1) / wave);
  else
    rows = std::min(P, std::max(rows, round_up((planes * P + wave - 1) / wave, V)));
  while (d_of(pb, rows) > budget && pb > 1) pb = (pb + 1) / 2;
  while (d_of(pb, rows) > budget && rows > V) rows = std::max<int64_t>(V, round_up(rows / 2, V));
  // A thread item is a run of V rows of one column: a block whose items spill just past a multiple
  // of its threads runs a nearly empty last pass. Drop up to a quarter of the planes to avoid it
  // (mbv2_dw_c960_h7: 20 planes = 140 items for 128 threads -> 18 planes = 126 items).
  const int64_t plane_items = (P + V - 1) / V * p.q();
  if (pb > 1 && pb * plane_items > kPlaneStreamThreads) {
    const int64_t fit = pb * plane_items / kPlaneStreamThreads * kPlaneStreamThreads / plane_items;
    if (fit >= 1 && fit * 4 >= pb * 3) pb = fit;
  }
  if (d_of(pb, rows) > hw.smem_per_block_optin)
    throw Error(Status::Unsupported, "algorithm: single_channel: plane stream needs " + std::to_string(d_of(pb, rows)) +
                                         " B of shared memory for " + std::to_string(V) + " output rows of width " +
                                         std::to_string(p.q()) + ", more than a block can have");
  auto blocks_of = [&] { return ((planes + pb - 1) / pb) * ((P + rows - 1) / rows); };
  // Too few blocks to give every SM its resident set (within 10%): split further (the paper's V_s
  // refinement).
  while (blocks_of() * 10 < wave * 9 && (pb > 1 || rows > V)) {
    if (pb > 1)
      pb = (pb + 1) / 2;
    else
      rows = std::max<int64_t>(V, round_up((rows + 1) / 2, V));
  }
  if ((P + rows - 1) / rows > 65535)
    throw Error(Status::Unsupported, "algorithm: single_channel: plane stream needs more than 65535 bands of rows");
  d.planes_per_block = int(pb);
  d.rows_per_block = int(rows);
  d.layout = plane_stream_layout(p, d.rows_per_block);
  d.d_bytes = d_of(pb, rows);
  d.th = th_row * rows * pb;
  d.blocks = blocks_of();
  std::ostringstream os;
  os << "single_channel plane stream (K/G = 1): " << planes << " planes of " << P << "x" << p.q()
     << " outputs; target Th = N_FMA / " << blocks_per_sm << " resident blocks = " << d.th_target << " FMAs; "
     << d.planes_per_block << " plane(s) x " << d.rows_per_block << " rows per block, Th = " << d.th
     << ", D = " << d.d_bytes << " B (budget " << budget << " B), " << d.blocks << " blocks";
  why.push_back(os.str());
  return d;
}

int plane_bulk_segment(const Problem& p) {
  const int64_t Q = p.q();
  return ceil_div(Q, 4) * 4 - Q < ceil_div(Q, 7) * 7 - Q ? 4 : 7;
}

namespace {

/// Whether the N*G planes of `t` lie packed, one after the other, in its memory order.
bool planes_packed(const Problem& p, const TensorDesc& t, int64_t rows, int64_t cols) {
  const auto& st = t.strides;
  if (st[3] != 1 || st[2] != cols) return false;
  const bool inner_is_c = planes_channel_inner(t);
  const int64_t inner = inner_is_c ? st[1] : st[0], outer = inner_is_c ? st[0] : st[1];
  return inner == rows * cols && outer == inner * (inner_is_c ? p.groups : p.n);
}

}  // namespace

PlaneBulkChunkFloats plane_bulk_chunk_floats(const Problem& p, int64_t planes, int64_t rows) {
  const int64_t in_rows =
      plane_bulk_whole_planes(p, planes, rows) ? p.h : std::min<int64_t>((rows - 1) * p.stride_h + p.r, p.h);
  return {planes * in_rows * p.w + 3, planes * rows * p.q() + 3};
}

int64_t plane_bulk_smem_bytes(const PlaneBulkChunkFloats& f) {
  return (kPlaneBulkGuard + kPlaneBulkStages * plane_bulk_stage_floats(f.in, f.out)) * 4;
}

bool plane_bulk_preferred(const Problem& p) {
  return p.stride_h == 1 || p.q() <= 7 || (p.stride_h == 2 && p.q() <= 14 && p.w % 2 == 0);
}

std::string plane_bulk_unsupported(const Problem& p, const TensorDesc& x, const TensorDesc& y) {
  if (std::string no = plane_stream_unsupported(p, x); !no.empty()) return no;
  if (p.stride_w != p.stride_h)
    return "bulk plane stream needs stride_w = stride_h, got " + std::to_string(p.stride_w) + " and " +
           std::to_string(p.stride_h);
  if (x.strides[2] != p.w) return "bulk plane stream needs packed input rows (x H stride = W)";
  if (y.strides[3] != 1 || y.strides[2] != p.q())
    return "bulk plane stream needs packed output rows (y W stride 1, H stride = Q)";
  return "";
}

PlaneBulkDivision plan_plane_bulk(const Problem& p, const TensorDesc& x, const TensorDesc& y, const HardwareModel& hw,
                                  std::vector<std::string>& why) {
  if (const std::string no = plane_bulk_unsupported(p, x, y); !no.empty())
    throw Error(Status::Unsupported, "algorithm: single_channel: " + no);
  constexpr int64_t T = kPlaneStreamThreads;
  PlaneBulkDivision d;
  d.segment = plane_bulk_segment(p);
  const int64_t planes = p.n * p.groups, P = p.p(), row_items = ceil_div(p.q(), d.segment);
  const int64_t run = plane_bulk_run(p.r, p.stride_h);
  const int max_blocks = std::max(1, std::min(hw.max_threads_per_sm / int(T), plane_bulk_resident_blocks(p.r)));
  // A block's shared memory, with its barriers.
  auto bytes_of = [&](int64_t pb, int64_t rows) {
    return plane_bulk_smem_bytes(plane_bulk_chunk_floats(p, pb, rows)) + kPlaneBulkBarrierBytes;
  };
  // Candidates: pb whole planes (packed x only), or bands of `rows` output rows of one plane. fill
  // = the items of the whole problem over the thread slots of the passes its chunks run.
  struct Candidate {
    int64_t pb, rows, items, chunks;
    double fill;
  };
  // Whole planes need both tensors' planes packed, in the same order (one range of x, one of y).
  const bool packed = planes_packed(p, x, p.h, p.w) && planes_packed(p, y, p.p(), p.q()) &&
                      planes_channel_inner(x) == planes_channel_inner(y);
  auto candidates = [&](int64_t limit) {
    std::vector<Candidate> cands;
    auto consider = [&](int64_t pb, int64_t rows) {
      if (bytes_of(pb, rows) > limit) return;
      const int64_t items = pb * ceil_div(rows, run) * row_items, bands = ceil_div(P, rows);
      const int64_t chunks = ceil_div(planes, pb) * bands;
      const double fill = double(planes * P * row_items) / double(chunks * ceil_div(items, T) * T * run);
      cands.push_back({pb, rows, items, chunks, fill});
    };
    for (int64_t rows = 1; rows <= P && ceil_div(rows, run) * row_items <= 4 * T; ++rows) consider(1, rows);
    if (packed && ceil_div(P, run) * row_items <= 4 * T)
      for (int64_t pb = 2; pb <= planes && pb * ceil_div(P, run) * row_items <= 4 * T; ++pb) consider(pb, P);
    if (cands.empty()) consider(1, 1);  // rows wider than 4 passes: one row per chunk, looping
    return cands;
  };
  // The most resident blocks (down to half the registers' limit) at which some chunk fills 85% of
  // its passes, the smallest such chunk; else the best fill at the registers' limit (stride 2 reads
  // 4x the bytes per item, so its chunks outgrow a twelfth of the SM's shared memory first).
  auto share = [&](int blocks) {
    return std::min(hw.smem_per_sm / blocks - kRuntimeSmemPerBlock, hw.smem_per_block_optin);
  };
  std::vector<Candidate> cands;
  const Candidate* best = nullptr;
  int blocks_per_sm = max_blocks;
  for (int b = max_blocks; b >= std::max(1, max_blocks / 2) && !best; --b) {
    cands = candidates(share(b));
    blocks_per_sm = b;
    for (const auto& c : cands)
      if (c.fill >= 0.85 && (!best || c.items < best->items)) best = &c;
  }
  if (!best) {
    blocks_per_sm = max_blocks;
    cands = candidates(share(max_blocks));
    for (const auto& c : cands)  // the best fill, the smaller chunk on a tie
      if (!best || c.fill > best->fill + 1e-9) best = &c;
  }
  for (int b = max_blocks; !best && b >= 1; --b) {  // rows too wide for a share: fewer blocks per SM
    blocks_per_sm = b;
    cands = candidates(share(b));
    if (!cands.empty()) best = &cands.front();
  }
  if (!best)
    throw Error(Status::Unsupported, "algorithm: single_channel: bulk plane stream needs " +
                                         std::to_string(bytes_of(1, 1)) + " B of shared memory for one row of " +
                                         std::to_string(p.w) + " inputs, more than a block can have");
  if (ceil_div(P, best->rows) > 65535)
    throw Error(Status::Unsupported, "algorithm: single_channel: bulk plane stream needs more than 65535 bands");
  if (best->chunks > INT32_MAX) throw Error(Status::Unsupported, "n*groups: more bulk plane-stream chunks than 2^31");
  d.planes_per_chunk = int(best->pb);
  d.rows_per_chunk = int(best->rows);
  d.d_bytes = bytes_of(best->pb, best->rows);
  d.fill = best->fill;
  d.chunks = best->chunks;
  d.blocks_per_sm = blocks_per_sm;
  d.grid_blocks = std::min<int64_t>(d.chunks, int64_t(hw.sm_count) * blocks_per_sm);
  std::ostringstream os;
  os << "single_channel bulk plane stream (K/G = 1, packed rows" << (packed ? " and planes" : "") << "): " << planes
     << " planes of " << P << "x" << p.q() << " outputs in items of " << run << " x " << d.segment << " outputs; "
     << d.planes_per_chunk << " plane(s) x " << d.rows_per_chunk << " rows per chunk = " << best->items << " items for "
     << T << " threads (fill " << std::lround(d.fill * 100) << "%), " << d.chunks
     << " chunks walked by one resident wave of " << d.grid_blocks << " blocks (" << blocks_per_sm
     << " per SM) with 2 buffers, D = " << d.d_bytes << " B per block";
  why.push_back(os.str());
  return d;
}

}  // namespace mconv::detail
