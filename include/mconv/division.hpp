// mconv: the division of a convolution among the GPU's blocks and threads, one typed struct per
// kernel family. The family's planner fills it when the Plan is made (from the problem, the tensors'
// strides and the hardware model); its launcher only reads it. `mconv plan` prints it.
//
// Every division carries its LaunchShape (grid, threads, dynamic shared memory), so a launch derives
// nothing; what depends on the call (pointer alignment for vector copies, an activation that forbids split-K)
// is the launcher's only decision.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

namespace mconv {

/// Grid, block size and dynamic shared memory of one launch.
struct LaunchShape {
  int64_t grid_x = 1, grid_y = 1, grid_z = 1;
  int threads = 0;
  int64_t smem_bytes = 0;
};

/// implicit_precomp (src/algorithms/implicit_precomp): one tile of its tile table, split-K slices.
struct ImplicitPrecompDivision {
  int tile = 0;           ///< index into the family's tile table
  std::string tile_name;  ///< e.g. "128x128x8"
  int block_m = 0, block_n = 0, block_k = 0;
  int k_tiles = 0;  ///< row tiles of block_k rows
  int split_k = 1;  ///< row slices summed into y with atomics (Note [split-k without workspace])
  /// The slices are one thread-block cluster, summed in rank order through distributed shared memory
  /// (Note [ordered split-k]): deterministic, no pre-pass; at most 16 slices.
  bool ordered_split = false;
  int k_tiles_per_split = 0;
  int prepass_blocks = 0;  ///< blocks of the split-K pre-pass (y = beta*y + bias)
  LaunchShape launch;      ///< with split_k slices (grid_z = groups * split_k)
};

/// How implicit_mma moves one operand's tile into shared memory (Note [mma gather forms]).
enum class GatherForm {
  Vector,  ///< 16-byte vectors along the reduction (channels contiguous: NHWC x, KRSC w)
  /// 16-byte vectors across pixels or filters: images, a 1x1 layer's plane (NCHW) or filters
  /// contiguous; filters fp16/bf16 only
  Transposed,
  Element,  ///< single elements, any strides
};

/// How the two consumer warpgroups of implicit_mma's warp-specialized blocks share the block's
/// tiles (Note [wgmma warp-specialized tiles]).
enum class ConsumerSchedule {
  None,         ///< not warp-specialized
  PingPong,     ///< alternate tiles: one warpgroup multiplies while the other stores
  Cooperative,  ///< every tile, 64 of its 128 pixels each
};

/// The schedule's suffix in division names and forced tile names ("" for None).
inline const char* consumer_schedule_suffix(ConsumerSchedule c) {
  return c == ConsumerSchedule::PingPong ? "_pingpong" : c == ConsumerSchedule::Cooperative ? "_cooperative" : "";
}

/// How the schedule's blocks run, in the words of `mconv plan` ("" for None).
/// `tf32_stages`: the consumers round each stage to TF32 and store y from their accumulators
/// (Note [wgmma tf32 stages]).
inline std::string consumer_schedule_text(ConsumerSchedule c, bool tf32_stages = false) {
  if (c == ConsumerSchedule::None) return "";
  return std::string("one block an SM: a producer warpgroup, two consumer warpgroups on ") +
         (c == ConsumerSchedule::PingPong ? "alternate tiles" : "64 pixels each of every tile") +
         (tf32_stages ? " rounding each stage to TF32 and storing y from their accumulators"
                      : " storing through a tensor map of y");
}

/// implicit_mma (src/algorithms/implicit_mma): one tile of its tile table on tensor cores.
struct ImplicitMmaDivision {
  int tile = 0;           ///< index into the family's tile table
  std::string tile_name;  ///< e.g. "mma_128x128x32"
  int block_m = 0, block_n = 0;
  int block_k = 0;  ///< rows (elements of the reduction) per pipeline stage
  int stages = 0;
  int k_tiles = 0;  ///< row tiles of block_k rows
  /// The gather forms of the image (A) and filter (B) tiles. Vector and Transposed forms also need
  /// 16-byte aligned x and w pointers and group offsets; a call without them runs the element form.
  GatherForm a_gather = GatherForm::Element, b_gather = GatherForm::Element;
  /// Output pixels numbered images-fastest (m = (p*Q + q)*N + n), so that eight consecutive pixels
  /// of the transposed image gather are eight contiguous images of one window; false for a 1x1
  /// layer's plane, whose consecutive pixels are contiguous already.
  bool images_fastest = false;
  /// Stages loaded by the copy engine instead of the threads' gather: x through an im2col tensor
  /// map, w through a tiled one, each stage a whole box of 64 channels at one filter tap (Note
  /// [wgmma tensor-map loads]). Warpgroup tiles with both operands vector, fp16/bf16 (TF32 on the
  /// warp-specialized forms only); a call whose pointers are not 16-byte aligned runs the gather.
  bool tensor_maps = false;
  /// With tensor maps, a 1x1 stride-1 layer without padding over evenly spaced pixels: x as a tiled
  /// map of pixel rows (C, N*H*W) instead of an im2col one (Note [wgmma pixel-row maps]).
  bool image_pixel_rows = false;
  /// With tensor maps: at most one wave of blocks, each walking tiles b, b + grid, ..., loading the
  /// next tile's stages while it stores this one through a tensor map of y (Note [wgmma persistent
  /// tiles]). A call whose y is not dense channels-last runs one block a tile.
  bool persistent = false;
  /// With the persistent form: warp-specialized blocks, one an SM, whose producer warpgroup loads
  /// the stages of every tile of the block while two consumer warpgroups multiply and store, on
  /// alternate tiles or sharing each (Note [wgmma warp-specialized tiles]).
  ConsumerSchedule consumers = ConsumerSchedule::None;
  /// Row slices of one tile, one block each, summed in rank order through the thread-block
  /// cluster's distributed shared memory (Note [mma cluster split]): no workspace, no atomics.
  int cluster_split = 1;
  /// Groups of cluster_split blocks a tile, each over its own rows, adding their sums into y with
  /// atomics after a pre-pass y = beta*y + bias (Note [mma atomic slices]); 1 in deterministic plans.
  int atomic_slices = 1;
  int prepass_blocks = 0;  ///< blocks of that pre-pass (0 without atomic slices)
  /// grid_z = groups * atomic_slices * cluster_split; warp-specialized blocks: grid_y = atomic_slices,
  /// grid_z = cluster_split
  LaunchShape launch;
  /// Warp-specialized blocks over fp32 elements in TF32 math (a warpgroup tile's 128-byte stage rows
  /// are then 32 rows of the reduction): the consumers round each landed stage to TF32 before they
  /// multiply it and store y from their accumulators (Note [wgmma tf32 stages]).
  bool tf32_stages() const { return consumers != ConsumerSchedule::None && block_k == 32; }
};

/// direct_block (src/algorithms/direct_block): one of its thread-group shapes.
struct DirectBlockDivision {
  int shape = 0;                                ///< index into the family's shape table
  std::string shape_name;                       ///< e.g. "direct_32x8_r2x2_f1"
  int tile_rows = 0, tile_cols = 0, pitch = 0;  ///< input tile with halo, and its shared-memory pitch
  int filter_slices = 0, tiles_x = 0, slots = 0;
  int images_per_block = 1;  ///< Note [direct pipeline]
  int group_smem_bytes = 0;  ///< shared memory of one packed group: two tiles, two filter slices
  LaunchShape launch;
};

/// single_channel, the paper's strip kernel (methods 1 and 2 of the single-channel planner).
struct SingleChannelDivision {
  int method = 0;             ///< 1 or 2
  int pieces = 1;             ///< P (method 1) or Q (method 2)
  int filters_per_block = 1;  ///< ceil(M/N_sm) or ceil(M/Q)
  int rows_per_block = 1;     ///< output rows of one block
  int64_t d_bytes = 0;        ///< D: shared memory of one block
  double th = 0;              ///< Th: FMAs of one block
  bool vs_fallback = false;   ///< Th < N_FMA: refined until all blocks move >= V_s
  bool shaped = false;        ///< reshaped for the kernel's runs (Note [single-channel block shape])
  int64_t blocks = 0;         ///< per image and group
  int run = 1;                ///< output rows of a thread's run (Note [single-channel runs])
  int strip_rows = 0, strip_cols = 0, strip_pitch = 0, filter_pitch = 0;
  LaunchShape launch;
};

/// Shared-memory layout of one plane of a plane-stream block, in elements of x's dtype (Note [plane
/// stream banks]).
struct PlaneStreamLayout {
  int rows = 0, pitch = 0, lpad = 0, plane = 0;
};

/// single_channel's plane stream (depthwise, one filter per group; Note [plane stream]).
struct PlaneStreamDivision {
  int planes_per_block = 1;  ///< whole planes per block (> 1 only when a block holds all output rows)
  int rows_per_block = 1;    ///< output rows per block: a band, or P when whole planes
  int run = 4;               ///< output rows a thread computes
  PlaneStreamLayout layout;
  int64_t d_bytes = 0;    ///< shared memory of one buffer
  double th = 0;          ///< FMAs of one block
  double th_target = 0;   ///< N_FMA / resident blocks per SM
  int64_t blocks = 0;     ///< chunks of the whole problem
  int64_t bands = 0;      ///< row bands per plane
  int filter_offset = 0;  ///< bytes from a buffer's start to its fp32 filters (after its planes)
  LaunchShape launch;
};

/// single_channel's bulk plane stream (Note [plane bulk]).
struct PlaneBulkDivision {
  int planes_per_chunk = 1;
  int rows_per_chunk = 1;
  int segment = 7;      ///< SEG: outputs of one thread item
  int run = 1;          ///< output rows of one thread item
  int64_t d_bytes = 0;  ///< shared memory of one block (two chunk buffers)
  double fill = 0;      ///< items / (passes * threads), over the whole problem
  int64_t chunks = 0, bands = 0;
  int blocks_per_sm = 1;                      ///< resident blocks its shared memory allows
  int64_t in_elements = 0, out_elements = 0;  ///< shared room for a chunk's inputs and outputs
  bool read_once = false;                     ///< whole planes: x read with evict-first (Note [bulk read-once inputs])
  LaunchShape launch;                         ///< one resident wave walks the chunks
};

/// Input lines of a stride_fixed block in shared memory.
struct StrideFixedLayout {
  int rows = 0, cols = 0, pitch = 0;
};

/// stride_fixed (src/algorithms/stride_fixed): the paper's block division (section 3.2).
struct StrideFixedDivision {
  int thread_pixels = 8;     ///< Note [stride-fixed thread pixels]
  int segment_channels = 8;  ///< S / 4
  int tile_rows = 0;         ///< W'y (output lines per block)
  int tile_cols = 0;         ///< W'x (output pixels per line)
  int splits = 1;            ///< channel slices summed with atomics (small maps)
  int rounds = 0, rounds_per_split = 0;
  int tiles_x = 0;
  StrideFixedLayout layout;
  int64_t blocks = 0;         ///< per split
  double segment_needed = 0;  ///< bytes: N_FMA * 4 / (M' * W'x * W'y)
  int prepass_blocks = 0;
  LaunchShape launch;  ///< with `splits` slices
};

/// The division of a Plan: none on the CPU target, else the one its family's planner made.
/// single_channel's channels-last depthwise kernel, fp16/bf16 (Note [channels-last depthwise]).
struct ChannelsLastDepthwiseDivision {
  int chunk_channels = 8;      ///< channels of a block (its threads along x hold one 16-byte vector each)
  int outputs_per_thread = 4;  ///< adjacent output pixels of a row a thread computes
  int rows_per_thread = 1;     ///< adjacent output rows a thread computes (Note [channels-last row window])
  int64_t pixel_groups = 0;    ///< N * ceil(P / rows_per_thread) * ceil(Q / outputs_per_thread)
  int blocks_per_sm = 2;       ///< resident blocks the grid counts on (Note [channels-last occupancy])
  /// Output rows x columns of one block's tile, its input window staged in shared memory (Note
  /// [channels-last staged tile]); 0 x 0: the block's threads walk pixel groups, reading x from L1.
  int tile_rows = 0, tile_cols = 0;
  /// 16-byte units from one row of the tile's window to the next in shared memory (padded so a
  /// quarter warp's reads fall on distinct banks); 0 without a tile.
  int window_pitch = 0;
  LaunchShape launch;  ///< for 16-byte vectors (the launcher goes one channel at a time otherwise)
};

/// depthwise_wgrad (src/algorithms/depthwise_wgrad): the filter gradient of a layer with one input
/// channel per group as a direct reduction (Note [depthwise wgrad]).
struct DepthwiseWgradDivision {
  int vector = 1;          ///< adjacent filters a thread owns (one vector load of x and of dy), or 1
  int chunk_vectors = 1;   ///< vectors of filters a block owns (its threads along x); 1 in plane order
  int taps_per_block = 9;  ///< taps a thread accumulates: R*S with the register window, else a chunk
  int window = 0;          ///< square filter size of the register-window kernel; 0: taps a chunk at a time
  bool run_down = false;   ///< a thread item's run goes down a column (plane order), else along a row
  int run = 1;             ///< adjacent dy pixels of a thread item (its x window's rows or columns)
  int64_t items = 0;       ///< thread items of one chunk of filters: N * P * Q / run, runs rounded up
  int cluster_split = 1;   ///< blocks of one cluster over the items, summed in rank order (no atomics)
  int atomic_slices = 1;   ///< clusters over the items adding into dw after a pre-pass; 1 if deterministic
  int prepass_blocks = 0;  ///< blocks of that pre-pass (0 without atomic slices)
  LaunchShape launch;      ///< grid (filter chunks, tap chunks, atomic_slices * cluster_split)
};

/// few_channel_wgrad (src/algorithms/few_channel_wgrad): the filter gradient of a layer with few input
/// channels on tensor cores, over tiles of output pixels and the window of x they read (Note
/// [few-channel wgrad]).
struct FewChannelWgradDivision {
  int tile_p = 1;          ///< output rows of an item
  int tile_q = 16;         ///< output columns of an item (a multiple of 16: one MMA step a row's 16)
  int column_tiles = 5;    ///< 8-column MMA tiles of a warp; a block's columns are 32 x this
  int64_t items = 0;       ///< N * ceil(P / tile_p) * ceil(Q / tile_q)
  int cluster_split = 1;   ///< blocks of one cluster over the items, summed in rank order (no atomics)
  int atomic_slices = 1;   ///< clusters over the items adding into dw after a pre-pass; 1 if deterministic
  int prepass_blocks = 0;  ///< blocks of that pre-pass (0 without atomic slices)
  int64_t half_bytes = 0;  ///< shared memory of one of a block's two halves (dy rows, then the x window)
  LaunchShape launch;      ///< grid (column blocks, 64-filter blocks, atomic_slices * cluster_split)
};

/// few_channel (src/algorithms/few_channel): a forward layer with few input channels on tensor cores,
/// each block's output pixels multiplied out of the window of x they read (Note [few-channel forward]).
struct FewChannelDivision {
  int tile_p = 1;          ///< output rows of a block
  int tile_q = 16;         ///< output columns of a block (a multiple of 16: one MMA row step)
  int columns = 16;        ///< C * R * S rounded up to the MMA's 16
  int64_t smem_bytes = 0;  ///< a block's filter rows, column offsets and x window
  LaunchShape launch;      ///< grid (N * pixel tiles, 64-filter blocks)
};

/// few_filter (src/algorithms/few_filter): a layer of at most 8 filters (an output head; the dgrad
/// steps of an RGB stem) on tensor cores, each block's output pixels multiplied out of the window
/// of x they read, a chunk of channels at a time (Note [few-filter forward]).
struct FewFilterDivision {
  int tile_p = 1;          ///< output rows of a block
  int tile_q = 16;         ///< output columns of a block (a multiple of 16: one MMA row step)
  int chunk_c = 64;        ///< channels of one window chunk (a multiple of 16)
  int buffers = 1;         ///< chunk buffers: 2 where the channels take more than one chunk
  int64_t smem_bytes = 0;  ///< a block's window and filter chunks
  LaunchShape launch;      ///< grid (N * pixel tiles)
};

/// window_mma (src/algorithms/window_mma): an fp32 layer in TF32 math with x in plane order on tensor
/// cores, each block's run of consecutive output pixels multiplied out of the window of x's rows it
/// reads, a chunk of channels at a time (Note [window mma]).
struct WindowMmaDivision {
  int block_pixels = 128;   ///< consecutive output pixels (n, p, q) of a block: 64 a warp
  int block_filters = 128;  ///< filters of a block: 32 a warp
  int chunk_c = 8;          ///< channels of one window chunk (8: one TF32 k-step a tap)
  int stages = 2;           ///< chunk buffers (2 or 3): a chunk is copied while the ones before it multiply
  int cluster_split = 1;    ///< blocks of one cluster over the chunks, summed in rank order (no atomics)
  int window_rows = 0;      ///< the most rows of x a block's window spans (images stacked, padding kept)
  int window_columns = 0;   ///< columns of a window row: the padded row the output row reads
  int64_t smem_bytes = 0;   ///< a block's chunk buffers (they hold the split's partial sums at the end)
  LaunchShape launch;       ///< grid (pixel blocks, filter blocks, cluster_split)
};

using Division = std::variant<std::monostate, ImplicitPrecompDivision, DirectBlockDivision, SingleChannelDivision,
                              PlaneStreamDivision, PlaneBulkDivision, StrideFixedDivision, ImplicitMmaDivision,
                              ChannelsLastDepthwiseDivision, DepthwiseWgradDivision, FewChannelWgradDivision,
                              FewChannelDivision, FewFilterDivision, WindowMmaDivision>;

/// "vector", "transposed" or "element".
const char* gather_form_name(GatherForm f);
/// The division's name as `mconv plan` and the benchmark print it (a tile or shape name; empty on the CPU).
std::string division_name(const Division& d);
/// One line per field, for `mconv plan`.
std::string division_text(const Division& d);

}  // namespace mconv
