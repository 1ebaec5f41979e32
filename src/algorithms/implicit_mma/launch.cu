// Launcher of the tensor-core implicit-GEMM family: fills the parameters from the Plan and its
// division, keeps the division's gather forms when the pointers and group offsets allow them (the
// element form on the fallback tile otherwise), and launches the tile in the plan's dtype and math
// mode, as a cluster when the division splits its tiles' rows, after y's pre-pass when slices add
// into it with atomics.
#include <cstdint>
#include <type_traits>

#include "../common/cuda_check.cuh"
#include "../common/kernel_launch.cuh"
#include "../common/tensor_map.hpp"
#include "../launch.hpp"
#include "kernel.cuh"
#include "planner.hpp"
#include "tiles.hpp"
#include "warp_specialized.cuh"

namespace mconv::detail {
namespace {

using cuda::ImplicitMmaParams;

template <GatherForm A, GatherForm B>
struct Forms {
  static constexpr GatherForm kA = A, kB = B;
};

/// Whether the instance has a tensor-map form (Note [wgmma tensor-map loads]).
template <class Tile, class Math, class F>
constexpr bool kHasTensorMaps = Tile::kWarpgroup&& Math::kBytes == 2 &&
                                ((F::kA == GatherForm::Vector && F::kB != GatherForm::Element) ||
                                 (F::kA == GatherForm::Transposed && F::kB == GatherForm::Transposed));

/// Whether the instance has the persistent form (Note [wgmma persistent tiles]).
template <class Tile, class Math, class F>
constexpr bool kHasPersistent = kHasTensorMaps<Tile, Math, F>&& F::kA == GatherForm::Vector&& Tile::kPersistentForm;

/// Whether the instance has the warp-specialized form (Note [wgmma warp-specialized tiles]): forward
/// and dgrad steps, and cooperatively wgrad steps (Note [wgmma warp-specialized wgrad]); in TF32
/// the steps of K-major operands only (Note [wgmma tf32 stages]), which no other tensor-map form takes.
template <class Tile, class Math, class F>
constexpr bool kHasWarpSpecialized =
    Tile::kWarpSpecializedForm &&
    ((kHasTensorMaps<Tile, Math, F> && (F::kA == GatherForm::Vector || Tile::kCooperativeForm)) ||
     (Math::kBytes == 4 && Tile::kWholeFilterBlocks && F::kA == GatherForm::Vector && F::kB == GatherForm::Vector));

using MmaKernel = void (*)(ImplicitMmaParams);

/// The warp-specialized kernel of the instance for a consumer schedule, split among a cluster or
/// not; nullptr where it has none.
template <class Tile, class Math, class F>
MmaKernel warp_specialized_kernel(ConsumerSchedule consumers, bool split) {
  if constexpr (kHasWarpSpecialized<Tile, Math, F>) {
    // Note [wgmma wave-fitted filter tiles]: a tile of a partial filter block runs unsplit cooperative.
    if constexpr (F::kA == GatherForm::Vector && Tile::kWholeFilterBlocks)
      if (consumers == ConsumerSchedule::PingPong && !split)
        return cuda::implicit_mma_warp_specialized_kernel<Tile, Math, F::kA, F::kB, false>;
    if constexpr (Tile::kCooperativeForm) {
      if (consumers == ConsumerSchedule::Cooperative && !split)
        return cuda::implicit_mma_warp_specialized_kernel<Tile, Math, F::kA, F::kB, true>;
      if constexpr (Tile::kWholeFilterBlocks)
        if (consumers == ConsumerSchedule::Cooperative)
          return cuda::implicit_mma_warp_specialized_kernel<Tile, Math, F::kA, F::kB, true, true>;
    }
  }
  return nullptr;
}

template <class Tile, bool kPersistent>
constexpr int kSmemBytesOf = kPersistent ? Tile::kPersistentSmemBytes : Tile::kSmemBytes;

// Note [mma cluster split]: the slices of a tile are consecutive z blocks, one cluster.
template <class Tile, class Math, class F, bool kTensorMaps, bool kPersistent>
void launch(const ImplicitMmaParams& prm, dim3 grid, cuda::LaunchStream on) {
  auto* kernel = cuda::implicit_mma_kernel<Tile, Math, F::kA, F::kB, kTensorMaps, kPersistent>;
  cuda::launch_kernel(kernel, grid, Tile::kThreads, kSmemBytesOf<Tile, kPersistent>, on, prm.splits, prm);
}

/// Calls f(Math{}) for the plan's element type and math mode.
template <class F>
void visit_math(const Plan& plan, F&& f) {
  switch (plan.dtype()) {
    case DType::Float16:
      return f(cuda::MmaFp16{});
    case DType::BFloat16:
      return f(cuda::MmaBf16{});
    case DType::Float32:
      if (plan.math() == MathMode::TF32) return f(cuda::MmaTf32{});
      break;
    case DType::Float64:
      break;
  }
  throw Error(Status::Internal, "implicit_mma: a plan in fp32 exact math reached the tensor-core launcher");
}

/// visit_forms for a tile that has the plain forms.
template <class Tile, class Math, class F>
bool visit_plain_tile_forms(GatherForm a, GatherForm b, F&& f) {
  using G = GatherForm;
  constexpr bool k16 = Math::kBytes == 2;
  if (a == G::Vector && b == G::Vector) return f(Forms<G::Vector, G::Vector>{}), true;
  // Note [mma tf32 transposed filters].
  if constexpr (k16 || !Tile::kWarpgroup)
    if (a == G::Vector && b == G::Transposed) return f(Forms<G::Vector, G::Transposed>{}), true;
  if constexpr (Tile::kWarpgroup) {  // Note [wgmma mainloop]: no element forms
    if constexpr (k16)
      if (a == G::Transposed && b == G::Transposed) return f(Forms<G::Transposed, G::Transposed>{}), true;
    if (a == G::Transposed && b == G::Vector) return f(Forms<G::Transposed, G::Vector>{}), true;
    return false;
  }
  if constexpr (Tile::kElementGather) {
    if (a == G::Element && b == G::Element) return f(Forms<G::Element, G::Element>{}), true;
    if (a == G::Vector && b == G::Element) return f(Forms<G::Vector, G::Element>{}), true;
    // Note [mma filter rows] (planner.cpp): every element type.
    if (a == G::Element && b == G::Vector) return f(Forms<G::Element, G::Vector>{}), true;
    // Note [mma tf32 pixel runs]: every element type.
    if (a == G::Transposed && b == G::Vector) return f(Forms<G::Transposed, G::Vector>{}), true;
    if (a == G::Transposed && b == G::Transposed) return f(Forms<G::Transposed, G::Transposed>{}), true;
    if (a == G::Element && b == G::Transposed) return f(Forms<G::Element, G::Transposed>{}), true;
  }
  return false;
}

/// Calls f(Forms<a, b>{}) where tile and element type have that instantiation (mma_tile_has_forms;
/// TF32 transposed filters on mma.sync tiles only, warpgroup tiles have no element form); false
/// where they have none.
template <class Tile, class Math, class F>
bool visit_forms(GatherForm a, GatherForm b, F&& f) {
  using G = GatherForm;
  if constexpr (!Tile::kPlainForms) {  // Note [wgmma wave-fitted filter tiles]: 16-bit, both vector
    if constexpr (Math::kBytes == 2)
      if (a == G::Vector && b == G::Vector) return f(Forms<G::Vector, G::Vector>{}), true;
    return false;
  } else {
    return visit_plain_tile_forms<Tile, Math>(a, b, f);
  }
}

/// Calls f(Tile{}, Forms{}) for the tile and forms of one launch.
template <class Math, class F>
void visit_instance(int tile, GatherForm a, GatherForm b, F&& f) {
  bool found = false;
  const bool known = visit_mma_tile(tile, [&](auto t) {
    using Tile = decltype(t);
    found = visit_forms<Tile, Math>(a, b, [&](auto forms) { f(t, forms); });
  });
  if (!known || !found)
    throw Error(Status::Internal, "implicit_mma: no instantiation of tile " + std::to_string(tile) + " with the " +
                                      gather_form_name(a) + "/" + gather_form_name(b) + " gather");
}

/// The kernel's attributes: its dynamic shared memory, and clusters beyond the portable 8 blocks
/// where the plan splits among more.
template <class Math>
void set_attributes(int tile, GatherForm a, GatherForm b, int splits, bool tensor_maps = false, bool persistent = false,
                    ConsumerSchedule consumers = ConsumerSchedule::None) {
  visit_instance<Math>(tile, a, b, [&](auto t, auto forms) {
    using Tile = decltype(t);
    using F = decltype(forms);
    auto set = [&](auto kernel, int smem_bytes = Tile::kSmemBytes) {
      MCONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
      if (splits > cuda::kPortableClusterBlocks)
        MCONV_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    };
    if constexpr (Tile::kPlainForms) set(cuda::implicit_mma_kernel<Tile, Math, F::kA, F::kB>);
    if constexpr (kHasTensorMaps<Tile, Math, F> && Tile::kPlainForms)
      if (tensor_maps) set(cuda::implicit_mma_kernel<Tile, Math, F::kA, F::kB, true>);
    if constexpr (kHasPersistent<Tile, Math, F>)
      if (tensor_maps && persistent)
        set(cuda::implicit_mma_kernel<Tile, Math, F::kA, F::kB, true, true>, Tile::kPersistentSmemBytes);
    if (tensor_maps && consumers != ConsumerSchedule::None)
      if (const MmaKernel kernel = warp_specialized_kernel<Tile, Math, F>(consumers, splits > 1))
        set(kernel, Tile::kWarpSpecializedSmemBytes);
  });
}

/// The copy engine's element type for the plan's tensors.
CUtensorMapDataType tensor_map_type(DType t) {
  return t == DType::BFloat16  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
         : t == DType::Float16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                               : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

/// Note [wgmma tensor-map loads]: x (C, W, H, N) as im2col columns of block_m pixels, 64 channels
/// each, window origins walking the output pixels in order, or with image_pixel_rows (C, N*H*W) in
/// boxes of block_m pixel rows (Note [wgmma pixel-row maps]); w as K rows of R*S*C, boxes of 64 rows x
/// block_n filters, or N-major as (filters, C, S, R), boxes of 64 filters x 64 channels at one tap.
/// All in wgmma's 128-byte swizzle, zeros outside the tensors.
void set_tensor_maps(ImplicitMmaParams& prm, const Plan& plan, const MmaTileShape& t, GatherForm a, GatherForm b,
                     const void* x, const void* w, bool image_pixel_rows) {
  const Problem& p = plan.problem();
  const auto type = tensor_map_type(plan.dtype());
  // One 128-byte swizzled row: 64 16-bit elements, or 32 fp32 ones (Note [wgmma tf32 stages]).
  const int kBox = cuda::wgmma::kRowBytes / dtype_size(plan.dtype());
  if (a == GatherForm::Transposed) {
    // A wgrad step (src/plan/backward.cpp): its images are x's channels (contiguous), its channels
    // x's images, its filter dy (K x N x P x Q, the filters contiguous), its stride the layer's
    // dilation and its dilation the layer's stride. x is mapped as the layer's input, walked over
    // dy's pixels: the window origins run with the layer's stride over P x Q outputs.
    const auto& xs = plan.x_desc().strides;
    cuda::Im2colShape s{};
    s.n = p.c;
    s.h = p.h;
    s.w = p.w;
    s.c = p.n;
    s.stride_n = xs[1];
    s.stride_h = xs[2];
    s.stride_w = xs[3];
    s.lower_h = static_cast<int>(-p.pad_h);
    s.lower_w = static_cast<int>(-p.pad_w);
    s.upper_h = static_cast<int>((p.r - 1) * p.dil_h - p.pad_h - (p.h - 1));
    s.upper_w = static_cast<int>((p.s - 1) * p.dil_w - p.pad_w - (p.w - 1));
    s.step_h = static_cast<int>(p.dil_h);
    s.step_w = static_cast<int>(p.dil_w);
    s.channels = kBox;
    s.pixels = t.row_bytes / 2;
    prm.image_map = cuda::im2col_map(x, type, s);
    const auto& ws = plan.w_desc().strides;  // (filter, channel, p, q); rows (n, p, q) packed
    prm.filter_map = cuda::tiled_map<2>(w, type, {p.k, p.c * p.r * p.s}, {ws[3]}, {kBox, kBox});
    prm.filter_r = static_cast<int>(p.r);
    prm.filter_s = static_cast<int>(p.s);
    return;
  }
  cuda::Im2colShape s{};
  s.n = p.n;
  s.h = p.h;
  s.w = p.w;
  s.c = p.c;
  s.stride_n = prm.x_sn;
  s.stride_h = prm.x_sh;
  s.stride_w = prm.x_sw;
  s.lower_h = static_cast<int>(-p.pad_h);
  s.lower_w = static_cast<int>(-p.pad_w);
  s.upper_h = static_cast<int>((p.p() - 1) * p.stride_h - p.pad_h - (p.h - 1));
  s.upper_w = static_cast<int>((p.q() - 1) * p.stride_w - p.pad_w - (p.w - 1));
  s.step_h = static_cast<int>(p.stride_h);
  s.step_w = static_cast<int>(p.stride_w);
  s.channels = kBox;
  s.pixels = t.block_m;
  // Note [wgmma pixel-row maps]: the planner's test, on the same strides.
  prm.image_pixel_rows = image_pixel_rows;
  if (prm.image_pixel_rows)
    prm.image_map = cuda::tiled_map<2>(x, type, {p.c, p.n * p.h * p.w}, {prm.x_sw}, {kBox, t.block_m});
  else
    prm.image_map = cuda::im2col_map(x, type, s);
  if (b == GatherForm::Transposed) {
    const auto& ws = plan.w_desc().strides;  // (filter, channel, r, s); the filters contiguous
    prm.filter_map = cuda::tiled_map<4>(w, type, {p.k, p.c, p.s, p.r}, {ws[1], ws[3], ws[2]}, {kBox, kBox, 1, 1});
    prm.filter_r = static_cast<int>(p.r);
    prm.filter_s = static_cast<int>(p.s);
    prm.dil_h = static_cast<int>(p.dil_h);
    prm.dil_w = static_cast<int>(p.dil_w);
    prm.flip = p.mode == Mode::Convolution;
  } else {
    prm.filter_map = cuda::tiled_map<2>(w, type, {p.r * p.s * p.c, p.k}, {prm.w_sk}, {kBox, t.block_n});
  }
}

}  // namespace

void implicit_mma_prepare(const Plan& plan, const ImplicitMmaDivision& d) {
  visit_math(plan, [&](auto math) {
    using Math = decltype(math);
    // The fallback for calls whose pointers or group offsets the division's forms cannot take.
    set_attributes<Math>(kElementFallbackTile, GatherForm::Element, GatherForm::Element, d.cluster_split);
    if (mma_tile_has_forms(kMmaTileCatalog.at(d.tile), d.a_gather, d.b_gather, dtype_size(plan.dtype())))
      set_attributes<Math>(d.tile, d.a_gather, d.b_gather, d.cluster_split, d.tensor_maps, d.persistent, d.consumers);
  });
}

void implicit_mma_forward(const Plan& plan, const ImplicitMmaDivision& d, const void* x, const void* w, void* y,
                          const Epilogue& e, void* stream, bool dependent_launch) {
  const auto& out = plan.output_rule();
  ImplicitMmaParams prm{};
  static_cast<cuda::ImplicitGemmGeometry&>(prm) = cuda::implicit_gemm_geometry(plan, e, "implicit_mma");
  prm.x = x;
  prm.w = w;
  prm.y = y;
  prm.images = static_cast<int>(plan.problem().n);
  prm.store_pixels_fastest = out.stride_k != 1;
  // Filters 2t and 2t+1 adjacent, and every pair's first element aligned to two elements.
  const int esz = dtype_size(plan.dtype());
  prm.pair_store = out.stride_k == 1 && reinterpret_cast<uintptr_t>(y) % (2 * esz) == 0 && out.stride_n % 2 == 0 &&
                   out.stride_p % 2 == 0 && out.stride_q % 2 == 0 && prm.y_group % 2 == 0;
  // Note [mma staged epilogue]: whole 16-byte runs of filters, each starting 16-byte aligned.
  const int run = 16 / esz;
  prm.staged_store = out.stride_k == 1 && reinterpret_cast<uintptr_t>(y) % 16 == 0 && out.stride_n % run == 0 &&
                     out.stride_p % run == 0 && out.stride_q % run == 0 && prm.y_group % run == 0;
  // The vector and transposed forms: the division says the strides allow them; the pointers and the
  // group offsets (a backward step's views set their own) must too.
  const bool grouped = plan.problem().groups > 1;
  auto aligned = [&](GatherForm f, const void* p, long long group_stride) {
    return f == GatherForm::Element ||
           (reinterpret_cast<uintptr_t>(p) % 16 == 0 && (!grouped || group_stride % run == 0));
  };
  // Note [wgmma persistent tiles]: y takes the tensor-map store (the planner's test) from this pointer.
  const bool y_store = d.persistent && y_takes_tensor_map_store(plan.problem(), plan.y_desc(), d.a_gather) &&
                       reinterpret_cast<uintptr_t>(y) % 16 == 0;
  // Note [wgmma wave-fitted filter tiles]: such a tile has its cooperative form only.
  const MmaTileShape& planned = kMmaTileCatalog.at(d.tile);
  const bool keep = aligned(d.a_gather, x, prm.x_group) && aligned(d.b_gather, w, prm.w_group) &&
                    mma_tile_has_forms(planned, d.a_gather, d.b_gather, esz) &&
                    (planned.plain_forms || (d.tensor_maps && y_store));
  const int tile_index = keep ? d.tile : kElementFallbackTile;
  const MmaTileShape& t = kMmaTileCatalog[tile_index];
  const GatherForm a = keep ? d.a_gather : GatherForm::Element, b = keep ? d.b_gather : GatherForm::Element;
  prm.images_fastest = keep && d.images_fastest;
  // Note [wgmma tensor-map loads]: the copy engine needs 16-byte aligned tensors, which the vector
  // forms kept above already are.
  // TF32 loads through tensor maps only on warp-specialized tiles (Note [wgmma tf32 stages]): where
  // this y cannot take their store, the tile gathers.
  const bool tensor_maps = keep && d.tensor_maps && (esz == 2 || (y_store && d.consumers != ConsumerSchedule::None));
  const int64_t kg = plan.problem().k_per_group();
  // Note [wgmma strided dgrad stores]: a 16-bit dgrad step on warp-specialized blocks whose y takes
  // no tensor-map store (a phase's strided dx) stores aligned pairs of filters from the accumulators.
  const bool accumulator_stores = tensor_maps && !y_store && d.persistent && d.consumers != ConsumerSchedule::None &&
                                  esz == 2 && a == GatherForm::Vector && b == GatherForm::Transposed &&
                                  prm.pair_store && kg % 2 == 0 && !grouped;
  prm.accumulator_stores = accumulator_stores;
  // Note [strided dgrad pixel runs]: whole 16-byte runs of filters through the output buffer.
  prm.buffered_pixel_runs = accumulator_stores && prm.staged_store && kg % run == 0;
  const bool persistent = tensor_maps && (y_store || accumulator_stores);
  // Note [wgmma warp-specialized tiles]: the persistent form's conditions, the block's tiles shared by
  // two consumer warpgroups.
  const ConsumerSchedule consumers = persistent ? d.consumers : ConsumerSchedule::None;
  const cuda::LaunchStream on{static_cast<cudaStream_t>(stream), dependent_launch};
  if (tensor_maps) set_tensor_maps(prm, plan, t, a, b, x, w, d.image_pixel_rows);
  const auto y_type = tensor_map_type(plan.dtype());
  constexpr int kBox = cuda::wgmma::kRowBytes / 2;
  // Note [wgmma tf32 stages]: TF32 tiles store y from the accumulators, without an output map.
  if (persistent && esz == 2 && !accumulator_stores) {
    if (a == GatherForm::Transposed)  // Note [wgmma warp-specialized wgrad]: pixels contiguous
      prm.output_map = cuda::tiled_map<2>(y, y_type, {prm.npq, kg}, {out.stride_k}, {kBox, t.block_n});
    else  // a cooperative warpgroup stores its 64 pixels of a tile
      prm.output_map = cuda::tiled_map<2>(y, y_type, {kg, prm.npq}, {out.stride_q},
                                          {kBox, consumers == ConsumerSchedule::Cooperative ? 64 : t.block_m});
  }
  const int k_tiles = static_cast<int>(ceil_div(plan.rows(), t.row_bytes / esz));
  // Note [fused silu]: the persistent and warp-specialized tiles apply SiLU to their output buffer
  // (TF32 and accumulator stores: to their accumulators); the others run identity, and silu_view follows.
  const bool silu_pass = e.activation == Activation::SiLU && !persistent;
  if (silu_pass) prm.activation = cuda::kActivationIdentity;
  // Note [mma atomic slices]: an activation needs the whole sum, so the groups then run as one (the clusters
  // alone); otherwise y is set to beta*y + bias before they add into it.
  prm.atomic_slices = prm.activation != cuda::kActivationIdentity ? 1 : d.atomic_slices;
  if (prm.atomic_slices > 1) output_prepass(plan, d.prepass_blocks, y, e, stream, dependent_launch);
  dim3 grid = cuda::grid_of(d.launch);
  if (!persistent) {  // the planner's persistent grid is one wave; one block a tile otherwise
    grid.x = static_cast<unsigned>(ceil_div(prm.npq, t.block_m));
    grid.y = static_cast<unsigned>(ceil_div(prm.kg, t.block_n));
  }
  visit_math(plan, [&](auto math) {
    using Math = decltype(math);
    visit_instance<Math>(tile_index, a, b, [&](auto tile, auto forms) {
      using Tile = decltype(tile);
      using F = decltype(forms);
      auto run = [&](auto maps, auto persistent_blocks) {
        if constexpr (!Tile::kPlainForms) {
          throw Error(Status::Internal, "implicit_mma: a tile of warp-specialized forms only without them");
        } else {
          constexpr bool kMaps = decltype(maps)::value, kPersistent = decltype(persistent_blocks)::value;
          prm.splits =
              cuda::schedulable_cluster_blocks<cuda::implicit_mma_kernel<Tile, Math, F::kA, F::kB, kMaps, kPersistent>>(
                  d.cluster_split, Tile::kThreads, kSmemBytesOf<Tile, kPersistent>);
          prm.k_tiles_per_split = static_cast<int>(ceil_div(k_tiles, prm.splits * prm.atomic_slices));
          grid.z = static_cast<unsigned>(plan.problem().groups * prm.atomic_slices * prm.splits);
          launch<Tile, Math, F, kMaps, kPersistent>(prm, grid, on);
        }
      };
      // Note [wgmma warp-specialized tiles]: cooperative tiles may split their rows among a cluster,
      // and a wgrad step's among the atomic groups along y (Note [wgmma warp-specialized wgrad]).
      if (consumers != ConsumerSchedule::None) {
        const MmaKernel kernel = warp_specialized_kernel<Tile, Math, F>(consumers, d.cluster_split > 1);
        if (!kernel)
          throw Error(Status::Internal, "implicit_mma: a warp-specialized plan on a tile without that schedule");
        prm.splits = d.cluster_split;
        prm.k_tiles_per_split = static_cast<int>(ceil_div(k_tiles, prm.splits * prm.atomic_slices));
        grid.y = static_cast<unsigned>(prm.atomic_slices);
        grid.z = static_cast<unsigned>(prm.splits);
        cuda::launch_kernel(kernel, grid, Tile::kWarpSpecializedThreads, Tile::kWarpSpecializedSmemBytes, on,
                            prm.splits, prm);
        return;
      }
      if constexpr (kHasPersistent<Tile, Math, F>)
        if (persistent) return run(std::true_type{}, std::true_type{});
      if (persistent) throw Error(Status::Internal, "implicit_mma: a persistent plan on a tile without that form");
      if constexpr (kHasTensorMaps<Tile, Math, F>)
        if (tensor_maps) return run(std::true_type{}, std::false_type{});
      if (tensor_maps) throw Error(Status::Internal, "implicit_mma: tensor-map loads on a tile without them");
      run(std::false_type{}, std::false_type{});
    });
  });
  if (silu_pass) silu_view(plan.y_desc(), y, stream, dependent_launch);
}

}  // namespace mconv::detail
