// The tensor-core implicit-GEMM planner: the tile and the gather form, each with its reason.
#include "planner.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>
#include <utility>

#include "../common/split_k.hpp"
#include "tiles.hpp"

namespace mconv::detail {
namespace {

// Note [mma vector gather]: a 16-byte vector is V = 16 / element-size consecutive rows. With rows
// in RSC order (channels fastest) and C/G a multiple of V, every aligned run of V rows shares (r, s)
// and covers V consecutive channels, contiguous in x (channel stride 1) and in w (likewise): one
// cp.async of 16 bytes per (pixel, run) and per (filter, run). Every start address and offset is
// then a multiple of V elements when the strides are, so 16-byte aligned x and w keep every vector
// aligned.
std::string vector_refusal(const Problem& p, const TensorDesc& t, const char* name, bool rsc) {
  const int64_t v = 16 / dtype_size(t.dtype);
  if (!rsc) return "rows not channels-fastest (x is not channels-last)";
  if (p.c_per_group() % v != 0)
    return "C/G = " + std::to_string(p.c_per_group()) + " is not a multiple of " + std::to_string(v);
  if (t.strides[1] != 1) return std::string(name) + " channel stride is not 1";
  for (int i : {0, 2, 3})
    if (t.strides[i] % v != 0) return std::string("a ") + name + " stride is not a multiple of " + std::to_string(v);
  return "";
}

// Note [mma gather forms]: the transposed form copies V = 16 / element-size consecutive pixels
// (images of one window, x read images-fastest) or V consecutive filters of one reduction row.
// `count` is N or K/G. TF32 takes it on mma.sync tiles only (Note [mma tf32 transposed filters]).
std::string transposed_refusal(const TensorDesc& t, const char* name, const char* axis, int64_t count) {
  const int64_t v = 16 / dtype_size(t.dtype);
  const std::string vs = std::to_string(v);
  if (t.strides[0] != 1) return std::string(name) + " " + axis + " stride is not 1";
  if (count % v != 0) return std::string(axis) + " count " + std::to_string(count) + " is not a multiple of " + vs;
  for (int i : {1, 2, 3})  // an axis of extent 1 (a 1x1 filter's r and s) is never stepped along
    if (t.dims[i] > 1 && t.strides[i] % v != 0) return std::string("a ") + name + " stride is not a multiple of " + vs;
  return "";
}

// Note [mma tf32 pixel runs]: x copied as V = 16 / element-size consecutive pixels of a 1x1 layer's
// plane (stride 1, no padding, x's planes contiguous). "" when it can.
std::string pixel_run_refusal(const Problem& p, const TensorDesc& x) {
  const int64_t v = 16 / dtype_size(x.dtype);
  const std::string vs = std::to_string(v);
  if (p.r != 1 || p.s != 1) return "the filter is not 1x1";
  if (p.stride_h != 1 || p.stride_w != 1 || p.pad_h != 0 || p.pad_w != 0) return "stride above 1 or padding";
  if (x.strides[3] != 1 || x.strides[2] != p.w) return "x's planes are not contiguous";
  if ((p.h * p.w) % v != 0) return "H*W = " + std::to_string(p.h * p.w) + " is not a multiple of " + vs;
  if (x.strides[0] % v != 0 || x.strides[1] % v != 0) return "an x stride is not a multiple of " + vs;
  return "";
}

// Note [mma filter rows]: with rows in CRS order (x in plane order, so its rows are single
// elements) a filter's rows are still V = 16 / element-size consecutive elements of w when each of
// its channel planes is dense (S stride 1, R stride S) and the filter is not flipped: row (c, r, s)
// lies at c*stride_c + r*S + s. Where the planes are also back to back (KCRS, the layout PyTorch
// keeps its weights in) a run of V rows may cross a plane, so C/G*R*S must be whole vectors;
// otherwise R*S must be, and the plane stride too. The filter operand then copies 16-byte vectors of
// rows under the image's element gather, a quarter (TF32) or an eighth (fp16/bf16) of the copies,
// and of the offset-table reads, the element form makes for it. A wgrad step of a plane-order layer
// is the second case (src/plan/backward.cpp): its filter is dy, its channels dy's images, its planes
// dy's P x Q planes. "" when it can.
std::string filter_rows_refusal(const Problem& p, const TensorDesc& w, bool rsc) {
  const int64_t v = 16 / dtype_size(w.dtype);
  const std::string vs = std::to_string(v);
  if (rsc) return "rows channels-fastest";
  if (p.mode == Mode::Convolution && p.r * p.s > 1) return "a true convolution's filter runs backwards";
  const auto &d = w.dims, &st = w.strides;  // (k, c, r, s)
  if ((d[3] > 1 && st[3] != 1) || (d[2] > 1 && st[2] != d[3])) return "w's filter planes are not dense";
  const int64_t plane = d[2] * d[3];
  if (d[1] == 1 || st[1] == plane) {
    if (plane * d[1] % v != 0) return "C/G*R*S = " + std::to_string(plane * d[1]) + " is not a multiple of " + vs;
  } else if (plane % v != 0 || st[1] % v != 0) {
    return "w's planes are apart and R*S = " + std::to_string(plane) + " or their stride is not a multiple of " + vs;
  }
  if (d[0] > 1 && st[0] % v != 0) return "w's filter stride is not a multiple of " + vs;
  return "";
}

// Note [mma reduction runs]: the vector form needs only that a run of V = 16 / element-size
// consecutive rows is V consecutive elements of x (and of w) for every column, 16-byte aligned.
// With rows channels-fastest that is V channels (Note [mma vector gather]); with rows in CRS order
// (s fastest) it is V taps of one channel's filter plane, when every column's window is that whole
// plane: one output pixel an image, no padding, the window's rows back to back in x (dilation 1
// along a row and a row's pitch dil_h * x's row stride equal to S) and w's filter planes dense
// (cross-correlation: a flipped filter runs backwards). A wgrad step of a 1x1, stride-1, unpadded
// layer in plane order (NCHW) is such a layer (src/plan/backward.cpp): its filter is dy's P x Q
// plane, its window x's whole H x W plane, its reduction N*P*Q rows of planes contiguous in x and
// in dy. Every window lies inside x, so the vector's one predicate (its first row's) holds for all
// of its rows. "" when it can.
std::string reduction_run_refusal(const Problem& p, const TensorDesc& x, const TensorDesc& w, bool rsc) {
  const int64_t v = 16 / dtype_size(x.dtype);
  const std::string vs = std::to_string(v);
  if (rsc) return "rows channels-fastest";
  if (p.p() != 1 || p.q() != 1 || p.pad_h != 0 || p.pad_w != 0 || p.end_pad_h() != 0 || p.end_pad_w() != 0)
    return "more than one output pixel an image, or padding";
  if (p.mode == Mode::Convolution) return "a true convolution's filter runs backwards";
  if (p.dil_w != 1 || x.strides[3] != 1 || p.dil_h * x.strides[2] != p.s) return "x's windows are not contiguous";
  if (w.strides[3] != 1 || w.strides[2] != p.s) return "w's filter planes are not contiguous";
  if ((p.r * p.s) % v != 0) return "R*S = " + std::to_string(p.r * p.s) + " is not a multiple of " + vs;
  for (int i : {0, 1})
    if (x.strides[i] % v != 0 || w.strides[i] % v != 0) return "an x or w stride is not a multiple of " + vs;
  return "";
}

// Warpgroup tiles run only on sm_90 itself: the library carries wgmma in its sm_90a code, and later
// GPUs run the portable compute_90 PTX, which has none.
bool wgmma_device(const HardwareModel& hw) {
  return hw.cc_major == 9 && hw.cc_minor == 0;
}

struct GatherForms {
  GatherForm a = GatherForm::Element, b = GatherForm::Element;
  std::string why;
  bool images_fastest = false;  // the transposed images are runs of images (else of a plane's pixels)
  bool reduction_runs = false;  // Note [mma reduction runs]: vectors of filter taps, rows in CRS order
};

GatherForms choose_gather_forms(const Problem& p, const TensorDesc& x, const TensorDesc& w, bool rsc) {
  const std::string a_vector = vector_refusal(p, x, "x", rsc), b_vector = vector_refusal(p, w, "w", rsc);
  const std::string b_transposed = transposed_refusal(w, "w", "filter", p.k_per_group());
  const std::string a_transposed = transposed_refusal(x, "x", "image", p.n);
  const std::string v = std::to_string(16 / dtype_size(x.dtype));
  if (a_vector.empty() && b_vector.empty())
    return {GatherForm::Vector, GatherForm::Vector,
            "gather: 16-byte vectors of channels (x and w channels-last, C/G a multiple of " + v + ")"};
  if (a_vector.empty() && b_transposed.empty())
    return {GatherForm::Vector, GatherForm::Transposed,
            "gather: x as 16-byte vectors of channels, w transposed (" + v + " filters a vector: " + b_vector + ")"};
  if (a_vector.empty())
    return {GatherForm::Vector, GatherForm::Element,
            "gather: x as 16-byte vectors of channels, w as single elements (" + b_vector +
                (b_transposed.empty() ? "" : "; not transposed: " + b_transposed) + ")"};
  if (a_transposed.empty() && b_transposed.empty())
    return {GatherForm::Transposed, GatherForm::Transposed,
            "gather: x and w transposed (" + v + " images, " + v +
                " filters a vector; pixels numbered images-fastest): " + a_vector,
            true};
  const std::string runs = reduction_run_refusal(p, x, w, rsc);
  if (runs.empty())
    return {GatherForm::Vector, GatherForm::Vector,
            "gather: x and w as 16-byte runs of " + v +
                " taps of a filter plane (one output pixel an image, the window a whole contiguous plane: " + a_vector +
                ")",
            false, true};
  // A 1x1 filter's rows are its channels: Note [mma filter rows] covers them.
  const std::string a_runs = pixel_run_refusal(p, x), w_runs = filter_rows_refusal(p, w, rsc);
  if (a_runs.empty() && w_runs.empty())
    return {GatherForm::Transposed, GatherForm::Vector,
            "gather: x as 16-byte runs of " + v +
                " pixels of a plane, w as 16-byte vectors of channels (1x1: " + a_vector + ")"};
  // A dgrad step of a 1x1 layer in plane order: w's filters (dx's channels) contiguous (TF32: Note
  // [mma tf32 transposed filters]).
  if (a_runs.empty() && b_transposed.empty())
    return {GatherForm::Transposed, GatherForm::Transposed,
            "gather: x as 16-byte runs of " + v + " pixels of a plane, w transposed (" + v +
                " filters a vector: " + w_runs + ")"};
  if (b_transposed.empty())
    return {GatherForm::Element, GatherForm::Transposed,
            "gather: x as single elements (" + a_vector + "; not transposed: " + a_transposed + "), w transposed (" +
                v + " filters a vector)"};
  const std::string w_rows = filter_rows_refusal(p, w, rsc);
  const std::string a_why = a_vector + (a_transposed.empty() ? "" : "; not transposed: " + a_transposed) +
                            "; not as runs of taps: " + runs + "; not as pixel runs: " + a_runs;
  if (w_rows.empty())  // Note [mma filter rows]
    return {GatherForm::Element, GatherForm::Vector,
            "gather: x as single elements (" + a_why + "), w as 16-byte vectors of " + v +
                " consecutive rows (w's filter planes dense)"};
  return {GatherForm::Element, GatherForm::Element,
          "gather: single elements (" + a_why + "; w not as vectors of rows: " + w_rows + ")"};
}

// Note [wgmma tensor-map loads]: why the copy engine cannot load this layer's stages ("" when it
// can). A stage is 64 reduction rows; with rows channels-fastest and C a multiple of 64 they are 64
// consecutive channels at one filter tap, so the image stage is one im2col column (the tap's offsets
// and the channel taken from the offset table's row) and the filter stage one box of w viewed as
// K rows of R*S*C. The limits are the copy engine's for 4-D im2col maps.
// The tile must also be a warpgroup one.
// The copy engine's limits on a 4-D im2col walk: a traversal step of at most 8, tap offsets of at
// most 255 pixels, and a bounding box whose corners lie within 128 pixels of x. The walk's windows
// start at -pad and step `step` over `outputs` positions of an axis of `extent` pixels.
struct Im2colWalk {
  int64_t step_h, step_w, max_tap_h, max_tap_w, pad_h, pad_w, outputs_h, outputs_w, h, w;
};
std::string im2col_walk_refusal(const Im2colWalk& k) {
  if (k.step_h > 8 || k.step_w > 8) return "stride above 8";
  if (k.max_tap_h > 255 || k.max_tap_w > 255) return "a filter tap more than 255 pixels from its origin";
  const int64_t upper_h = (k.outputs_h - 1) * k.step_h - k.pad_h - (k.h - 1);
  const int64_t upper_w = (k.outputs_w - 1) * k.step_w - k.pad_w - (k.w - 1);
  for (int64_t corner : {-k.pad_h, -k.pad_w, upper_h, upper_w})
    if (corner < -128 || corner > 127) return "window origins beyond 128 pixels outside x";
  return "";
}

std::string tensor_map_refusal(const Problem& p, const TensorDesc& x, const TensorDesc& w, bool rsc,
                               const GatherForms& forms) {
  // Note [wgmma tensor-map loads]: vector images with filters K-major (KRSC) or N-major (a dgrad
  // step's w, the filters contiguous); or both transposed (a wgrad step).
  // Note [wgmma tf32 stages] (warp_specialized.cuh): wgmma reads TF32 operands K-major only.
  if (dtype_size(x.dtype) == 4 && (forms.a != GatherForm::Vector || forms.b != GatherForm::Vector))
    return "TF32 tensor-map loads take x channels-last and w KRSC (wgmma reads TF32 operands K-major only)";
  if (p.groups != 1) return "groups > 1";
  if (forms.a == GatherForm::Transposed && forms.b == GatherForm::Transposed) {
    if (!forms.images_fastest) return "x as pixel runs of a plane (the maps walk images, not planes)";
    // The step's images are the layer's channels, its channels the layer's images, its taps dy's
    // pixels (src/plan/backward.cpp); the maps walk the layer's geometry.
    const auto &xs = x.strides, &ws = w.strides;
    if (rsc || p.n % 64 != 0) return "the layer's C = " + std::to_string(p.n) + " is not a multiple of 64";
    if (xs[0] != 1 || xs[1] % 8 != 0 || xs[2] % 8 != 0 || xs[3] % 8 != 0)
      return "x is not channels-last with its other strides whole 16-byte steps";
    if (ws[0] != 1 || ws[3] % 8 != 0 || ws[2] != p.s * ws[3] || ws[1] != p.r * ws[2])
      return "dy is not channels-last with its pixels packed";
    // The layer's stride is the step's dilation, its taps the step's output pixels (times the step's
    // stride), its outputs the step's taps.
    return im2col_walk_refusal(
        {p.dil_h, p.dil_w, (p.p() - 1) * p.stride_h, (p.q() - 1) * p.stride_w, p.pad_h, p.pad_w, p.r, p.s, p.h, p.w});
  }
  if (forms.a != GatherForm::Vector || forms.b == GatherForm::Element)
    return "x is not channels-last or w has neither its channels nor its filters contiguous";
  if (!rsc || p.c % 64 != 0) return "C = " + std::to_string(p.c) + " is not a multiple of 64";
  if (forms.b == GatherForm::Vector &&
      (w.strides[1] != 1 || w.strides[3] != p.c || w.strides[2] != p.s * p.c || w.strides[0] % 8 != 0))
    return "w is not KRSC with each filter's R*S*C contiguous";
  // N-major boxes: the copy engine steps the other axes in 16-byte units.
  if (forms.b == GatherForm::Transposed &&
      (w.strides[0] != 1 || w.strides[1] % 8 != 0 || w.strides[2] % 8 != 0 || w.strides[3] % 8 != 0))
    return "w's filters are not contiguous with its other strides whole 16-byte steps";
  return im2col_walk_refusal(
      {p.stride_h, p.stride_w, p.dil_h * (p.r - 1), p.dil_w * (p.s - 1), p.pad_h, p.pad_w, p.p(), p.q(), p.h, p.w});
}

// Note [wgmma persistent tiles]: the blocks of one wave: as many as an SM holds of the persistent
// form (its launch bound, fewer where the output buffer's shared memory allows fewer) on every SM.
int64_t persistent_blocks(const MmaTileShape& t, const HardwareModel& hw) {
  constexpr int64_t kSmBytes = 228 * 1024, kReservedBytes = 1024;  // sm_90: per SM, and per block
  const int64_t by_smem = kSmBytes / (t.persistent_smem_bytes + kReservedBytes);
  return std::max<int64_t>(1, std::min<int64_t>(t.min_blocks, by_smem)) * std::max(hw.sm_count, 1);
}

// Note [wgmma warp-specialized tiles]: the most blocks of a cluster that split a cooperative tile's rows.
constexpr int kCooperativeSplits = 4;

// Note [wgmma warp-specialized tiles]: one block an SM, each walking its share of the tiles.
int64_t warp_specialized_blocks(const HardwareModel& hw) {
  return std::max(hw.sm_count, 1);
}

// The persistent form's name in the plan's why lines: its consumer schedule, or plain persistent.
const char* persistent_form_word(ConsumerSchedule consumers) {
  return consumers == ConsumerSchedule::PingPong      ? "ping-pong"
         : consumers == ConsumerSchedule::Cooperative ? "cooperative"
                                                      : "persistent";
}

/// How a rule's tile runs, where the rule was measured with more than the tile: its cluster split
/// (0: the split rule's), the persistent form (Note [wgmma persistent tiles]) and, with it, the
/// warp-specialized form's consumer schedule (Note [wgmma warp-specialized tiles]).
struct TileRunForm {
  int split = 0;
  bool persistent = false;
  ConsumerSchedule consumers = ConsumerSchedule::None;
};

// Note [wgmma tf32 stages] (warp_specialized.cuh): TF32 layers loading through tensor maps run
// warp-specialized tiles only (their consumers round the stages). Measured on the H200 (resnet50 and
// vgg16 TF32 NHWC at batch 32, every layer forced onto each form, one call;
// bench/results/latest/tf32_tensor_maps/): 128x64 ping-pong for K/G = 64 (l1_3x3 79.4 us against
// 82.5 cooperative and 98.1 on 128x128); on 128x128 tiles over more than a wave, cooperative for
// reductions of 1024 rows and more (512 for 1x1 layers: l3_1x1a, l3_ds), 3-10% faster than ping-pong
// (vgg16 c256_h56 663 against 720 us, l2_3x3 62.3 against 70.1), and ping-pong on shorter ones (1-6%:
// vgg16 c64_h112's 576 rows 385 against 409, l2_1x1a, l2_ds); split 2 ways in a cluster where a long
// reduction (4096 rows and more) makes one to two waves (vgg16 c512_h14, 196 tiles: 191 against 214)
// or the tiles fill less than half the SMs (stage 4's 52 tiles: l4_3x3 66.2 against 108.8 unsplit),
// cooperative unsplit between. With the image rows rounded in registers rather than in place
// (Note [wgmma tf32 stages]; bench/results/latest/tf32_image_registers/), cooperative 128x128 also
// won resnet50's 1x1 layers of 64-256 rows that had run ping-pong (l1_1x1b 70.5 against 65.9 us,
// l3_1x1b 33.5 against 30.5, l2_ds even), so every 1x1 layer over a wave takes it. With two register
// sets of image fragments in the cooperative form (bench/results/latest/tf32_register_sets/, two
// sweeps), ping-pong won the 3x3 layers of 1152 rows over many waves (vgg16 c128_h112, 3136 tiles:
// 624 and 629 us against 665 and 663; c128_h56, 1568 tiles: 318 and 320 against 333 twice) and lost on
// 1.5 waves (resnet50 l2_3x3, 196 tiles: 63.0 and 62.4 against 58.0 and 57.7); from 2304 rows on
// cooperative won or tied (vgg16 c256_h56 610-614 against 615-619). Four waves splits the two cases.
int choose_tf32_specialized_tile(const Problem& p, const HardwareModel& hw, int64_t rows, TileRunForm& form,
                                 std::vector<std::string>& why) {
  const int64_t cols = p.n * p.p() * p.q(), kg = p.k_per_group();
  const int64_t sms = std::max(hw.sm_count, 1);
  auto blocks = [&](int bm, int bn) { return ceil_div(cols, bm) * ceil_div(kg, bn); };
  auto specialized = [&](const char* name, int bm, int bn, ConsumerSchedule consumers, int split) {
    form.persistent = true;
    form.consumers = consumers;
    form.split = split;
    why.push_back(std::string("tile ") + name + ": TF32 through tensor maps, K/G = " + std::to_string(kg) +
                  ", C/G*R*S = " + std::to_string(rows) + ", " + std::to_string(blocks(bm, bn)) + " tiles of " +
                  std::to_string(bm) + "x" + std::to_string(bn) + ", " + persistent_form_word(consumers) + " blocks" +
                  (split > 1 ? ", a cluster of " + std::to_string(split) + " a tile" : "") +
                  " (measured best for such layers on Hopper)");
    return find_mma_tile(name);
  };
  constexpr auto kPingPong = ConsumerSchedule::PingPong, kCooperative = ConsumerSchedule::Cooperative;
  if (kg <= 64) return specialized("wgmma128x64_s3", 128, 64, blocks(128, 64) > sms ? kPingPong : kCooperative, 1);
  const int64_t tiles = blocks(128, 128);
  if (tiles > sms && tiles <= 2 * sms && rows >= 4096) return specialized("wgmma128x128_s3", 128, 128, kCooperative, 2);
  // Cooperative blocks favour many rows a tile (not plan_implicit_mma's long_reduction, a wgrad
  // step's) and, since the image rows are rounded in registers, every 1x1 layer; ping-pong keeps
  // reductions under 2048 rows over four waves and more.
  const bool cooperative_layer = p.r * p.s == 1 || rows >= 2048 || (rows >= 1024 && tiles < 4 * sms);
  if (tiles > sms) return specialized("wgmma128x128_s3", 128, 128, cooperative_layer ? kCooperative : kPingPong, 1);
  return specialized("wgmma128x128_s3", 128, 128, kCooperative, tiles * 2 > sms ? 1 : 2);
}

// Measured on the H100 (bf16, NHWC, resnet50 and vgg16 at batch 32, every layer forced to each tile,
// one run; docs/PERFORMANCE.md has the table): 128x128 with 8 warps and 128-byte stages won 14 of
// resnet50's 23 layers; 128x256 (warps of 64x64) won every vgg16 layer with K >= 256 and a long
// reduction (C*R*S >= 1152) but lost up to 2x on short reductions and small grids; K = 64 layers
// went to 128x64 (3x3) or 64x64 (1x1); late-stage layers with few 128x128 blocks to 64x64.
// Warpgroup tiles (Note [wgmma mainloop]), measured the same way on resnet50 and vgg16: blocks two or
// three an SM beat larger ones with deeper pipelines except on vgg16's K >= 256 layers (128x256);
// 128x64 in three stages took every K = 64 layer; 64x128 in three stages won where the reduction is
// at least 512 rows, K at most 512 and its grid fills two waves but not three of 128x128 (5 of 5
// such resnet50 layers; vgg16's 112x112 layers, 3136 blocks of 128x128, ran 10% faster on those),
// 128x128 the rest down to half the SMs; cluster splits of these tiles lost (stage 3: 0.027 -> 0.044
// ms), so late-stage grids take 64x128 without one. With tensor-map loads (Note [wgmma tensor-map
// loads]) the same picks held within a few percent on resnet50, cluster splits of 2-8 still lost on
// every stage-3/4 layer, and 128x256 won down to two thirds of a wave (vgg16's 14x14 layer, 98
// blocks: 52 us against 70 for 64x128). Two picks moved: 3x3 layers with a reduction of 2048 rows or
// more and at most a wave of 128x128 blocks went to 64x128 in four stages (stage 3: 28 -> 24 us),
// and single-stage reductions (C = 64 1x1) to 128x64, three blocks an SM (50 -> 47 us).
// With tensor maps, a 1x1 layer (or one of K/G <= 64, or of at most 576 rows) of at least two and a
// half waves of 128x64 tiles runs them persistent: 784-3136 such tiles (resnet50's stages 1-3) ran
// 10-28% faster than the planner's earlier picks (l1_1x1b 48.2 -> 34.7 us, l2_1x1b 27.8 -> 21.4),
// 392 and fewer (stage 2's 1x1c, stage 4) 5-10% slower, as did every 3x3 layer of K/G >= 128 but
// vgg16's 64-channel one (576 rows: 166 -> 153 us; 128 channels, 1152 rows: 265 -> 261, not taken).
// Grids of at most one tile an SM with a reduction of at most 512 rows (multi_channel's batch-1 1x1
// layers, 8-98 tiles) also ran 12-27% faster persistent than on cluster splits of 64x128 or on
// mma.sync tiles; stage 4's 1x1c (104 tiles of 2048 rows) 16% slower. K/G <= 64 layers take 128x64
// down to half a wave (multi_channel's 112x112 3x3 and 5x5 layers: 13.3 -> 8.8 us and 28.1 -> 15.9
// against mma.sync's 64x64). 1x1 layers of at most 16 filters take it at any number of tiles (Note
// [mma narrow filter tiles]: 512 tiles of 8 filters, 17.0 us against 21.4 on the 128x16 tile).
// Where a 1x1 layer's 128x64 tiles make less than 2.5 waves, 64x64 tiles persistent ran faster for
// K/G of 64-256, and for larger K/G on grids of at most one such tile an SM with a reduction of at
// most 512 rows (bf16, every layer forced to each tile, one call): multi_channel's batch-1 1x1
// layers 4-10% (h7_c512 7.39 -> 6.84 us, h28_c256 5.70 -> 5.20, h224_c64 9.60 -> 8.70), resnet50's
// l3_1x1c 16.09 -> 14.51 (196 tiles of 1024 rows, K = 256), l2_1x1c 18.44 -> 18.08; stage 4's 1x1
// layers (K/G >= 512, reductions of 1024-2048 rows) ran 10-50% slower on them, and 2.5 waves and
// more of 128x64 tiles (resnet50's stages 1-3) up to 14% slower.
// Ping-pong blocks (Note [wgmma warp-specialized tiles]), measured the same way (bf16 NHWC, resnet50, vgg16
// and multi_channel, every layer forced onto each tile's ping-pong form, one call;
// docs/PERFORMANCE.md has the table), forward layers only:
// - 1x1 layers of at least 256 channels and at most one 64x64 tile an SM (multi_channel's batch-1
//   7x7-28x28 layers) on 64x64: 6.73 -> 5.50 us (h7_c512), 7.05 -> 5.76, 5.12 -> 4.64;
// - 1x1 layers of at least 512 channels and 128-1024 filters on 64x128: resnet50's l4_1x1c 18.5 ->
//   14.4 us, l4_1x1a 21.2 -> 18.2, l3_ds 21.9 -> 19.5, l3_1x1a 23.8 -> 21.8, l2_1x1c 17.2 -> 16.7;
//   2048 filters lost (l4_ds 20.1 -> 24.5), and fewer channels lost 3-13% (l1_1x1b, l2_1x1b);
// - layers of a larger filter and K/G <= 64 on 128x64, down to half a wave: l1_3x3 28.4 -> 26.1,
//   vgg16's first 3x3 313 -> 283, multi_channel's 112x112-512x512 3x3 and 5x5 layers 7-17%;
// - layers of a larger filter and K/G >= 128 with more than half a wave of 128x128 tiles on 128x128
//   (vgg16's c128 layers 263 -> 203 and 127 -> 105 us, its c256 ones 195 -> 188 and 98.7 -> 96.5
//   against 128x256, stage 3's 3x3 layers 23.8 -> 21.6-21.9) or, where its tiles take as many rounds
//   of the SMs, 64x128 (stage 2's 28x28 3x3 layers 26.6 -> 23.4, 23.6 -> 20.8: 196 tiles of 128x128
//   take two rounds, 392 of 64x128 three); a 128x128 tile costs about 1.7 times a 64x128 one. The
//   128x256 tile kept the reductions of more than 2304 rows it took (vgg16's c512 layers: 169 and
//   53 us against 212 and 72), until the stmatrix epilogue put them on 128x128 cooperative (below).
// 1x1 layers of 64 channels, of 128-256 with many tiles, and stage 4's 3x3 layers (the split rule)
// kept their tiles.
// Cooperative blocks (both consumer warpgroups on every 128-pixel tile), measured the same way
// (resnet50 forward and dgrad, multi_channel; one call):
// - where at most one and more than half a wave of 128x128 tiles would leave a ping-pong block's
//   second warpgroup idle, 128x128 cooperative: stage 3's 3x3 layers 21.3 -> 19.5 us and 20.8 ->
//   18.8, l3_1x1c 14.0 -> 12.6 (98 tiles); at half a wave and less (l4_1x1c, 52 tiles) it lost 8%;
// - layers of a larger filter and K/G <= 64 with at most three waves of 128x64 tiles, 128x64
//   cooperative: multi_channel's 112x112 3x3 8.08 -> 7.36, 5x5 13.4 -> 12.5, 224x224 3x3 15.2 ->
//   14.7 (its 5x5 within 1%); more tiles ran faster ping-pong (l1_3x3, the 512x512 maps);
// - the stride-1 dgrad steps (N-major filters) of reductions of 256-2304 rows, where the other
//   forms had won on some and lost up to 19% on others: 128x128 cooperative for K/G >= 256 or 1024
//   and more rows over more than half a wave (l3_3x3 26.3 -> 21.4, l4_1x1a 24.0 -> 19.6, l3_1x1b
//   15.4 -> 13.1, l2_3x3 25.9 -> 23.1, l3_1x1a 29.5 -> 27.1, l3_1x1c 16.2 -> 15.2), 128x64
//   cooperative otherwise (l4_1x1b 21.9 -> 17.7 on 104 tiles, l2_1x1b 18.4 -> 16.6, l1_3x3 29.1 ->
//   26.9). Shorter reductions lost (l1_1x1a-c, l2_1x1a, l2_1x1c: 64-256 rows, 2-36%), as did stage
//   4's 3x3 (4608 rows: 27.3 -> 35.0 against the split 128x256).
// Cooperative tiles split between the two blocks of a cluster (each adding and storing half the
// tile), measured the same way: a quarter to an eighth of a wave of 128x256 tiles of a long
// reduction (stage 4's forward 3x3 layers, 52 tiles of 128x128) on 128x128 split 2: l4_3x3 25.9 ->
// 24.2 us, l4_3x3s2 25.6 -> 23.3 against 128x256 split 4 (l4_3x3's dgrad step then lost, 27.5 -> 27.7, and
// won once the epilogue stored with stmatrix: 26.8 -> 23.1 on an H200); the
// stride-1 dgrad steps of half a wave and less of 128x128 tiles on 128x128 split 2 (l4_1x1b 18.5 ->
// 16.7 against 128x64 unsplit); batch-1 3x3 layers of K/G 128-256, at most 2304 rows and an eighth
// to half a wave of 128x64 tiles on 128x64 split 2 (multi_channel's h56_c128_k3 11.6 -> 9.1,
// h28_c256_k3 12.5 -> 11.9 against 64x128 split 3 and 6). Layers of more tiles than clusters lost
// up to 15x (a cluster's blocks hand over every tile's sums), as did stage 4's 1x1 forward layers
// (l4_1x1c 14.6 -> 15.5).
// `form`: the split, persistent or warp-specialized form the tile was measured with, where the rule
// sets one; `beside_other_steps`: a backward step sharing the GPU with others of its pass.
int choose_vector_tile(const Problem& p, const HardwareModel& hw, int64_t rows, bool warpgroup, bool tensor_maps,
                       bool y_dense, bool filters_k_major, bool beside_other_steps, TileRunForm& form,
                       std::vector<std::string>& why) {
  const int64_t cols = p.n * p.p() * p.q(), kg = p.k_per_group();
  const int sms = std::max(hw.sm_count, 1);
  auto blocks = [&](int bm, int bn) { return ceil_div(cols, bm) * ceil_div(kg, bn) * p.groups; };
  auto pick = [&](const char* name, const std::string& reason) {
    why.push_back(std::string("tile ") + name + ": " + reason + " (measured best for such layers on Hopper)");
    return find_mma_tile(name);
  };
  const std::string shape = "K/G = " + std::to_string(kg) + ", C/G*R*S = " + std::to_string(rows) + ", ";
  if (warpgroup) {  // Note [wgmma mainloop]
    const int persistent_tile = find_mma_tile("wgmma128x64_s3");
    const int64_t wave = persistent_blocks(kMmaTileCatalog[persistent_tile], hw);
    const int64_t tiles = blocks(128, 64);
    const bool few_short_tiles = tiles <= sms && rows <= 512;
    const bool fills_128x256 =
        kg >= 256 && rows >= 1152 && blocks(128, 256) >= (tensor_maps ? sms * 2 / 3 : sms * 3 / 4);
    // A quarter to an eighth of a wave of 128x256 tiles of a long reduction (stage 4's 3x3 layers).
    const bool quarter_wave_128x256 =
        kg >= 256 && p.r * p.s > 1 && rows >= 2048 && blocks(128, 256) * 4 <= sms && blocks(128, 256) * 8 >= sms;
    // The steps of a strided layer's dgrad (N-major filters, writing every stride-th pixel of dx) that
    // run alone; the phases that run beside each other take SM shares below. These rules were measured
    // on the plain tiles before the shares: 128x128 unsplit (bf16, resnet50's dgrad, every step forced
    // onto each tile unsplit, one call): l4_3x3s2 42.8 -> 32.9 us against 64x128 and a 4-way split
    // 128x256, l2_3x3s2 41.9 -> 36.6 against 64x128 on one phase, l2_ds 54.5 -> 51.9; no such layer
    // slower (l3_3x3s2, l3_ds, l4_ds within 1%). Where those tiles make more than half a wave and at
    // most one over a reduction of at most 1024 rows, 128x64 (the same sweep later, with pixel-row
    // maps: l3_3x3s2's four steps of 98 tiles 33.4 -> 30.6 us, 33.9 -> 30.9 in the suite's run against
    // cuDNN; l4_ds's step, 104 tiles of 2048 rows, 33.2 -> 32.4 in the sweep but 33.8 -> 36.1 in the
    // suite's run, keeps 128x128; stage 4's 52 tiles a step and stage 2-3's 196 and more ran 10-45%
    // slower).
    // (A 1x1 stride-2 layer's one step over one round of 128x128 tiles had run 64x128 before the
    // cooperative rule below: l4_ds 39.7 -> 29.4 us in a sweep forcing every step onto it.)
    // A strided 1x1 layer's one step on cooperative 128x128 (Note [wgmma strided dgrad stores]: its
    // filter pairs stored from the accumulators; bf16, resnet50's dgrad, every step forced onto each
    // warp-specialized form, one call, bench/results/latest/dgrad_accumulator_stores/): l4_ds's 104
    // tiles 28.9 -> 25.4 us against 64x128, l2_ds's 392 42.4 -> 39.2 against plain 128x128; on
    // l3_ds's 196 tiles, between one and two waves of one block an SM, plain 128x128 two an SM won
    // (29.3 against 31.6). Not the phase steps that run beside each other (a strided 3x3 layer's):
    // forced there on whole waves with pair stores they ran 1-33% slower, and with only the one-tap
    // phase of l3_3x3s2 on it (98 tiles) that layer went 30.1 -> 39.1 us, its blocks holding SMs
    // the other phases could use; such steps take SM shares below.
    if (tensor_maps && !y_dense && !filters_k_major && kg >= 128) {
      form.split = 1;
      const int64_t tiles_128 = blocks(128, 128);
      if (p.r * p.s == 1 && !beside_other_steps && (tiles_128 <= sms || tiles_128 > 2 * sms)) {
        form.persistent = true;
        form.consumers = ConsumerSchedule::Cooperative;
        return pick("wgmma128x128_s3", shape + std::to_string(tiles_128) +
                                           " tiles, cooperative blocks (N-major filters, a strided y, one round of "
                                           "the SMs or three and more)");
      }
      // The phases of a strided layer, which run beside each other: ping-pong 128x128, each step's
      // persistent grid its share of the SMs (Note [phase steps' SM shares]), storing 16-byte runs
      // of filters (Note [strided dgrad pixel runs]). bf16, resnet50's dgrad, one build, the best
      // of two calls each, against these layers' plain 128x128 and 128x64 tiles: l2_3x3s2 35.1 ->
      // 30.7 us, l3_3x3s2 30.0 -> 22.8, l4_3x3s2 32.7 -> 21.2; cooperative blocks on the same
      // shares 34.5, 23.5, 20.5; a whole wave for each step 32.7-33.4, 25.8-27.9, 28.3-30.6.
      if (beside_other_steps) {
        form.persistent = true;
        form.consumers = ConsumerSchedule::PingPong;
        return pick("wgmma128x128_s3", shape + std::to_string(tiles_128) +
                                           " tiles, ping-pong blocks on this step's share of the SMs (N-major "
                                           "filters, a strided y, beside the other steps of its pass)");
      }
      const bool one_round_128 = tiles_128 * 2 > sms && tiles_128 <= sms;
      if (one_round_128 && rows <= 1024)
        return pick("wgmma128x64_s3", shape + std::to_string(blocks(128, 64)) +
                                          " blocks, unsplit (N-major filters, a strided y; 128x128 would make one "
                                          "round of the SMs or less)");
      return pick("wgmma128x128_s3",
                  shape + std::to_string(tiles_128) + " blocks, unsplit (N-major filters, a strided y)");
    }
    // Note [wgmma warp-specialized tiles]: layers loading through tensor maps and storing dense y.
    if (tensor_maps && y_dense) {
      auto specialized = [&](const char* name, int bm, int bn, ConsumerSchedule consumers, int split = 1) {
        form.persistent = true;
        form.consumers = consumers;
        form.split = split;
        return pick(name, shape + std::to_string(blocks(bm, bn)) + " tiles of " + std::to_string(bm) + "x" +
                              std::to_string(bn) + ", " + persistent_form_word(consumers) + " blocks" +
                              (split > 1 ? ", a cluster of " + std::to_string(split) + " a tile" : ""));
      };
      constexpr auto kPingPong = ConsumerSchedule::PingPong, kCooperative = ConsumerSchedule::Cooperative;
      // More than half a wave of 128x128 tiles, at most one: ping-pong would leave a warpgroup idle.
      const int64_t tiles_128 = blocks(128, 128);
      const bool one_round_128 = tiles_128 * 2 > sms && tiles_128 <= sms;
      const bool two_waves_128 = tiles_128 >= 2 * sms;  // Note [output buffer stores]: 128x128 ping-pong
      // Forward layers, and since the stmatrix epilogue (Note [output buffer stores], kernel.cuh) the
      // stride-1 dgrad steps of such reductions too (H200, bf16 NHWC, stages 2-4 forced onto each
      // cooperative split, one call: l4_3x3's step 26.8 -> 23.1 us against 128x256 split 4).
      if (quarter_wave_128x256) return specialized("wgmma128x128_s3", 128, 128, kCooperative, 2);
      if (filters_k_major) {  // forward layers
        if (p.r * p.s > 1 && kg >= 128 && kg <= 256 && rows <= 2304 && tiles * 2 <= sms && tiles * 8 >= sms)
          return specialized("wgmma128x64_s3", 128, 64, kCooperative, 2);
        if (p.r * p.s == 1 && rows >= 256 && kg >= 64 && blocks(64, 64) <= sms)
          return specialized("wgmma64x64_s3", 64, 64, kPingPong);
        // Note [wgmma wave-fitted filter tiles]: 1x1 layers of 1024 filters or more whose 128x208
        // tiles make 7/8 to one wave (l4_1x1b 14.0 -> 11.9 us, l4_ds 20.0 -> 16.2 against 128x128;
        // ping-pong 64x208 12.4 and 19.6; 128x208 lost on stage 3-4's other 1x1 layers).
        if (p.r * p.s == 1 && rows >= 512 && kg >= 1024 && blocks(128, 208) * 8 > sms * 7 && blocks(128, 208) <= sms)
          return specialized("wgmma128x208_s4", 128, 208, kCooperative);
        // Note [output buffer stores] (kernel.cuh): with the cheaper epilogue, 1x1 layers of two
        // waves or more of 128x128 tiles ran fastest on 128x128 ping-pong (H200, bf16 NHWC, every
        // resnet50 layer forced onto each tensor-map form, one call): l1_1x1b 23.7 -> 20.1 us,
        // l2_1x1a 26.2 -> 22.3, l2_1x1b 15.7 -> 13.9, l2_ds 22.4 -> 17.3 against 128x64 persistent,
        // l3_1x1b 12.4 -> 10.5 against 64x128 ping-pong; l3_ds 16.3 -> 15.0 and l3_1x1a 17.1 -> 16.3,
        // within 1-2% of 128x128 cooperative there. Fewer tiles (l2_1x1c, 196) and K/G = 64 (stage
        // 1's 1x1a and 1x1c) ran slower.
        if (p.r * p.s == 1 && kg >= 128 && two_waves_128) return specialized("wgmma128x128_s3", 128, 128, kPingPong);
        if (p.r * p.s == 1 && rows >= 512 && kg >= 128 && one_round_128)
          return specialized("wgmma128x128_s3", 128, 128, kCooperative);
        if (p.r * p.s == 1 && rows >= 512 && kg >= 128 && kg <= 1024)
          return specialized("wgmma64x128_s4", 64, 128, kPingPong);
        if (p.r * p.s > 1 && kg <= 64 && tiles * 2 >= sms)
          return specialized("wgmma128x64_s3", 128, 64, tiles <= 3 * sms ? kCooperative : kPingPong);
        // Layers of a larger filter and K/G >= 128 over more than half a wave of 128x128 tiles: 128x128
        // cooperative since the stmatrix epilogue (Note [output buffer stores], kernel.cuh; H200, bf16
        // NHWC, vgg16's layers forced onto each form, one call) where the reduction is 1024 rows or
        // more: vgg16's c128-c256 layers 1-7% faster than on ping-pong (c256_h56 170.4 -> 158.4 us,
        // c256_h28 85.8 -> 80.4), its c512 layers' 4608-row reductions 164.6 -> 152.3 and 54.0 ->
        // 53.1 against 128x256; its c64_h112 layer (576 rows) ran 1% slower and stays ping-pong.
        // Where 64x128 tiles take as few rounds of the SMs as 128x128 ones would nearly (stage 2's
        // 28x28 3x3 layers: 392 and 196 tiles, three rounds and two), 64x128 ping-pong stays (within
        // 1% of 128x128 cooperative).
        if (p.r * p.s > 1 && kg >= 128 && tiles_128 * 2 > sms) {
          if (!one_round_128) {
            const int64_t rounds_128 = ceil_div(tiles_128, sms), rounds_64 = ceil_div(blocks(64, 128), sms);
            if (rows <= 2304 && rounds_128 * 17 > rounds_64 * 10)
              return specialized("wgmma64x128_s4", 64, 128, kPingPong);
            if (rows < 1024) return specialized("wgmma128x128_s3", 128, 128, kPingPong);
          }
          return specialized("wgmma128x128_s3", 128, 128, kCooperative);
        }
      } else if (p.r * p.s == 1 && rows <= 128 && kg >= 256 && two_waves_128) {
        // Stride-1 1x1 dgrad steps of short reductions over two waves or more of 128x128 tiles, with
        // the cheaper epilogue (Note [output buffer stores], kernel.cuh): 128x128 ping-pong against
        // 128x64 persistent (H200, bf16 NHWC, every step forced onto each form, one call): l1_1x1c
        // 24.8 -> 21.0 us, l2_1x1a 31.9 -> 25.3, l2_1x1c 17.2 -> 13.9. Longer reductions (256 rows
        // and more) were mixed on it (l3_1x1a 2% faster, l3_1x1c and l4_1x1a 4% slower than on their
        // cooperative tiles), and keep those.
        return specialized("wgmma128x128_s3", 128, 128, kPingPong);
      } else if (rows >= 256 && rows <= 2304 && kg >= 64) {  // stride-1 dgrad steps (N-major filters)
        if (kg <= 64 && rows >= 512) return specialized("wgmma128x64_s3", 128, 64, kCooperative);
        if (kg >= 128 && (kg >= 256 || rows >= 1024))
          return specialized("wgmma128x128_s3", 128, 128, kCooperative, tiles_128 * 2 > sms ? 1 : 2);
        if (kg >= 128) return specialized("wgmma128x64_s3", 128, 64, kCooperative);
      }
    }
    if (tensor_maps && y_dense && p.r * p.s == 1 && kg >= 64 && tiles * 2 < wave * 5 &&
        (few_short_tiles || kg <= 256)) {
      form.persistent = true;
      return pick("wgmma64x64_s3", shape + std::to_string(blocks(64, 64)) + " tiles of 64x64, persistent blocks");
    }
    if (tensor_maps && y_dense && (p.r * p.s == 1 || kg <= 64 || rows <= 576) &&
        (tiles * 2 >= wave * 5 || few_short_tiles || (p.r * p.s == 1 && kg <= 16))) {
      form.persistent = true;
      return pick("wgmma128x64_s3", shape + std::to_string(tiles) + " tiles, " + std::to_string(std::min(tiles, wave)) +
                                        " persistent blocks walking them");
    }
    if (fills_128x256) return pick("wgmma128x256_s4", shape + std::to_string(blocks(128, 256)) + " blocks");
    if ((kg <= 64 || (tensor_maps && rows <= 64)) && (tiles >= sms || (tensor_maps && kg <= 64 && tiles * 2 >= sms)))
      return pick("wgmma128x64_s3", shape + std::to_string(tiles) + " blocks");
    // Long reductions over a grid of a quarter of a wave of the largest tile (stage 4's 3x3 layers,
    // forward and dgrad): that tile split 4 ways in a cluster reads half the L2 bytes of unsplit
    // 64x128 tiles, which are L2-bound there (resnet50 bf16: l4_3x3 32.9 -> 26.4 us forward, 41.8 ->
    // 27.4 dgrad; l4_3x3s2 33.0 -> 26.4). Stage 3's 3x3 layers (49 such tiles, split 2) lost 10%, and
    // batch-1 grids of fewer than an eighth of the SMs (1-5 such tiles, mostly empty: multi_channel's
    // 7x7-28x28 maps) 1.5-2x against 64x128 in four stages.
    if (tensor_maps && quarter_wave_128x256) {
      form.split = 4;
      return pick("wgmma128x256_s4",
                  shape + std::to_string(blocks(128, 256)) + " blocks, each split 4 ways in a cluster");
    }
    if (tensor_maps && kg >= 128 && kg <= 512 && p.r * p.s > 1 && rows >= 2048 && blocks(128, 128) <= sms)
      return pick("wgmma64x128_s4", shape + std::to_string(blocks(64, 128)) + " blocks, four stages");
    if (kg >= 128 && kg <= 512 && rows >= 512 && blocks(64, 128) >= 2 * sms && blocks(128, 128) <= 3 * sms)
      return pick("wgmma64x128_s3", shape + std::to_string(blocks(64, 128)) + " blocks, three a SM");
    if (kg >= 128 && blocks(128, 128) > sms / 2)
      return pick("wgmma128x128_s3", shape + std::to_string(blocks(128, 128)) + " blocks");
    if (kg >= 128) return pick("wgmma64x128_s4", shape + std::to_string(blocks(64, 128)) + " blocks");
  }
  // TF32 steps with w's filters contiguous (a channels-last dgrad step; wgmma takes no transposed TF32
  // operand, so they run mma.sync) whose 128x128 tiles leave SMs idle: 128x128 split 2 ways in a
  // cluster. Measured on the H100 (resnet50 TF32 NHWC dgrad, every step forced to each tile,
  // bench/results/latest/tile_sweep_dgrad_tf32_nhwc/): l3_3x3 103.6 -> 88.0 us, l3_1x1b 59.2 -> 47.2,
  // l4_ds 114.2 -> 89.2 (98-104 tiles, unsplit 128x128 before); l4_3x3 125.4 -> 102.9, l4_1x1b
  // 60.6 -> 58.1, l4_3x3s2's phases 123.0 -> 113.5 (52 tiles, unsplit 64x64 before). With 196 tiles
  // the split lost (l3_ds 94.1 -> 105.4, l2_1x1b 49.5 -> 58.6). Batch-1 grids of a few tiles keep the
  // general rule.
  if (!warpgroup && wgmma_device(hw) && !filters_k_major && kg >= 128 && blocks(128, 128) < sms &&
      blocks(128, 128) * 8 >= sms) {
    form.split = 2;
    return pick("mma128x128_8w_128B", shape + std::to_string(blocks(128, 128)) +
                                          " blocks, TF32 filters contiguous, split 2 ways in a cluster");
  }
  if (kg >= 256 && rows >= 1152 && blocks(128, 256) >= sms * 3 / 4)
    return pick("mma128x256_8w_128B", shape + std::to_string(blocks(128, 256)) + " blocks");
  if (kg >= 128 && blocks(128, 128) >= sms / 2)
    return pick("mma128x128_8w_128B", shape + std::to_string(blocks(128, 128)) + " blocks");
  if (kg <= 64 && rows >= 256 && blocks(128, 64) >= 2 * sms)
    return pick("mma128x64_4w_128B", shape + std::to_string(blocks(128, 64)) + " blocks");
  return pick("mma64x64_4w_128B", shape + std::to_string(blocks(64, 64)) + " blocks");
}

// Note [mma narrow filter tiles]: a layer of at most 16 filters a group leaves three quarters or more
// of a 64-wide tile's columns empty, and the tile still multiplies and copies them: a first layer's
// dgrad, whose filters are the image's 3 channels, spent 61 of every 64 columns' work on zeros and ran
// at 5 TFLOP/s. Output layers of 1-16 channels (restoration and segmentation heads) are the same
// shape. The 128x16 tile (4 warps of 32x16, every gather form) spends a quarter as much a pixel.
// Measured on the H100 (bench/suites/narrow_output.csv and resnet50's conv1 dgrad, every layer
// forced to each tile): conv1's dgrad 1544 -> 743 us against 128x64 (2149 on 64x64); bf16 NHWC 3x3
// output layers 152 and 79 us against 175 and 85 for 128x64 wgmma tiles with tensor maps, persistent
// or not, and 240 and 96 for mma.sync 128x64; TF32 NCHW 1.42x the 128x64 element tile over the suite.
// 1x1 layers that take the persistent wgmma tile's rule keep it: 17 us against 21 (8 filters), 24
// against 28.5 (16); with one filter, not whole 16-byte runs, that tile runs its plain form, 39 us
// against 62. Forward and dgrad steps only: a wgrad step's columns are the layer's
// C*R*S. -1 where it does not apply.
int choose_narrow_tile(const Problem& p, bool long_reduction, std::vector<std::string>& why) {
  const int tile = find_mma_tile("mma128x16_4w_128B");
  const int64_t kg = p.k_per_group();
  if (long_reduction || kg > kMmaTileCatalog[tile].block_n) return -1;
  why.push_back("tile mma128x16_4w_128B: K/G = " + std::to_string(kg) +
                " filters fill a 16-wide tile, a quarter or less of a 64-wide one (Note [mma narrow filter tiles])");
  return tile;
}

// The element gather (layouts or channel counts the vector gather cannot take): the largest tile with
// that form whose grid fills the SMs.
// The tiles a non-vector plan can take: the element-gather tiles, or on sm_90 for the both-transposed
// form the wgmma tiles (Note [wgmma mainloop]); the catalog lists each kind largest first. A wgmma
// tile more than twice the layer's pixels (a wgrad step's M is its K filters) is passed over. The
// narrow tile, wgmma 64x64 and the deep tiles are left to their own rules (choose_narrow_tile,
// choose_split_tile).
/// The tiles of tile shape `t` over a step's GEMM (its N*P*Q columns by K/G filters, every group).
int64_t tile_count(const Problem& p, const MmaTileShape& t) {
  return ceil_div(p.n * p.p() * p.q(), int64_t(t.block_m)) * ceil_div(p.k_per_group(), int64_t(t.block_n)) * p.groups;
}
bool split_candidate(const MmaTileShape& t, bool warpgroup) {
  const bool own_rule = t.block_n < 64 || (t.warpgroup && t.block_m == 64 && t.block_n == 64) ||
                        t.stages == kDeepTileStages || !t.plain_forms;
  return !own_rule && (warpgroup ? t.warpgroup : t.element_gather);
}
int last_candidate(bool warpgroup) {
  int last = -1;
  for (int i = 0; i < int(kMmaTileCatalog.size()); ++i)
    if (split_candidate(kMmaTileCatalog[i], warpgroup)) last = i;
  return last;
}

int choose_element_tile(const Problem& p, const HardwareModel& hw, bool warpgroup, std::vector<std::string>& why) {
  const int64_t cols = p.n * p.p() * p.q(), kg = p.k_per_group();
  const int sms = std::max(hw.sm_count, 1);
  const int last = last_candidate(warpgroup);
  for (int i = 0; i <= last; ++i) {
    const MmaTileShape& t = kMmaTileCatalog[i];
    if (!split_candidate(t, warpgroup) || (kg <= t.block_n / 2 && t.block_n > 64) ||
        (warpgroup && cols <= t.block_m / 2 && t.block_m > 64))
      continue;
    const int64_t blocks = tile_count(p, t);
    if (blocks >= sms || i == last) {
      std::ostringstream os;
      os << "tile " << t.name() << ": " << blocks << " blocks for " << sms << " SMs (K/G = " << kg
         << ", N*P*Q = " << cols << "); the largest " << (warpgroup ? "wgmma" : "element-gather")
         << " tile that fills the SMs";
      why.push_back(os.str());
      return i;
    }
  }
  return last;
}

// TF32 element gathers on sm_90 (NCHW 3x3 and strided layers): one 4-byte copy an element bounds
// them, and a larger tile copies fewer elements per MMA; where its grid leaves SMs idle the cluster
// split fills them. Measured on the H100 (resnet50 tf32 NCHW, every layer forced to each element
// tile): 128x128 with K/G >= 128 beat the tiles that fill the SMs unsplit on stage 3's 3x3 (199 us
// against 216 for 128x64) and stage 4's 3x3 and 1x1 layers (199-200 us against 279-281 for 64x64,
// split 3 ways); 128x64 stayed best at K/G = 64 (l1_3x3 155 us against 217). Split 2 ways where its
// tiles fill more than half the SMs but not all, as Note [mma element tiles] found for filter rows:
// l3_3x3's dgrad step (98 tiles) 199.8 -> 150.7 us (tile_sweep_dgrad_nchw; its strided phase steps,
// four at once on side streams, lost 228.7 -> 242.1). Below half a wave the general split rule
// (stage 4's 52 tiles in 3: l4_3x3's dgrad 200.4 us against 207.6 for 64x128 split 2 ways). -1
// outside that rule, and for reductions longer than the measured 4608 rows (a wgrad step's N*P*Q).
int choose_tf32_element_tile(const Problem& p, const HardwareModel& hw, int64_t rows, int& split,
                             std::vector<std::string>& why) {
  const int64_t kg = p.k_per_group();
  const char* name = kg >= 128 ? "mma128x128_8w_64B" : kg > 32 ? "mma128x64_4w_64B" : nullptr;
  split = 0;
  if (!name || rows > 4608) return -1;
  const int sms = std::max(hw.sm_count, 1);
  const int64_t tiles = tile_count(p, kMmaTileCatalog[find_mma_tile(name)]);
  if (kg >= 128 && tiles < sms && tiles * 2 > sms) split = 2;
  why.push_back(std::string("tile ") + name + ": TF32 element gather, K/G = " + std::to_string(kg) + ", " +
                std::to_string(tiles) + " tiles for " + std::to_string(sms) + " SMs" +
                (split == 2 ? ", split 2 ways: they fill more than half the SMs" : "") +
                " (measured best for such layers on the H100; the cluster split fills the SMs where the tiles leave "
                "them idle)");
  return find_mma_tile(name);
}

// Note [mma element tiles]: the tile of a step that gathers its images element by element, on
// sm_90, for K/G >= 128: forward steps with w's rows as vectors (Note [mma filter rows]), and dgrad
// steps with w flipped or transposed (in TF32 only those with w's filters contiguous, which only
// mma.sync tiles take; element filters keep choose_tf32_element_tile). Measured on the H100 (resnet50 batch 32,
// every layer forced to each element tile, unsplit and split 2 ways):
// - forward, filter rows (bench/results/latest/tile_sweep_filter_rows/):
//   - TF32: 128x128 where its tiles fill the SMs (stage 2); split 2 ways where they fill more than
//     half (stage 3's 98 tiles: l3_3x3 154 -> 121 us, l3_3x3s2 155 -> 124); below that 64x128 split
//     2 ways (stage 4's 52 tiles of 128x128 split 3 ways: l4_3x3 157 -> 142, l4_1x1c 83 -> 73);
//   - fp16/bf16: 64x128 on short reductions (at most 512 rows) of 392 tiles of 128x128 (l3_1x1b 70
//     -> 53 us, l3_ds 123 -> 92; with 208 tiles l4_1x1b lost 51 -> 54) and where 128x128 tiles leave
//     SMs idle (l3_3x3 191 -> 101, l3_1x1c 110 -> 54, against the 128x64 tiles that filled them),
//     split 2 ways below half a wave (l4_3x3 171 -> 105, l4_3x3s2 178 -> 110); 128x128 otherwise
//     (stage 2's 3x3 101 us against 110, l4_ds 94 against 101);
// - dgrad steps in NCHW, the same rule against the largest tile that filled the SMs, which they took
//   before (bench/results/latest/tile_sweep_dgrad_nchw/): bf16 l4_ds 208 -> 108 us, l3_1x1b 102 ->
//   51, l4_3x3 410 -> 227, l4_1x1b 78 -> 53, l3_3x3 277 -> 219, l4_1x1a 108 -> 79, l3_1x1c 69 -> 51,
//   l4_3x3s2 359 -> 304; lost l3_3x3s2 251 -> 257. Short reductions of about one wave kept 128x128
//   (l2_3x3s2's phase steps, 196 tiles: 228 against 288 us on 64x128; l4_1x1c, 208: 49 against 52),
//   hence "two waves" above. TF32 element images over contiguous filters: l4_1x1b 102 -> 74, l4_ds
//   195 -> 165.
// - batch-1 layers (multi_channel NCHW forward, this rule against the general one in one call,
//   bench/results/latest/tile_sweep_multi_channel_nchw/): with 4-14 tiles of 128x128 the general
//   rule's 64x64 tiles split 3-16 ways won by 1.2-5x (h7_c512_k3 TF32 25.4 against 101.9 us); with
//   25 (h56_c128) this rule's 64x128 split 2 ways won (k3 50.1 -> 34.3, k5 135.3 -> 82.4).
// -1 outside the rule, and on grids of fewer than an eighth of the SMs' worth of 128x128 tiles,
// which take the general rule. `split` is the cluster split it asks for (0: the general rule's).
int choose_element_image_tile(const Problem& p, const HardwareModel& hw, int64_t rows, int esz, int& split,
                              std::vector<std::string>& why) {
  split = 0;
  const int sms = std::max(hw.sm_count, 1);
  const int64_t large = tile_count(p, kMmaTileCatalog[find_mma_tile("mma128x128_8w_64B")]);
  if (p.k_per_group() < 128 || rows > 4608 || large * 8 < sms) return -1;
  const char* name;
  std::string reason;
  if (esz == 4) {
    name = large * 2 > sms ? "mma128x128_8w_64B" : "mma64x128_8w_64B";
    if (large < sms) split = 2;
    reason = large >= sms      ? "its tiles fill the SMs"
             : large * 2 > sms ? "its tiles fill more than half the SMs, split 2 ways"
                               : "128x128 tiles fill less than half the SMs, split 2 ways";
  } else {
    const bool short_many = rows <= 512 && large >= 2 * sms;
    name = short_many || large < sms ? "mma64x128_8w_64B" : "mma128x128_8w_64B";
    if (large * 2 <= sms) split = 2;
    reason = short_many     ? "a short reduction over two waves of 128x128 tiles"
             : large >= sms ? "128x128 tiles fill the SMs"
             : split == 2   ? "128x128 tiles fill less than half the SMs, split 2 ways"
                            : "128x128 tiles leave SMs idle";
  }
  std::ostringstream os;
  os << "tile " << name << ": images gathered by the threads, K/G = " << p.k_per_group() << ", " << rows << " rows, "
     << large << " tiles of 128x128 for " << sms << " SMs: " << reason << " (measured best for such steps on the H100)";
  why.push_back(os.str());
  return find_mma_tile(name);
}

// Note [mma tf32 pixel runs]: on sm_90 the wgmma tile the vector rule picks (the same grids and
// reductions as a channels-last layer), else the element tiles' rule (-1).
int choose_pixel_run_tile(const Problem& p, const HardwareModel& hw, int64_t rows, bool warpgroup,
                          std::vector<std::string>& why) {
  if (!warpgroup) return -1;
  std::vector<std::string> reason;
  TileRunForm unused;
  const int tile = choose_vector_tile(p, hw, rows, true, false, false, false, false, unused, reason);
  if (!kMmaTileCatalog[tile].warpgroup) return -1;
  why.insert(why.end(), reason.begin(), reason.end());
  return tile;
}

// Note [mma cluster split]: slices of a tile's rows when the tiles leave SMs idle, as many as fill
// the SMs once (at most 16 blocks, Hopper's non-portable cluster, which the launcher lowers to 8
// where the device cannot schedule it; at least 4 row tiles a slice). Measured on the H100 (bf16
// resnet50 wgrad, 56x56 layers with 1-9 tiles): 16 slices ran them in half the time of 8.
int choose_cluster_split(int64_t blocks, int k_tiles, bool wgrad_tensor_maps, const HardwareModel& hw, int forced,
                         std::vector<std::string>& why) {
  if (forced > 0) {
    if (forced > kMaxClusterSplit)
      throw Error(Status::BadParam, "split_k: implicit_mma splits a tile among at most " +
                                        std::to_string(kMaxClusterSplit) + " blocks of a cluster, not " +
                                        std::to_string(forced));
    if (hw.cc_major < 9 && forced > 1)
      throw Error(Status::Unsupported, "split_k: implicit_mma's cluster split needs sm_90 or later");
    why.push_back("cluster split " + std::to_string(forced) + ": forced");
    return forced;
  }
  const int sms = std::max(hw.sm_count, 1);
  // A wgrad step loading through tensor maps (here: a deterministic plan; the others take atomic
  // slices) keeps at least 24 row tiles a slice, and splits a grid of a third of a wave or more 3
  // ways. Measured with the 16-byte cluster epilogue (resnet50 bf16, `--deterministic`, forced
  // splits): stage 3's 64-72 tiles of 128x64 ran 51-52 us unsplit, 30-32 split 3 ways (34-36 in 2, 32
  // in 4); its 1x1b/c layers (16 tiles, 98 row tiles) 33 us split 9 ways, 24 in 4; stage 4's 1x1
  // layers (128 tiles, 25 row tiles) gained under 6% split 2 ways and lost split 3. Forward grids keep
  // the rule above (multi_channel's batch-1 layers split 2-16 ways).
  if (hw.cc_major < 9 || (!wgrad_tensor_maps && blocks * 2 > sms) || blocks >= sms) return 1;
  const int64_t fill = wgrad_tensor_maps && blocks * 3 >= sms ? 3 : ceil_div(int64_t(sms), blocks);
  const int64_t min_rows = wgrad_tensor_maps ? 24 : 4;  // row tiles a slice keeps at least
  const int split =
      static_cast<int>(std::clamp<int64_t>(std::min<int64_t>(fill, k_tiles / min_rows), 1, kMaxClusterSplit));
  if (split > 1)
    why.push_back("cluster split " + std::to_string(split) + ": " + std::to_string(blocks) + " tiles for " +
                  std::to_string(sms) + " SMs, " + std::to_string(k_tiles) +
                  " row tiles (slices summed through distributed shared memory, in rank order)");
  return split;
}

// Note [mma cluster split]: for the long reductions of wgrad steps, whose M and N are a filter's.
// Where even the smallest tile leaves SMs idle, the largest tile with the element forms whose tiles,
// each split into slices of at least 8 row tiles (at most 16 slices), reach one block per SM; the
// element-tile rule (fill the SMs without a split) otherwise. Measured on the H100 (bf16 resnet50
// wgrad): 128x128 tiles split 4-9 ways beat split 64x64 ones by 10-25% on stage 3-4 layers of 128
// or fewer 64x64 tiles, and lost 2x where 64x64 tiles already filled the SMs (stage 4's 1x1 layers).
int choose_split_tile(const Problem& p, const HardwareModel& hw, int64_t rows, int esz, bool warpgroup,
                      bool tensor_maps, bool deterministic, std::vector<std::string>& why) {
  const int64_t cols = p.n * p.p() * p.q(), kg = p.k_per_group();
  const int sms = std::max(hw.sm_count, 1);
  // Note [wgmma deep tiles]: a wgrad step whose reduction is spread over at most 64 blocks, one an SM
  // (stage 1's 56x56 layers: one to four tiles in 16-block clusters when deterministic, one tile in
  // 64 slices otherwise), waits on its copies' latency: a block of wgmma64x64_s3 took 0.57 us a stage
  // with three stages in flight. The deep tiles keep seven in flight. Measured on the H100 (bf16
  // resnet50 wgrad, forced tiles): deterministic l1_1x1a/b/c 56/55/66 us -> 48/47/47 on
  // wgmma64x64_s8 (the 66 was the 64x128 tile's), l2_1x1a 66 -> 55 on wgmma64x128_s8 (four tiles,
  // eight of 64x64); one tile in 64 atomic slices 22.2 -> 20.3. They lost where the blocks were more:
  // 8-9 tiles in 16-block clusters 64-68 -> 94-118 us (16-block clusters of one block an SM do not all
  // fit at once), four tiles in 33 atomic slices 35 -> 51-61.
  if (warpgroup && tensor_maps) {
    const int64_t max_tiles = deterministic ? 4 : 1;
    for (const char* name : {"wgmma64x64_s8", "wgmma64x128_s8"}) {
      const MmaTileShape& t = kMmaTileCatalog[find_mma_tile(name)];
      const int64_t tiles = tile_count(p, t);
      // Past 64 filters a deterministic plan takes 64x128 where 64x64 tiles are too many.
      if (tiles <= max_tiles && (t.block_n == 64 || (deterministic && kg > 64))) {
        why.push_back(std::string("tile ") + name + ": " + std::to_string(tiles) +
                      " tiles, seven stages of copies in flight a block (measured best for such wgrad steps on "
                      "the H100)");
        return find_mma_tile(name);
      }
    }
  }
  // With tensor-map loads, 128x64 tiles each taking their whole reduction, where they make a third of
  // a wave, beat larger tiles split 8-9 ways in a cluster (resnet50 bf16 wgrad, stages 3-4: 71-81 us
  // -> 51-53 on the 3x3 and the 14x14 1x1 layers of 64-72 such tiles; stage 4's 1x1 layers 22 -> 17
  // us); with fewer (32 and below) the split still won (stage 3's 1x1b: 41 us split, 53 unsplit). Outside
  // a deterministic plan atomic groups then fill the wave (Note [mma atomic slices]). The wgrad
  // step's columns are x's channels at one tap, so C must be whole 128-column tiles.
  if (warpgroup && tensor_maps && p.n % 128 == 0 &&
      ceil_div(cols, int64_t(128)) * ceil_div(kg, int64_t(64)) * 3 >= sms) {
    const int tile = find_mma_tile("wgmma128x64_s3");
    why.push_back("tile wgmma128x64_s3: " + std::to_string(ceil_div(cols, int64_t(128)) * ceil_div(kg, int64_t(64))) +
                  " tiles, a third of a wave or more, no cluster (measured best for such wgrad steps on the H100)");
    return tile;
  }
  // A wgrad step of at most 64 filters (stage 1's layers) on wgmma 64x64: the 64x128 tile the loop
  // below ends on left half its columns empty.
  if (warpgroup && kg <= 64) {
    const int tile = find_mma_tile("wgmma64x64_s3");
    why.push_back("tile wgmma64x64_s3: K/G = " + std::to_string(kg) + " filters, " +
                  std::to_string(ceil_div(cols, int64_t(64)) * p.groups) +
                  " tiles (measured best for such wgrad steps on the H100)");
    return tile;
  }
  // A deterministic plan on tensor maps: the largest tile whose tiles fill the SMs in clusters of at
  // most 9 blocks, wgmma 64x64 last. Measured on the H100 (bf16 resnet50 wgrad, `--deterministic`,
  // forced tiles): the 28x28 layers' 3x3 steps ran 54.3 us on 9 tiles of 128x128 in clusters of 15,
  // 40.6 on 18 of 128x64 (s4) in clusters of 8; their 1x1 steps of 128 and 512 channels 38.0-38.2 on
  // 8 tiles of 64x128 in clusters of 16, 32.9-33.0 on 16 of 64x64 in clusters of 9.
  if (deterministic && warpgroup && tensor_maps) {
    constexpr int64_t kMaxDeterministicCluster = 9;
    std::vector<int> order;
    for (int i = 0; i < int(kMmaTileCatalog.size()); ++i)
      if (split_candidate(kMmaTileCatalog[i], true)) order.push_back(i);
    order.push_back(find_mma_tile("wgmma64x64_s3"));
    for (const int i : order) {
      const MmaTileShape& t = kMmaTileCatalog[i];
      if ((kg <= t.block_n / 2 && t.block_n > 64) || p.n % t.block_m != 0) continue;
      const int64_t tiles = tile_count(p, t);
      const int64_t k_tiles = ceil_div(rows, int64_t(t.row_bytes / esz));
      if (tiles * std::clamp<int64_t>(k_tiles / 8, 1, kMaxDeterministicCluster) >= sms) {
        why.push_back("tile " + t.name() + ": " + std::to_string(tiles) + " tiles of " + std::to_string(k_tiles) +
                      " row tiles; the largest that fills " + std::to_string(sms) +
                      " SMs in clusters of at most 9 blocks (measured best for deterministic wgrad steps on the H100)");
        return i;
      }
    }
  }
  const int last = last_candidate(warpgroup);
  const MmaTileShape& smallest = kMmaTileCatalog[last];
  if (tile_count(p, smallest) >= sms) return choose_element_tile(p, hw, warpgroup, why);
  for (int i = 0; i <= last; ++i) {
    const MmaTileShape& t = kMmaTileCatalog[i];
    if (!split_candidate(t, warpgroup) || (kg <= t.block_n / 2 && t.block_n > 64) ||
        (warpgroup && cols <= t.block_m / 2 && t.block_m > 64))
      continue;
    const int64_t tiles = tile_count(p, t);
    const int64_t k_tiles = ceil_div(rows, t.row_bytes / esz);
    const int64_t slices = std::clamp<int64_t>(k_tiles / 8, 1, kMaxClusterSplit);
    if (tiles * slices >= sms || i == last) {
      std::ostringstream os;
      os << "tile " << t.name() << ": " << tiles << " tiles of " << k_tiles << " row tiles for " << sms
         << " SMs; the largest " << (warpgroup ? "wgmma" : "element-form")
         << " tile a cluster split fills the SMs with";
      why.push_back(os.str());
      return i;
    }
  }
  return last;
}

// Note [mma atomic slices]: n slices of a tile as a cluster of c <= 16 blocks times a <= 8 groups
// adding into y, as many groups as divide n (their atomics cost less than a cluster's exchange,
// and 8 bounds a 16-bit y's extra roundings); {0, 0} where n has no such form. Clusters need sm_90.
constexpr int kMaxAtomicSlices = 8;
std::pair<int, int> cluster_times_groups(int n, int max_cluster) {
  for (int a = std::min(n, kMaxAtomicSlices); a >= 1; --a)
    if (n % a == 0 && n / a <= max_cluster) return {n / a, a};
  return {0, 0};
}

// Note [mma atomic slices]: the slices of a long reduction's few tiles outside a deterministic plan:
// as many as one wave of resident blocks holds (blocks an SM holds x SMs, never more), each at least
// 8 row tiles, at most 64; as min(slices, 8) groups of the largest power-of-two cluster that fits,
// at most the portable 8 blocks. Measured on the H100 (bf16 resnet50 wgrad, every layer at 2-64
// forced slices, docs/PERFORMANCE.md): a 56x56 layer's one tile took 970 us alone, 74 in a 16-block
// cluster and 27 as 8 groups of 8; grids past one resident wave lost (9 tiles of 128x128: 31 us in
// 16 slices, 47 in 32), clusters of 5, 11 and 16 ran slower than the powers of two below them, and
// 64-72 tiles of 128x64 ran 51 -> 23-28 us in 4 groups.
std::pair<int, int> choose_atomic_slices(int64_t tiles, int k_tiles, const MmaTileShape& t, const HardwareModel& hw,
                                         int forced, std::vector<std::string>& why) {
  const bool clusters = hw.cc_major >= 9;
  if (forced > 0) {
    const auto [c, a] = cluster_times_groups(forced, clusters ? kMaxClusterSplit : 1);
    if (c == 0)
      throw Error(Status::BadParam, "split_k: implicit_mma splits a long reduction into a cluster of at most " +
                                        std::to_string(clusters ? kMaxClusterSplit : 1) + " blocks times at most " +
                                        std::to_string(kMaxAtomicSlices) + " groups adding with atomics, not " +
                                        std::to_string(forced) + " slices");
    why.push_back("split " + std::to_string(forced) + ": forced, " + std::to_string(a) + " atomic groups of " +
                  std::to_string(c) + " cluster blocks");
    return {c, a};
  }
  const int64_t wave = int64_t(std::max(hw.sm_count, 1)) * std::max(t.min_blocks, 1);
  const int64_t slices = std::clamp<int64_t>(wave / tiles, 1, std::max(1, std::min(k_tiles / 8, 64)));
  const int a = static_cast<int>(std::min<int64_t>(slices, kMaxAtomicSlices));
  int c = 1;
  while (clusters && c < kPortableClusterSplit && int64_t(a) * c * 2 <= slices) c *= 2;
  if (a * c > 1)
    why.push_back("split " + std::to_string(a * c) + ": " + std::to_string(tiles) + " tiles of " +
                  std::to_string(k_tiles) + " row tiles for " + std::to_string(hw.sm_count) + " SMs, " +
                  std::to_string(a) + " groups adding into y with atomics" +
                  (c > 1 ? ", each a cluster of " + std::to_string(c) + " summed in rank order" : "") +
                  " (not deterministic)");
  return {c, a};
}

// Note [wgmma warp-specialized wgrad]: n slices of a wgrad step's cooperative tile as a cluster of
// c <= kCooperativeSplits blocks times a <= kMaxAtomicSlices groups adding into y (as many groups as
// divide n; {0, 0} where n has no such form); a deterministic plan's slices are the cluster's alone.
std::pair<int, int> cooperative_wgrad_slices(int n, bool deterministic) {
  if (deterministic) return n <= kCooperativeSplits ? std::pair{n, 1} : std::pair{0, 0};
  return cluster_times_groups(n, kCooperativeSplits);
}

// Note [wgmma warp-specialized wgrad]: a wgrad step's tile on cooperative blocks, where the copy
// engine loads both operands and stores dw (C whole 128-channel tiles, dw KRSC) and K/G > 64; -1
// elsewhere. Measured on the H100 (bf16 resnet50 wgrad, every layer forced onto both cooperative
// tiles at 1-32 slices, one call; docs/PERFORMANCE.md): against the plain tiles' atomic plans, stage
// 3 and 4's layers 17.1-24.7 -> 12.6-20.1 us (l4_1x1c 19.0 -> 12.6, l3_1x1c 19.2 -> 13.4, l4_1x1a
// 24.7 -> 17.2), stage 2's 24.8-30.6 -> 22.0-26.9; stage 1's K = 64 layer lost (34.8 -> 38.4). The
// slices: as many as give every SM one block (grids of one tile to a wave), 2 for grids of up to
// one and a half waves (stage 4's 3x3: 144 tiles, 27.4 -> 24.1 us; 128 tiles ran best unsplit), at
// least 8 row tiles each and at most 32; clusters of 3-4 blocks only on grids of at most 64 blocks
// (128 blocks in clusters of 4 ran as slowly as 32 in none, l2_1x1b: 34.9 against 32.3 us, as if
// in two waves). 128x128 where it fills at least half the SMs that way, else 128x64 where that
// gives more blocks (l2_1x1b and l2_1x1c: 22.0 us in 128 blocks against 31.7-34.9).
int choose_wgrad_cooperative_tile(const Problem& p, const HardwareModel& hw, int64_t rows, bool deterministic,
                                  TileRunForm& form, std::vector<std::string>& why) {
  const int64_t kg = p.k_per_group(), sms = std::max(hw.sm_count, 1);
  if (p.n % 128 != 0 || kg <= 64) return -1;
  struct Pick {
    int tile, slices;
    int64_t tiles, k_tiles, blocks;
  };
  auto pick_for = [&](const char* name) {
    const int tile = find_mma_tile(name);
    const MmaTileShape& t = kMmaTileCatalog[tile];
    const int64_t tiles = tile_count(p, t);  // groups 1: tensor maps
    const int64_t k_tiles = ceil_div(rows, int64_t(t.row_bytes / 2));
    const int64_t most = deterministic ? kCooperativeSplits : int64_t(kCooperativeSplits) * kMaxAtomicSlices;
    int64_t n = tiles <= sms ? sms / tiles : tiles * 2 <= sms * 3 ? 2 : 1;
    n = std::clamp<int64_t>(n, 1, std::max<int64_t>(1, std::min(most, k_tiles / 8)));
    for (; n > 1; --n) {
      const auto [c, a] = cooperative_wgrad_slices(static_cast<int>(n), deterministic);
      if (c > 0 && (c <= 2 || tiles * n <= 64)) break;
    }
    return Pick{tile, static_cast<int>(n), tiles, k_tiles, std::min(tiles * n, sms)};
  };
  const Pick wide = pick_for("wgmma128x128_s3"), narrow = pick_for("wgmma128x64_s3");
  const Pick& chosen = wide.blocks * 2 <= sms && narrow.blocks > wide.blocks ? narrow : wide;
  // A deterministic plan's slices are a cluster's, at most 4: where they leave a slice more than
  // 64 row tiles (stage 2: l2_1x1a 80.8 -> 196.8 us against the plain tiles' 16-block clusters) or
  // a block more than one tile (a hand-over each: stage 4's 3x3 25.2 -> 36.5), the plain tiles' rule.
  if (deterministic && (chosen.k_tiles > 64 * chosen.slices || chosen.tiles * chosen.slices > sms)) return -1;
  form.persistent = true;
  form.consumers = ConsumerSchedule::Cooperative;
  form.split = chosen.slices;
  const MmaTileShape& t = kMmaTileCatalog[chosen.tile];
  why.push_back("tile " + t.name() + ": " + std::to_string(chosen.tiles) + " tiles of " +
                std::to_string(chosen.k_tiles) + " row tiles, " + std::to_string(chosen.slices) +
                " slice(s) each on cooperative blocks (" + std::to_string(sms) +
                " SMs; measured best for such wgrad steps on the H100)");
  return chosen.tile;
}

// The suffixes of a forced tile name that ask for tensor-map loads, and for the persistent or a
// warp-specialized form on top of them ("<wgmma tile>_tma_persistent", "<wgmma tile>_tma_pingpong",
// "<wgmma tile>_tma_cooperative").
constexpr std::string_view kTensorMapSuffix = "_tma";
constexpr std::string_view kPersistentSuffix = "_persistent";

// How the blocks of a persistent plan run (the why line): `forced` appends " (forced)".
std::string persistent_blocks_reason(ConsumerSchedule consumers, bool forced, bool tf32_stages) {
  const std::string text = consumers != ConsumerSchedule::None
                               ? std::string("schedule: ") + consumer_schedule_text(consumers, tf32_stages)
                               : "blocks: persistent, one wave walking the tiles, stores through a tensor map of y";
  return text + (forced ? " (forced)" : "");
}

// Strips `suffix` from the end of `name`; whether it was there.
bool strip_suffix(std::string& name, std::string_view suffix) {
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  name.resize(name.size() - suffix.size());
  return true;
}

// The forced name's consumer schedule, its suffix stripped.
ConsumerSchedule strip_consumer_suffix(std::string& name) {
  for (ConsumerSchedule c : {ConsumerSchedule::PingPong, ConsumerSchedule::Cooperative})
    if (strip_suffix(name, consumer_schedule_suffix(c))) return c;
  return ConsumerSchedule::None;
}

}  // namespace

namespace {
// y is one dense (N*P*Q) x K matrix.
bool dense_channels_last(const Problem& p, const TensorDesc& y) {
  const auto& st = y.strides;
  return p.groups == 1 && st[1] == 1 && st[3] == p.k && st[2] == p.q() * p.k && (p.n == 1 || st[0] == p.p() * st[2]);
}
// Note [wgmma strided dgrad stores]: a channels-last y of any pixel strides (a dgrad phase's dx)
// whose filter pairs 2t, 2t+1 are each one aligned store (the launcher checks the pointer).
bool y_takes_accumulator_pairs(const Problem& p, const TensorDesc& y) {
  const auto& st = y.strides;  // (n, k, p, q)
  return p.groups == 1 && st[1] == 1 && st[0] % 2 == 0 && st[2] % 2 == 0 && st[3] % 2 == 0 && p.k_per_group() % 2 == 0;
}
}  // namespace

bool y_takes_tensor_map_store(const Problem& p, const TensorDesc& y, GatherForm a) {
  const int64_t run = 16 / dtype_size(y.dtype);
  const auto& st = y.strides;  // (n, k, p, q)
  if (a == GatherForm::Transposed)
    return p.groups == 1 && st[0] == 1 && st[3] == p.n && st[2] == p.q() * p.n && st[1] % run == 0 &&
           st[1] >= p.n * p.p() * p.q();
  return dense_channels_last(p, y) && p.k_per_group() % run == 0;
}

std::string implicit_mma_tile_names() {
  std::string names;
  for (const auto& t : kMmaTileCatalog) names += (names.empty() ? "" : ", ") + t.name();
  return names + " (wgmma tiles also as <name>" + std::string(kTensorMapSuffix) + ": tensor-map loads, <name>" +
         std::string(kTensorMapSuffix) + std::string(kPersistentSuffix) + ": persistent blocks, and <name>" +
         std::string(kTensorMapSuffix) + consumer_schedule_suffix(ConsumerSchedule::PingPong) + " and <name>" +
         std::string(kTensorMapSuffix) + consumer_schedule_suffix(ConsumerSchedule::Cooperative) +
         " on tiles with those forms: a producer warpgroup and two consumer warpgroups on alternate tiles, or on 64 "
         "pixels each of every 128-pixel tile)";
}

ImplicitMmaDivision plan_implicit_mma(const Problem& p, const TensorDesc& x, const TensorDesc& w, const TensorDesc& y,
                                      int64_t rows, bool rows_order_rsc, const HardwareModel& hw,
                                      const std::string& forced_tile, int forced_split, bool deterministic,
                                      bool filter_gradient, double sm_share, std::vector<std::string>& why) {
  const bool beside_other_steps = sm_share < 1.0;
  const GatherForms forms = choose_gather_forms(p, x, w, rows_order_rsc);
  // Note [wgmma tensor-map loads]: what keeps the copy engine from loading the stages, tiles aside.
  std::string no_tensor_maps = tensor_map_refusal(p, x, w, rows_order_rsc, forms);
  // Element filters and transposed images come only with tiles that have the element form. Runs of
  // taps (Note [mma reduction runs]) are vectors too, but of a long reduction into a small output.
  const bool vector_tile = forms.a == GatherForm::Vector && forms.b != GatherForm::Element && !forms.reduction_runs;
  // Note [mma tf32 pixel runs]: a 1x1 layer's planes (filters as vectors, or transposed: a dgrad step).
  const bool pixel_runs = forms.a == GatherForm::Transposed && !forms.images_fastest;
  // A long reduction into a small output: a wgrad step (whatever its forms: element images and
  // filters in plane order too; images transposed images-fastest only a wgrad step has), or a layer
  // of one output pixel an image read as runs of taps. A forward or dgrad step is not one, whatever
  // its forms.
  const bool long_reduction = filter_gradient || forms.reduction_runs || forms.images_fastest;
  // Note [mma filter rows]: element images under vector filter rows, not a wgrad step's (those
  // take the split rule).
  const bool filter_rows = forms.a == GatherForm::Element && forms.b == GatherForm::Vector && !long_reduction;
  const int esz = dtype_size(x.dtype);
  // Note [wgmma tf32 stages]: TF32 stages come through the copy engine only on warp-specialized tiles,
  // whose consumers round them and store y from their accumulators.
  if (esz == 4 && no_tensor_maps.empty()) {
    if (!vector_tile || long_reduction)
      no_tensor_maps = "TF32 loads through tensor maps in forward and dgrad steps only";
    else if (p.k_per_group() <= 16)
      no_tensor_maps = "TF32 layers of at most 16 filters a group run the narrow tile (Note [mma narrow filter tiles])";
    else if (!y_takes_tensor_map_store(p, y, forms.a))
      no_tensor_maps =
          "a TF32 tile loading through tensor maps stores y from its accumulators, which needs a dense "
          "channels-last y with K/G a multiple of 4 (K/G = " +
          std::to_string(p.k_per_group()) + ")";
  }
  // The rule that picked the tile also set its cluster split (Note [mma element tiles], and TF32
  // transposed filters in choose_vector_tile), tensor maps or not.
  bool rule_split = false;
  int tile;
  TileRunForm form;
  // A forced "<wgmma tile>_tma" loads through tensor maps; the plain name gathers.
  std::string tile_name = forced_tile;
  const ConsumerSchedule forced_consumers = strip_consumer_suffix(tile_name);
  const bool forced_specialized = forced_consumers != ConsumerSchedule::None;
  const bool forced_persistent = forced_specialized || strip_suffix(tile_name, kPersistentSuffix);
  const bool forced_tensor_maps = strip_suffix(tile_name, kTensorMapSuffix);
  if (!forced_tile.empty()) {
    tile = find_mma_tile(tile_name);
    if (tile < 0 || (forced_tensor_maps && !kMmaTileCatalog[tile].warpgroup) ||
        (forced_persistent && !forced_tensor_maps) ||
        (forced_persistent && !forced_specialized && kMmaTileCatalog[tile].persistent_smem_bytes == 0) ||
        (forced_specialized && kMmaTileCatalog[tile].specialized_smem_bytes == 0) ||
        // Note [wgmma wave-fitted filter tiles]: cooperative only.
        (!kMmaTileCatalog[tile].plain_forms && forced_consumers != ConsumerSchedule::Cooperative) ||
        (forced_consumers == ConsumerSchedule::Cooperative && !kMmaTileCatalog[tile].cooperative))
      throw Error(Status::BadParam,
                  "tile: unknown implicit_mma tile '" + forced_tile + "' (known: " + implicit_mma_tile_names() + ")");
    if (esz == 4 && forced_tensor_maps && !forced_specialized)
      throw Error(Status::Unsupported,
                  "tile: " + forced_tile + ": TF32 loads through tensor maps only on the warp-specialized forms (" +
                      tile_name + std::string(kTensorMapSuffix) + consumer_schedule_suffix(ConsumerSchedule::PingPong) +
                      ", " + tile_name + std::string(kTensorMapSuffix) +
                      consumer_schedule_suffix(ConsumerSchedule::Cooperative) + "), whose consumers round each stage");
    if (kMmaTileCatalog[tile].warpgroup && !wgmma_device(hw))
      throw Error(Status::Unsupported, "tile: " + forced_tile + " issues wgmma, which needs sm_90 (this device is sm_" +
                                           std::to_string(hw.cc_major) + std::to_string(hw.cc_minor) + ")");
    why.push_back("tile " + forced_tile + ": forced");
  } else {
    // Note [wgmma mainloop]: warpgroup tiles take the vector forms and the both-transposed one, on
    // sm_90 (the sm_90a code); TF32 transposed filters only mma.sync tiles (Note [mma tf32
    // transposed filters]).
    const bool warpgroup = wgmma_device(hw) && !(dtype_size(x.dtype) == 4 && forms.b == GatherForm::Transposed);
    const bool both_transposed = forms.a == GatherForm::Transposed && forms.b == GatherForm::Transposed;
    std::vector<std::string> rule;  // the reasons of the rule that picks, appended once it is kept
    // Note [wgmma warp-specialized wgrad]: both operands and dw through tensor maps.
    const int wgrad_tile = long_reduction && warpgroup && both_transposed && no_tensor_maps.empty() &&
                                   forms.images_fastest && y_takes_tensor_map_store(p, y, forms.a)
                               ? choose_wgrad_cooperative_tile(p, hw, rows, deterministic, form, rule)
                               : -1;
    if (wgrad_tile >= 0) {
      tile = wgrad_tile;
    } else if (vector_tile && esz == 4 && warpgroup && no_tensor_maps.empty()) {
      tile = choose_tf32_specialized_tile(p, hw, rows, form, rule);  // Note [wgmma tf32 stages]
    } else if (vector_tile) {
      tile = choose_vector_tile(p, hw, rows, warpgroup, no_tensor_maps.empty(), dense_channels_last(p, y),
                                forms.b == GatherForm::Vector, beside_other_steps, form, rule);
      rule_split = !warpgroup && form.split > 0;  // mma.sync tiles: no tensor maps to wait for
    } else if (long_reduction) {
      tile = choose_split_tile(p, hw, rows, esz, warpgroup && (both_transposed || forms.reduction_runs),
                               no_tensor_maps.empty(), deterministic, rule);
    } else {
      tile = pixel_runs ? choose_pixel_run_tile(p, hw, rows, warpgroup, rule) : -1;
    }
    // Note [mma element tiles]: images gathered element by element. TF32 element images under
    // element filters keep their own rule.
    if (tile < 0 && forms.a == GatherForm::Element && !long_reduction && wgmma_device(hw)) {
      const bool tf32_elements = esz == 4 && warpgroup && !filter_rows;
      tile = tf32_elements ? choose_tf32_element_tile(p, hw, rows, form.split, rule)
                           : choose_element_image_tile(p, hw, rows, esz, form.split, rule);
      rule_split = tile >= 0;
    }
    // Note [mma narrow filter tiles]: but a 1x1 layer's persistent wgmma tile.
    const int narrow = form.persistent && p.r * p.s == 1 ? -1 : choose_narrow_tile(p, long_reduction, why);
    if (narrow >= 0) {
      tile = narrow;
      form = {};
    } else {
      why.insert(why.end(), rule.begin(), rule.end());
    }
    if (tile < 0) tile = choose_element_tile(p, hw, false, why);
  }
  // Note [wgmma wave-fitted filter tiles]: a tile of the cooperative form only, forced onto a layer
  // that form cannot take (a dgrad step's N-major filters, strided or plane-order y, gathered
  // operands), runs 128x128's forms.
  if (!kMmaTileCatalog[tile].plain_forms &&
      !(mma_tile_has_forms(kMmaTileCatalog[tile], forms.a, forms.b, dtype_size(x.dtype)) && no_tensor_maps.empty() &&
        y_takes_tensor_map_store(p, y, forms.a))) {
    why.push_back("tile " + kMmaTileCatalog[tile].name() +
                  " runs only as cooperative blocks on a forward layer loading through tensor maps and storing a "
                  "dense channels-last y, which this layer cannot take: tile wgmma128x128_s3 instead");
    tile = find_mma_tile("wgmma128x128_s3");
  }
  const MmaTileShape& t = kMmaTileCatalog[tile];
  ImplicitMmaDivision d;
  d.tile = tile;
  d.tile_name = t.name();
  d.block_m = t.block_m;
  d.block_n = t.block_n;
  d.block_k = t.row_bytes / dtype_size(x.dtype);
  d.stages = t.stages;
  d.k_tiles = static_cast<int>(ceil_div(rows, d.block_k));
  d.a_gather = forms.a;
  d.b_gather = forms.b;
  d.images_fastest = forms.images_fastest;
  why.push_back(forms.why);
  // Note [wgmma tensor-map loads]: the copy engine feeds only the warpgroup tiles.
  // A wgrad step's block must cover one tap: its columns are 64-channel runs of x at that tap.
  if (no_tensor_maps.empty() && forms.a == GatherForm::Transposed && p.n % t.block_m != 0)
    no_tensor_maps = "the layer's C = " + std::to_string(p.n) + " is not a multiple of the tile's " +
                     std::to_string(t.block_m) + " columns";
  if (forced_tensor_maps && !no_tensor_maps.empty())
    throw Error(Status::Unsupported,
                "tile: " + forced_tile + " loads through tensor maps, which this layer cannot: " + no_tensor_maps);
  d.tensor_maps = t.warpgroup && no_tensor_maps.empty() && (forced_tensor_maps || forced_tile.empty());
  // Note [wgmma pixel-row maps]: x's rows of consecutive pixels where a tile's pixels are those.
  const auto& xs = x.strides;  // (n, c, h, w)
  d.image_pixel_rows = d.tensor_maps && forms.a == GatherForm::Vector && p.groups == 1 && p.r == 1 && p.s == 1 &&
                       p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0 && p.p() == p.h &&
                       p.q() == p.w && xs[2] == p.w * xs[3] && xs[0] == p.h * xs[2];
  if (d.tensor_maps)
    why.push_back(
        std::string("loads: the copy engine, x through ") +
        (d.image_pixel_rows ? "a tiled tensor map of pixel rows (a 1x1 stride-1 layer)" : "an im2col tensor map") +
        " and w through a tiled one" + (forced_tensor_maps ? " (forced)" : " (64 channels a stage at one filter tap)"));
  else if (t.warpgroup && forced_tile.empty())
    why.push_back("loads: the threads' gather, no tensor maps: " + no_tensor_maps);
  else if (!t.warpgroup && forced_tile.empty() && no_tensor_maps.empty() && wgmma_device(hw))
    why.push_back("loads: the threads' gather (tile " + t.name() + " has no tensor-map form)");
  // The store's boxes step in 16-byte runs of filters of a dense channels-last y (the launcher's test,
  // made here so that the plan says which form runs): otherwise (K/G not a multiple of 8, a dgrad
  // phase's strided dx, y in plane order) the tile runs its plain form, and the plan names that.
  // A wgrad step's dw is contiguous along its pixels only when they are numbered images fastest.
  const bool y_takes_store =
      y_takes_tensor_map_store(p, y, forms.a) && (forms.a != GatherForm::Transposed || forms.images_fastest);
  const bool rule_persistent = form.persistent && d.tensor_maps && forced_split == 0;
  // A forced split of a cooperative tile (Note [wgmma warp-specialized tiles]); the rules' own.
  const int cooperative_split = static_cast<int>(std::min<int64_t>(
      d.k_tiles, forced_persistent ? std::max(forced_split, 1) : (rule_persistent ? std::max(form.split, 1) : 1)));
  // Note [wgmma warp-specialized wgrad]: a wgrad step on cooperative blocks.
  const bool wgrad_specialized = forms.a == GatherForm::Transposed && forms.b == GatherForm::Transposed;
  if (forced_persistent) {
    if (!d.tensor_maps ||
        (forms.a != GatherForm::Vector && !(wgrad_specialized && forced_consumers == ConsumerSchedule::Cooperative)))
      throw Error(Status::Unsupported, "tile: " + forced_tile +
                                           " walks tiles of a forward or dgrad step (or cooperatively a wgrad step) "
                                           "loading through tensor maps, which this layer is not");
    // Note [wgmma warp-specialized tiles]: cooperative blocks split a tile's rows among up to
    // kCooperativeSplits blocks of a cluster, the other forms take each tile's whole reduction.
    if (forced_split > 1 && forced_consumers != ConsumerSchedule::Cooperative)
      throw Error(Status::Unsupported, "split_k: a persistent tile takes each tile's whole reduction");
    if (forced_split > 1 && !t.plain_forms)
      throw Error(Status::Unsupported, "split_k: tile " + t.name() + " takes each tile's whole reduction");
    if (!wgrad_specialized && forced_split > kCooperativeSplits)
      throw Error(Status::Unsupported, "split_k: a cooperative tile splits its rows among at most " +
                                           std::to_string(kCooperativeSplits) + " blocks");
  }
  if (rule_persistent || forced_persistent) {
    const ConsumerSchedule consumers = forced_persistent ? forced_consumers : form.consumers;
    // Note [wgmma strided dgrad stores]: a 16-bit dgrad step's warp-specialized blocks store filter
    // pairs from the accumulators where y takes no tensor-map store.
    const bool accumulator_pairs = consumers != ConsumerSchedule::None && esz == 2 && forms.a == GatherForm::Vector &&
                                   forms.b == GatherForm::Transposed && y_takes_accumulator_pairs(p, y);
    if (y_takes_store || accumulator_pairs) {
      d.persistent = true;
      d.consumers = consumers;
      why.push_back(persistent_blocks_reason(consumers, forced_persistent, esz == 4) +
                    (y_takes_store ? ""
                                   : "; y takes no tensor-map store (a strided dx): each warp stores its rows at "
                                     "their pixels' addresses, 16-byte runs of filters through the output buffer "
                                     "(filter pairs from the accumulators where dx takes no whole runs)"));
    } else {
      why.push_back(std::string("blocks: one a tile; the ") + (forced_persistent ? "forced " : "") +
                    persistent_form_word(consumers) + " form stores through a tensor map of y, " +
                    (forms.a == GatherForm::Transposed
                         ? "which needs dw KRSC with whole 16-byte filter strides"
                         : "which needs a dense channels-last y of whole 16-byte runs of filters (K/G = " +
                               std::to_string(p.k_per_group()) + ")"));
    }
  }
  // Note [wgmma wave-fitted filter tiles]: the test above keeps such a tile only where this holds.
  if (!t.plain_forms && !d.persistent)
    throw Error(Status::Internal, "implicit_mma: tile " + t.name() + " without its cooperative form");
  if (!mma_tile_has_forms(t, forms.a, forms.b, dtype_size(x.dtype)))
    why.push_back("tile " + t.name() + " has no " + gather_form_name(forms.a) + "/" + gather_form_name(forms.b) +
                  " form: calls run the element form on " + kMmaTileCatalog[kElementFallbackTile].name());
  d.launch.grid_x = ceil_div(p.n * p.p() * p.q(), t.block_m);
  d.launch.grid_y = ceil_div(p.k_per_group(), t.block_n);
  const int64_t tiles = d.launch.grid_x * d.launch.grid_y * p.groups;
  const bool specialized = d.consumers != ConsumerSchedule::None;
  // Note [phase steps' SM shares]: a persistent grid beside other steps takes the step's share,
  // rounded down, so that the steps' grids fit one wave together.
  auto steps_share = [sm_share](int64_t blocks) {
    return sm_share < 1.0 ? std::max<int64_t>(1, static_cast<int64_t>(double(blocks) * sm_share + 1e-9)) : blocks;
  };
  if (specialized && wgrad_specialized) {
    // Note [wgmma warp-specialized wgrad]: a cluster of slices times atomic groups along y, every
    // block walking the tiles with its slice of their rows.
    const int n = forced_persistent ? std::max(forced_split, 1) : form.split;
    std::tie(d.cluster_split, d.atomic_slices) = cooperative_wgrad_slices(n, deterministic);
    if (d.cluster_split == 0)
      throw Error(Status::Unsupported,
                  "split_k: a cooperative wgrad tile splits its rows among a cluster of at most " +
                      std::to_string(kCooperativeSplits) + " blocks" +
                      (deterministic ? " in a deterministic plan, not " + std::to_string(n)
                                     : " times at most " + std::to_string(kMaxAtomicSlices) +
                                           " groups adding with atomics, not " + std::to_string(n) + " slices"));
    const int64_t slices = int64_t(d.cluster_split) * d.atomic_slices;
    d.launch.grid_x = std::clamp<int64_t>(steps_share(warp_specialized_blocks(hw) / slices), 1, tiles);
    d.launch.grid_y = d.atomic_slices;
    if (slices > 1)
      why.push_back(
          "split " + std::to_string(slices) + ": " +
          (d.atomic_slices > 1 ? std::to_string(d.atomic_slices) + " groups adding into y with atomics" : "") +
          (d.atomic_slices > 1 && d.cluster_split > 1 ? ", each " : "") +
          (d.cluster_split > 1 ? "a cluster of " + std::to_string(d.cluster_split) +
                                     " handing their sums to the owner of each half tile"
                               : "") +
          (d.atomic_slices > 1 ? " (not deterministic)" : ""));
  } else if (long_reduction && !deterministic) {
    std::tie(d.cluster_split, d.atomic_slices) = choose_atomic_slices(tiles, d.k_tiles, t, hw, forced_split, why);
  } else if (d.persistent) {
    // Cooperative tiles split among a cluster: a cluster a tile, at most one block an SM.
    d.cluster_split = d.consumers == ConsumerSchedule::Cooperative ? cooperative_split : 1;
    const int64_t wave = specialized ? warp_specialized_blocks(hw) / d.cluster_split : persistent_blocks(t, hw);
    d.launch.grid_x = std::min(tiles, steps_share(wave));
    d.launch.grid_y = 1;
    if (d.launch.grid_x < std::min(tiles, wave))
      why.push_back("grid: " + std::to_string(d.launch.grid_x) + " blocks, this step's share of the " +
                    std::to_string(wave) +
                    " a wave holds beside the other steps of its pass (its share of their "
                    "work; Note [phase steps' SM shares])");
    if (d.cluster_split > 1)
      why.push_back("cluster split " + std::to_string(d.cluster_split) +
                    ": each tile's rows in slices, the slices' sums added by the cluster's first block through "
                    "distributed shared memory");
  } else if (rule_persistent || forced_persistent) {
    d.cluster_split = 1;
  } else if (form.split > 0 && forced_split == 0 && (d.tensor_maps || rule_split)) {
    d.cluster_split = form.split;
    why.push_back(form.split == 1 ? std::string("unsplit: the tile's rule")
                                  : "cluster split " + std::to_string(form.split) +
                                        ": the tile's rule (slices summed through distributed shared memory, in "
                                        "rank order)");
  } else {
    d.cluster_split = choose_cluster_split(tiles, d.k_tiles, d.tensor_maps && d.a_gather == GatherForm::Transposed, hw,
                                           forced_split, why);
  }
  if (d.atomic_slices > 1) d.prepass_blocks = split_prepass_blocks(p.n * p.k * p.p() * p.q(), hw);
  d.launch.grid_z = specialized ? d.cluster_split : p.groups * d.atomic_slices * d.cluster_split;
  d.launch.threads = specialized ? t.specialized_threads : t.threads;
  d.launch.smem_bytes = specialized ? t.specialized_smem_bytes : d.persistent ? t.persistent_smem_bytes : t.smem_bytes;
  if (specialized) d.stages = t.specialized_stages;
  if (d.launch.grid_y > 65535) throw Error(Status::Unsupported, "k: too many filter tiles for one launch");
  if (d.launch.grid_z > 65535) throw Error(Status::Unsupported, "groups: too many groups for one launch");
  return d;
}

}  // namespace mconv::detail
