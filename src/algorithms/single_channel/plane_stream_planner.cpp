// The plane-stream planner (Note [plane stream]): chunks of whole planes or bands of rows.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "../common/host_math.hpp"
#include "mconv/types.hpp"
#include "planner.hpp"

namespace mconv::detail {
namespace {

// Rows and left pad of the layout, and the narrowest row that holds the input and every read
// (elements of `vector` per 16 bytes).
PlaneStreamLayout base_layout(const Problem& p, int rows_per_block, int vector, int64_t& min_pitch) {
  PlaneStreamLayout l;
  const int64_t run_rows = round_up(rows_per_block, plane_stream_run(p));  // every thread computes a full run
  l.rows = int((run_rows - 1) * p.stride_h + p.r);
  l.lpad = int(round_up(p.pad_w, vector));
  const int64_t last_read = l.lpad - p.pad_w + (p.q() - 1) * p.stride_w + p.s;  // one past the last column read
  min_pitch = std::max<int64_t>(l.lpad + p.w, last_read);
  return l;
}

}  // namespace

PlaneStreamLayout plane_stream_layout(const Problem& p, int rows_per_block, int elem_bytes) {
  const int vector = 16 / elem_bytes;
  int64_t min_pitch = 0;
  PlaneStreamLayout l = base_layout(p, rows_per_block, vector, min_pitch);
  l.pitch = int(round_up(min_pitch, vector));
  l.plane = l.rows * l.pitch;
  if (p.w % vector == 0) return l;  // 16-byte copies: rows and planes stay 16-byte aligned
  // Note [plane stream banks]: a warp's 32 items are (plane, run, column) with the column fastest;
  // with Q < 32 one warp reads several runs and planes, which land on the same banks when the run
  // and plane strides are multiples of 32 apart (ncu: 2-way conflicts on every input read at 7x7).
  // Try the 32 pitches and 32 plane strides above the minimum, at most 25% above the aligned
  // layout's size; keep the pair whose first read spreads the warp over the most banks (then the
  // smallest). Larger planes cost planes per block: uncapped, mbv2_dw_c576_h14 went from 9 planes
  // to 6 and ran 6% slower, while c576_h14_s2 ran 6% faster (H100). 2-byte elements step both by 2,
  // so that rows of even W stay aligned for 4-byte copies; two lanes reading one 4-byte word do
  // not conflict, so a bank's load is the distinct words it serves.
  const int run = plane_stream_run(p);
  const int64_t runs = (rows_per_block + run - 1) / run;
  const int64_t cap = l.plane, step = elem_bytes == 2 ? 2 : 1;
  int best = 33;
  for (int64_t pitch = round_up(min_pitch, step); pitch < min_pitch + 32 * step; pitch += step)
    for (int64_t plane = l.rows * pitch; plane < l.rows * pitch + 32 * step && plane * 4 <= cap * 5; plane += step) {
      int64_t words[32];  // the distinct 4-byte words the warp reads
      int distinct = 0;
      for (int64_t it = 0; it < 32; ++it) {
        const int64_t q = it % p.q(), rest = it / p.q(), r = rest % runs, pl = rest / runs;
        const int64_t word = (pl * plane + r * run * p.stride_h * pitch + q * p.stride_w) * elem_bytes / 4;
        if (std::find(words, words + distinct, word) == words + distinct) words[distinct++] = word;
      }
      int count[32] = {};
      int worst = 0;
      for (int j = 0; j < distinct; ++j) worst = std::max(worst, ++count[words[j] % 32]);
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
  // A block's buffer: its planes in x's dtype, then their fp32 filters, 16-byte aligned.
  const int esz = dtype_size(x.dtype);
  auto filter_offset = [&](int64_t pb, const PlaneStreamLayout& l) { return round_up(pb * l.plane * esz, 16); };
  auto d_of = [&](int64_t pb, int64_t rows) {
    return round_up(filter_offset(pb, plane_stream_layout(p, int(rows), esz)) + pb * p.r * p.s * 4, 16);
  };
  const int64_t wave = int64_t(hw.sm_count) * blocks_per_sm;
  int64_t pb = 1, rows = P;
  if (th_row * P >= d.th_target)
    rows = std::min(P, round_up(int64_t(std::ceil(d.th_target / th_row)), V));
  else
    pb = std::min(planes, int64_t(std::ceil(d.th_target / (th_row * P))));
  // Th is the floor. Above it, larger chunks measured faster (H100, depthwise suite, one run each): one
  // resident wave (or as few waves as shared memory allows) ran 1.0-1.25x faster than chunks of Th
  // alone, and 2 x Th fell in between (docs/PERFORMANCE.md). Fewer chunks: less halo, fewer block starts.
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
  d.layout = plane_stream_layout(p, d.rows_per_block, esz);
  d.d_bytes = d_of(pb, rows);
  d.th = th_row * rows * pb;
  d.blocks = blocks_of();
  std::ostringstream os;
  os << "single_channel plane stream (K/G = 1): " << planes << " planes of " << P << "x" << p.q()
     << " outputs; target Th = N_FMA / " << blocks_per_sm << " resident blocks = " << d.th_target << " FMAs; "
     << d.planes_per_block << " plane(s) x " << d.rows_per_block << " rows per block, Th = " << d.th
     << ", D = " << d.d_bytes << " B (budget " << budget << " B), " << d.blocks << " blocks";
  why.push_back(os.str());
  if (d.blocks > INT32_MAX) throw Error(Status::Unsupported, "n*groups: more plane-stream chunks than 2^31");
  d.run = V;
  d.bands = (P + rows - 1) / rows;
  d.filter_offset = static_cast<int>(filter_offset(pb, d.layout));
  d.launch = {d.blocks, 1, 1, kPlaneStreamThreads, d.d_bytes};
  return d;
}

}  // namespace mconv::detail
