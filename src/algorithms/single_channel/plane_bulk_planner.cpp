// The bulk plane-stream planner (Note [plane bulk]): chunks, segments and the resident wave.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "../common/host_math.hpp"
#include "mconv/types.hpp"
#include "planner.hpp"

namespace mconv::detail {
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

PlaneBulkChunkElements plane_bulk_chunk_elements(const Problem& p, int64_t planes, int64_t rows, int elem_bytes) {
  const int64_t in_rows =
      plane_bulk_whole_planes(p, planes, rows) ? p.h : std::min<int64_t>((rows - 1) * p.stride_h + p.r, p.h);
  const int64_t slack = 16 / elem_bytes - 1;
  return {planes * in_rows * p.w + slack, planes * rows * p.q() + slack, elem_bytes};
}

int64_t plane_bulk_smem_bytes(const PlaneBulkChunkElements& f) {
  return (kPlaneBulkGuard + kPlaneBulkStages * plane_bulk_stage_elements(f.in, f.out, 16 / f.elem_bytes)) *
         f.elem_bytes;
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
  // A block's shared memory (x's and y's dtype), with its barriers.
  const int esz = dtype_size(x.dtype);
  auto bytes_of = [&](int64_t pb, int64_t rows) {
    return plane_bulk_smem_bytes(plane_bulk_chunk_elements(p, pb, rows, esz)) + kPlaneBulkBarrierBytes;
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
  // 2-byte elements: chunks of at least two passes, so that a block's copies move about the bytes of
  // fp32's one-pass chunks (half the bytes in flight left HBM idle: PERFORMANCE.md).
  const int64_t min_items = esz == 2 ? T : 0;
  const Candidate* best = nullptr;
  int blocks_per_sm = max_blocks;
  for (int b = max_blocks; b >= std::max(1, max_blocks / 2) && !best; --b) {
    cands = candidates(share(b));
    blocks_per_sm = b;
    for (const auto& c : cands)
      if (c.fill >= 0.85 && c.items > min_items && (!best || c.items < best->items)) best = &c;
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
  const int64_t grid_blocks = std::min<int64_t>(d.chunks, int64_t(hw.sm_count) * blocks_per_sm);
  std::ostringstream os;
  os << "single_channel bulk plane stream (K/G = 1, packed rows" << (packed ? " and planes" : "") << "): " << planes
     << " planes of " << P << "x" << p.q() << " outputs in items of " << run << " x " << d.segment << " outputs; "
     << d.planes_per_chunk << " plane(s) x " << d.rows_per_chunk << " rows per chunk = " << best->items << " items for "
     << T << " threads (fill " << std::lround(d.fill * 100) << "%), " << d.chunks
     << " chunks walked by one resident wave of " << grid_blocks << " blocks (" << blocks_per_sm
     << " per SM) with 2 buffers, D = " << d.d_bytes << " B per block";
  why.push_back(os.str());
  d.run = plane_bulk_run(p.r, p.stride_h);
  d.bands = ceil_div(p.p(), d.rows_per_chunk);
  const PlaneBulkChunkElements elements = plane_bulk_chunk_elements(p, d.planes_per_chunk, d.rows_per_chunk, esz);
  d.in_elements = elements.in;
  d.out_elements = elements.out;
  d.read_once = plane_bulk_whole_planes(p, d.planes_per_chunk, d.rows_per_chunk);  // Note [bulk read-once inputs]
  d.launch = {grid_blocks, 1, 1, kPlaneStreamThreads, plane_bulk_smem_bytes(elements)};
  return d;
}

}  // namespace mconv::detail
