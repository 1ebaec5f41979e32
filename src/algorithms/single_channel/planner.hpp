// The single-channel planner of the stride-fixed-block paper, section 3.1 (technique 4).
//
// Input: one channel per group, M = K/G filters of R x S, map Wx x Wy (= W x H; the paper's K x K
// filter generalised to R x S). Two ways to share the work among N_sm SMs:
//   Method 1: filters split over the SMs (ceil(M/N_sm) each), the map split into P pieces along y:
//     D1 = (R*S*ceil(M/N_sm) + (ceil(Wy/P) + R - 1)*Wx) * 4,  Th1 = R*S*ceil(M/N_sm)*ceil(Wy/P)*Wx
//   Method 2: the map split over the SMs along y, the filters into Q pieces:
//     D2 = (R*S*ceil(M/Q) + (ceil(Wy/N_sm) + R - 1)*Wx) * 4,  Th2 = R*S*ceil(M/Q)*ceil(Wy/N_sm)*Wx
// P (Q) is the smallest integer with D <= the shared memory of one block and Th >= N_FMA; the
// method with the smaller D is kept. If even then Th < N_FMA, the map is too small for prefetching
// to hide latency: the division is refined until the data all blocks move together is >= V_s.
// (mconv: rows are output rows; D counts the input rows a strip of output rows needs at the
// problem's stride and dilation, the padded width, and the kernel's own layout: whole runs of rows,
// filter rows padded to 4 floats, one bias value per filter; Note [single-channel runs].)
#pragma once

#include <string>
#include <vector>

#include "../common/host_math.hpp"
#include "mconv/division.hpp"
#include "mconv/hardware.hpp"
#include "mconv/plan.hpp"
#include "mconv/problem.hpp"

namespace mconv::detail {

/// Shared-memory budget of one block: the paper runs 2 blocks per SM.
int64_t single_channel_smem_budget(const HardwareModel& hw);

/// Input columns of a strip (padded width) and input rows of `out_rows` output rows.
int64_t single_channel_strip_cols(const Problem& p);
int64_t single_channel_strip_rows(const Problem& p, int64_t out_rows);

// Note [single-channel runs]
// The kernel (strip_kernel.cuh) gives each thread a vertical run of output rows
// in one column and walks the block's filters with it: the run's input window (run-1)*stride + R
// rows x S columns is read from the strip into registers once, and each filter then costs R*S*run
// FMAs, R row reads of its taps (16 bytes at a time, the same address for the whole warp) and `run`
// stores, each coalesced across the warp's neighbouring columns. The outputs stream out filter by
// filter; no output is staged. Filter rows are padded to a multiple of 4 floats for the 16-byte reads.
// Note [single-channel column pairs]
// Where y's rows allow 8-byte stores (packed rows, even strides) and the window is contiguous
// (stride_w 1, dil_w 1), a run is 2 columns wide: each filter's taps then serve twice the outputs,
// the window grows by one column only, and a warp's row store is one 8-byte store per lane (256
// bytes). On the H100 (single_channel suite, forced) it was faster on 15 of 18 layers:
// single_h1024_m32_k3 84.7 -> 68.3 us, h112_m128_k5 8.7 -> 7.3, h224_m64_k3 8.6 -> 7.8 (within
// 4% on the other three).
// Note [single-channel run length]
// Longer runs load fewer taps per FMA, but on the H100 they often lost (single_channel suite, forced,
// graph-timed, us, with runs of at most 4 / 2 / 1 rows; blocks of filters x rows):
//   3x3: h28 (4 x 26) 4.0 / 3.8 / 3.9, h56 (2 x 54) 5.5 / 5.3 / 6.0, h512 (32 x 4) 15.3 / 14.4 / 15.1,
//        h1024 (32 x 8) 68.1 / 63.5 / 57.3
//   5x5: h28 (4 x 24) 3.8 / 3.8 / 4.1, h56 (2 x 52) 5.7 / 6.4 / 7.6, h512 (32 x 4) 15.6 / 16.1 / 19.6,
//        h1024 (32 x 8) 66.6 / 61.6 / 67.4
//   1x1: h512 (32 x 4) 14.0 / 13.7 / 13.5, h1024 (32 x 8) 47.0 / 47.0 / 46.9
// (the other layers' blocks have 1 or 2 rows). So filters of up to 9 taps take runs of at most 2
// rows, larger ones 4, and blocks of 32+ filters x 8+ rows (the 1024x1024 maps) half that up to 25
// taps. ncu on h1024 3x3 with runs of 4 showed the warps waiting on long scoreboard for 38% of their
// cycles, at ~1 L2 store request per 10 cycles per SM; why the shorter runs store faster there was
// not measured, so the rule holds only what was measured.
/// Whether y's layout and the problem allow column pairs (the launcher also asks for y aligned for
/// a store of two elements).
bool single_channel_column_pairs(const Problem& p, const TensorDesc& y);
/// Whether division `d` leaves every output reloading its taps: runs of one row without column pairs
/// on filters of 25+ taps. Auto then keeps the layer off the strip kernel (the implicit GEMM measured
/// faster there: single_h112_m128_k5 before column pairs, 10.2 us against 8.7).
inline bool single_channel_reloads_taps(const Problem& p, const SingleChannelDivision& d, bool pairs) {
  return d.run == 1 && !pairs && p.r * p.s >= 25;
}

/// Whether the kernel holds a run's input window in registers (its size-constant instantiations):
/// a square 1, 3, 5 or 7 filter, stride_h 1 or 2, dil_h 1. Other shapes read the strip per tap.
bool single_channel_register_window(const Problem& p);
/// Floats of the largest register window: 7x7 at stride 2 with runs of 4 rows and column pairs
/// (13 x 8 = 104 floats) spilled 20 bytes at the 128 registers of the 512-thread launch bound
/// (ptxas, sm_90a); 7x7 at stride 1 (10 x 8 = 80) and runs of 2 at stride 2 (9 x 8 = 72) did not.
inline constexpr int kSingleChannelWindowFloats = 96;
/// Floats of a register window with column pairs: (run - 1) * stride_h + R rows x S + 1 columns.
constexpr int64_t single_channel_window_floats(int64_t run, int64_t stride_h, int64_t r, int64_t s) {
  return ((run - 1) * stride_h + r) * (s + 1);
}
/// The longest run the kernel takes for `p` in blocks of `filters_per_block` x `rows_per_block`
/// (Note [single-channel run length]): 2 rows for filters of at most 9 taps, 4 for larger ones, and
/// half that for up to 25 taps in blocks of 32 or more filters and 8 or more rows; and halved until
/// a register window fits kSingleChannelWindowFloats.
int single_channel_longest_run(const Problem& p, int64_t filters_per_block, int64_t rows_per_block);
/// Rows of a run: the longest of 4, 2, 1 up to single_channel_longest_run that idles at most a
/// quarter of the block's computed rows.
int single_channel_run(const Problem& p, int64_t filters_per_block, int64_t rows_per_block);
/// Floats of one strip row in shared memory: its columns rounded up to 4 (16-byte copies).
int64_t single_channel_strip_pitch(const Problem& p);
/// Floats of one filter row in shared memory: S rounded up to 4.
int64_t single_channel_filter_pitch(const Problem& p);
/// Shared memory of one block: filters (padded rows), their bias values and the strip of the
/// block's runs (rows rounded up to whole runs). The planner's D.
int64_t single_channel_smem_bytes(const Problem& p, int64_t filters, int64_t out_rows);
/// Threads of a block: one per run and kSingleChannelFiltersPerThread filters, 64 to 512 (the
/// launch bound). A thread's window then serves at least 4 filters where the block has them: on the
/// H100, single_h56_m256_k1 (16 filters x 56 columns per block) took 4.6 us in blocks of 256 threads
/// and 6.5 us in blocks of 512.
int single_channel_threads(const Problem& p, int64_t filters, int64_t out_rows);
inline constexpr int kSingleChannelMaxThreads = 512;
inline constexpr int kSingleChannelFiltersPerThread = 4;

// Note [single-channel block shape]
// The paper's division can leave blocks the kernel cannot use well: method 2 on maps of fewer than
// 4 x N_sm output rows gives blocks of 1 or 2 rows (no room for a run of 4 rows), and method 1 on
// many filters gives ceil(M/N_sm) = 2-4 filters per block (a thread's window then serves 1 or 2
// filters). Where the division has fewer than kShapedRows rows or kShapedMinFilters filters per
// block, mconv reshapes it: blocks of kShapedRows rows, and the filters halved until the grid (every
// image and group) has at least 3/4 of N_sm blocks, about one per SM as in the paper's method 2.
// Fewer blocks leave SMs idle; more, smaller ones lose the window's reuse or, at 5x5 with runs of 4
// (one resident 512-thread block per SM at 100 registers), need a second wave.
// Measured on the H100 (single_channel suite, forced single_channel, graph-timed, us, the paper's
// division -> reshaped, one device call):
//   28x28, 512 filters:  1x1 4x7 3.27 -> 32x4 2.83, 3x3 4x26 3.62 -> 32x4 3.23, 5x5 4x24 3.80 -> 16x4 3.37
//   56x56, 256:          1x1 16x1 4.12 -> 32x4 3.64, 3x3 2x54 5.28 -> 32x4 4.33, 5x5 2x52 5.70 -> 32x4 4.61
//   112x112, 128:        1x1 32x1 5.02 -> 32x4 4.51, 3x3 128x1 5.56 -> 32x4 5.30, 5x5 128x1 7.32 -> 32x4 6.30
//   224x224, 64:         1x1 64x1 6.82 -> 32x4 6.62, 3x3 64x2 7.82 -> 32x4 7.62, 5x5 64x2 9.63 -> 32x4 8.76
// A sweep of 12-24 shapes per layer (another call) found these within 5% of the best shape, except
// 56x56: 3x3 8 x 2 rows (3.87 against 32 x 4 near 4.3) and 5x5 16 x 4 (4.26); at 112x112 5x5,
// 16 x 4 (216 blocks, two waves) took 8.10 against 5.99. The 512x512 and 1024x1024 divisions
// (32 filters x 4 or 8 rows) are kept: reshaping them was slower or no faster, except 1024x1024
// 5x5 (61.8 us; 32 x 2 rows with runs of 2: 55.4), left as a lead.
inline constexpr int kShapedRows = 4;
inline constexpr int kShapedMinFilters = 8;

/// The division, with one line per decision appended to `why`. With `shape`, a division the kernel
/// cannot use well is reshaped (Note [single-channel block shape]); without it, the paper's division
/// is kept as computed (the single_channel_paper tile). Throws Error(Unsupported) when C/G != 1 or
/// no division fits shared memory.
SingleChannelDivision plan_single_channel(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why,
                                          bool shape = true);
/// The tile that forces the paper's division, unshaped (to compare with the reshaped one).
inline constexpr char kSingleChannelPaperTile[] = "single_channel_paper";

// mconv's extension for many small planes (Note [plane stream]): when every group has one channel and
// one filter (depthwise with multiplier 1), the N*G planes are independent single-channel problems.
// The paper's division gives one plane per block, which on 7x7..28x28 maps means thousands of blocks
// that each move a few hundred bytes and do Th << N_FMA FMAs. The plane-stream division packs whole
// planes (small maps) or cuts bands of output rows (large maps) into chunks, one per block, of at
// least N_FMA / (resident blocks per SM) FMAs (together the resident blocks of an SM then hold
// N_FMA), and as large as one resident wave or the shared memory of a resident block allows.

inline constexpr char kPlaneStreamTile[] = "single_channel_planes";

/// Output rows each thread computes (a vertical run: input rows are loaded once for the run): 7 when
/// it divides P (MobileNet's 112/56/28/14/7 maps: no idle rows, fewer loads and index steps per
/// output), else 4.
inline int plane_stream_run(const Problem& p) {
  return p.p() % 7 == 0 ? 7 : 4;
}
/// 128 threads: measured 0-3% faster than 256 on every depthwise layer (smaller chunks, more blocks
/// in different phases).
inline constexpr int kPlaneStreamThreads = 128;
/// Resident blocks per SM the kernel's registers allow (its launch bounds): 12 at 40 registers for
/// 1x1 and 3x3 filters; 5x5 and 7x7 keep 25 and 49 filter taps in registers (64 and 92-126 registers).
constexpr int plane_stream_resident_blocks(int64_t filter) {
  return filter <= 3 ? 12 : filter == 5 ? 8 : 4;
}

/// The order the plane streams number a depthwise layer's N*G planes in: x's memory order, so that a
/// chunk's consecutive planes are neighbours. True: channels inner (plane = n * G + c, NCHW-like);
/// false: images inner (plane = c * N + n, CNHW-like).
inline bool planes_channel_inner(const TensorDesc& t) {
  return t.strides[1] <= t.strides[0];
}

/// Shared-memory layout of one plane of a plane-stream block, for elements of `elem_bytes` (x's
/// dtype): `rows` input rows (halo and zero padding rows included) of `pitch` elements, planes
/// `plane` elements apart; input column 0 sits at column `lpad` (a multiple of 16 bytes, so 16-byte
/// copies land aligned), the zero columns around it are the padding. When W is no whole number of
/// 16-byte vectors pitch and plane are free (even for 2-byte elements): they are picked so that a
/// warp's first reads hit distinct banks (Note [plane stream banks]).
PlaneStreamLayout plane_stream_layout(const Problem& p, int rows_per_block, int elem_bytes);

/// Empty when the plane-stream kernel runs `p` with input `x`; otherwise the reason it does not.
std::string plane_stream_unsupported(const Problem& p, const TensorDesc& x);
/// The division, with its reasons appended to `why`. Throws Error(Unsupported) with the reason.
PlaneStreamDivision plan_plane_stream(const Problem& p, const TensorDesc& x, const HardwareModel& hw,
                                      std::vector<std::string>& why);

/// Note [channels-last depthwise] (channels_last_kernel.cuh): fp16/bf16 depthwise layers (one channel
/// and one filter per group) whose x and y are channels-last.
inline constexpr char kChannelsLastDepthwiseTile[] = "single_channel_channels_last";
/// Empty when the channels-last depthwise kernel runs `p` with these tensors; otherwise the reason.
std::string channels_last_depthwise_unsupported(const Problem& p, const TensorDesc& x, const TensorDesc& y);
/// Blocks of 256 threads the kernel for `p` is compiled to fit on one SM (Note [channels-last
/// occupancy]): 3 for square 1x1, 3x3 or 5x5 filters with one output row a thread, else 2. The planner
/// sizes the grid by it and the launcher picks the kernel by it.
int channels_last_blocks_per_sm(const Problem& p, int rows_per_thread);
/// Note [channels-last staged tile] (channels_last_tile_kernel.cuh): blocks of 256 threads the tile
/// kernel of square `ks` x `ks` filters at `stride` with `qt` outputs a thread is compiled to fit on
/// one SM: 3 where ptxas (sm_90a, bf16) keeps it within 80 registers without spills (3x3; two
/// outputs a thread with 5x5 filters, or 7x7 at stride 1), else 2.
constexpr int channels_last_tile_blocks_per_sm(int64_t ks, int64_t stride, int qt) {
  return ks == 3 || (qt == 2 && (ks == 5 || (ks == 7 && stride == 1))) ? 3 : 2;
}
/// Input pixels along one axis that `tile` outputs at `stride` read with `taps` filter taps (dilation 1):
/// the extent of a staged tile's window, which the planner sizes and the launcher hands the kernel.
constexpr int channels_last_window_extent(int tile, int64_t stride, int64_t taps) {
  return static_cast<int>((tile - 1) * stride + taps);
}
/// Staged tiles of `tile_rows` x `tile_cols` outputs down and across one image's output map: the
/// tiles of one channel chunk over the batch are images x down x across.
struct ChannelsLastTileCount {
  int64_t down = 0, across = 0, per_chunk = 0;
};
inline ChannelsLastTileCount channels_last_tile_count(const Problem& p, int tile_rows, int tile_cols) {
  ChannelsLastTileCount c;
  c.down = ceil_div(p.p(), int64_t(tile_rows));
  c.across = ceil_div(p.q(), int64_t(tile_cols));
  c.per_chunk = p.n * c.down * c.across;
  return c;
}
/// The input window of a tile of `tile_rows` x `tile_cols` outputs in shared memory: pixels down and
/// across, the row pitch in 16-byte units (padded so a quarter warp's reads of rows stride * pitch
/// apart fall on distinct banks), and the block's shared bytes with the chunk's fp32 filters.
struct ChannelsLastWindow {
  int rows = 0, cols = 0, pitch = 0;
  int64_t smem_bytes = 0;
};
ChannelsLastWindow channels_last_window(const Problem& p, int chunk_vectors, int tile_rows, int tile_cols);
/// The division, with its reasons appended to `why`.
ChannelsLastDepthwiseDivision plan_channels_last_depthwise(const Problem& p, const HardwareModel& hw,
                                                           std::vector<std::string>& why);

// Note [plane bulk]
// The plane stream's copies and zero fill were most of its instructions on the H100 (ncu, 7x7 to
// 28x28 maps: ~126 instructions per output for 9 FMAs). When the rows of x and y are packed, a
// chunk of whole planes, or a band of rows of one plane, reads one contiguous range of x and writes
// one contiguous range of y. The bulk variant (plane_bulk_kernel.cuh) moves each
// with one bulk copy (Hopper's copy engine, one instruction for the block), keeps the inputs
// unpadded and computes padding by selects. A thread item is a segment of SEG outputs of one output
// row: consecutive lanes then read and write shared memory SEG floats apart, conflict-free for
// SEG = 7 (MobileNet's maps are 7 * 2^k wide). The outputs go out through shared memory: written
// straight from the items, 7 floats apart per lane, every store instruction touched 7 lines, and
// the L2 store traffic ran the kernel 1.3x slower than the plane stream.
// Chunks are the smallest whose items fill the block's passes to at least 85%. One resident wave
// of blocks walks the chunks with two buffers each: the filter loads of a chunk's items and the
// copy of the next chunk overlap the wait for this one.
inline constexpr char kPlaneBulkTile[] = "single_channel_bulk";

/// Resident blocks per SM the bulk kernel's registers allow (its launch bounds). 3x3: 64 registers
/// (8 blocks), which is also what shared memory holds of the chunks the planner picks for them; at
/// 48 registers (10 blocks) runs of 2 x 7 outputs spilled, and MobileNet's stride-1 layers ran 1-4%
/// slower on the H100. 1x1: 48 registers. 5x5: 128 registers (4 blocks), see plane_bulk_run.
constexpr int plane_bulk_resident_blocks(int64_t filter) {
  return filter <= 1 ? 10 : filter == 3 ? 8 : filter == 5 ? 4 : plane_stream_resident_blocks(filter);
}

/// Output rows of one thread item (a run sharing its input rows): 2 for 1x1-5x5 filters at stride 1;
/// 7x7 keeps 49 taps in registers, and at stride 2 a run of 2 shares one input row in 6 while its
/// chunk needs twice the rows to fill the block: those run 1. 5x5 at stride 1 took runs of 1 at 64
/// registers (8 blocks) and spilled; EfficientNet-B0's 5x5 depthwise layers (batch 32, H100, us,
/// medians of 5 alternating runs) with runs of 2 at 128 registers: 28x28 C = 240 37.2 -> 24.3,
/// 14x14 C = 480 20.6 -> 15.0, C = 672 27.8 -> 18.4, 7x7 C = 1152 11.6 -> 9.9, and the 14x14
/// stride-2 layer (runs of 1, no longer spilling) 13.5 -> 12.2: 1.27x on the five. Runs of 1 at 80
/// registers (6 blocks) gained 1.07x; runs of 2 at 80, 1.23x (7x7 maps 9.2: the one layer it won).
constexpr int plane_bulk_run(int64_t filter, int64_t stride) {
  return filter <= 5 && stride == 1 ? 2 : 1;
}

/// Outputs of one thread item: 7 or 4, whichever leaves fewer idle outputs at the end of a row (7 on a tie).
int plane_bulk_segment(const Problem& p);

/// Shared elements around a chunk (the kernel's zero row and the slack on both sides of each stage's
/// inputs, whose reads are replaced by 0): whole 16-byte vectors in every dtype, at least any
/// segment's input span.
inline constexpr int kPlaneBulkGuard = 32;
/// Chunks in flight per block: the copy of the next chunk lands while the block computes this one.
inline constexpr int kPlaneBulkStages = 2;
/// The kernel's static shared memory beside its dynamic layout: one 8-byte mbarrier per stage.
inline constexpr int64_t kPlaneBulkBarrierBytes = 8 * kPlaneBulkStages;

/// Elements (of `elem_bytes`) a chunk of `planes` whole planes or of a band of `rows` output rows
/// reads (its rows of x, inside the map) and writes, each + a 16-byte vector - 1 element for the
/// alignment of its bulk copy.
struct PlaneBulkChunkElements {
  int64_t in = 0, out = 0;
  int elem_bytes = 4;
};
PlaneBulkChunkElements plane_bulk_chunk_elements(const Problem& p, int64_t planes, int64_t rows, int elem_bytes);
// Note [bulk read-once inputs]
// Where a chunk is whole planes, no input value is read by two chunks, so the bulk copies read x with
// an L2 evict-first policy; bands keep the default, since their halo rows are read again by the
// next band. y is written with the default policy, so the layer that reads it next can find it in
// L2. On the H100 (graph-timed, us, three alternating runs each, default / evict-first loads):
// c384_h14_s1 9.9 -> 8.6, c576_h14_s1 13.2 -> 11.8, c960_h7_s1 7.0 -> 6.5, c192_h28_s1 16.6 ->
// 16.2, c192_h28_s2 12.4 -> 12.1, c576_h14_s2 unchanged (9.7). On bands evict-first loads were
// slower: c32_h112_s1 40.6 -> 41.0, c144_h56_s1 44.1 -> 44.6, and in the plane stream c96_h112_s2
// 70.0 -> 73.4. Evict-first stores as well gained less on the small layers (c384 9.6, c576 13.0).
/// Whether chunks of `planes` planes x `rows` output rows are whole planes, so that no input row is
/// read by two chunks (a band's halo rows are read again by the next band).
inline bool plane_bulk_whole_planes(const Problem& p, int64_t planes, int64_t rows) {
  return planes > 1 || rows >= p.p();
}
/// Elements of one stage of a block's shared memory, [slack, inputs, slack, outputs], each part a
/// whole number of 16-byte vectors of `vector` elements. The one definition of the layout's size:
/// the kernel steps its stages by it.
constexpr int64_t plane_bulk_stage_elements(int64_t in, int64_t out, int64_t vector) {
  return kPlaneBulkGuard + (in + vector - 1) / vector * vector + kPlaneBulkGuard + (out + vector - 1) / vector * vector;
}
/// Shared memory of a block: the zero row, kPlaneBulkStages stages of [slack, inputs, slack, outputs].
int64_t plane_bulk_smem_bytes(const PlaneBulkChunkElements& f);

/// Whether the planner takes the bulk variant over the plane stream where both run: at stride 1; at
/// stride 2 on output maps at most 7 wide, and at most 14 wide where W is even (the reads go in
/// pairs there, Note [bulk stride-2 pairs]). Wider stride-2 maps keep the plane stream (H100,
/// MobileNetV2, bulk with pairs against the plane stream: 56x56 outputs 75.5 vs 70.0 us, 28x28
/// within 1%).
///
/// Note [bulk stride-2 pairs]
/// A stride-2 item reads 15 floats per input row (7 outputs) and lanes start 14 floats apart, so a
/// warp's 4-byte reads fell on 16 banks (2-way conflicts; 4-way on 14x14 maps, whose rows and
/// planes are multiples of 4 floats). Where every row of a chunk starts on an even float (W even,
/// x's chunk 8-byte aligned), the item reads 8-byte pairs from the even column at or before its
/// first: 8 reads instead of 15, and a half-warp's pairs fill the 32 banks. On the H100:
/// c576_h14_s2 10.4 -> 9.8 us, and c192_h28_s2 moved from the plane stream (12.9) to the bulk
/// kernel (12.3). An odd start falls back to 4-byte reads, per chunk (the same for all its items).
bool plane_bulk_preferred(const Problem& p);

/// Empty when the bulk variant runs `p` with tensors x and y; otherwise the reason it does not.
std::string plane_bulk_unsupported(const Problem& p, const TensorDesc& x, const TensorDesc& y);
/// The division, with its reasons appended to `why`. Throws Error(Unsupported) with the reason.
PlaneBulkDivision plan_plane_bulk(const Problem& p, const TensorDesc& x, const TensorDesc& y, const HardwareModel& hw,
                                  std::vector<std::string>& why);

}  // namespace mconv::detail
