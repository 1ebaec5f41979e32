// Names and text forms of the divisions (what `mconv plan` and the benchmark print).
#include "mconv/division.hpp"

#include <sstream>

namespace mconv {
namespace {

std::string launch_text(const LaunchShape& l) {
  std::ostringstream os;
  os << "launch    grid " << l.grid_x << " x " << l.grid_y << " x " << l.grid_z << ", " << l.threads << " threads, "
     << l.smem_bytes << " B dynamic shared memory\n";
  return os.str();
}

struct NameOf {
  std::string operator()(const std::monostate&) const { return ""; }
  std::string operator()(const ImplicitPrecompDivision& d) const {
    return d.tile_name + (d.ordered_split ? "_os" + std::to_string(d.split_k) : "");
  }
  std::string operator()(const ImplicitMmaDivision& d) const {
    return d.tile_name + (d.tensor_maps ? "_tma" : "") +
           (d.consumers != ConsumerSchedule::None ? consumer_schedule_suffix(d.consumers)
            : d.persistent                        ? "_persistent"
                                                  : "") +
           (d.cluster_split > 1 ? "_cs" + std::to_string(d.cluster_split) : "") +
           (d.atomic_slices > 1 ? "_as" + std::to_string(d.atomic_slices) : "");
  }
  std::string operator()(const DirectBlockDivision& d) const { return d.shape_name; }
  std::string operator()(const SingleChannelDivision& d) const {
    return "single_channel_m" + std::to_string(d.method) + (d.shaped ? "_shaped" : "");
  }
  std::string operator()(const PlaneStreamDivision&) const { return "single_channel_planes"; }
  std::string operator()(const PlaneBulkDivision&) const { return "single_channel_bulk"; }
  std::string operator()(const ChannelsLastDepthwiseDivision&) const { return "single_channel_channels_last"; }
  std::string operator()(const DepthwiseWgradDivision& d) const {
    return "depthwise_wgrad_v" + std::to_string(d.vector) + "x" + std::to_string(d.chunk_vectors) +
           (d.cluster_split > 1 ? "_cs" + std::to_string(d.cluster_split) : "") +
           (d.atomic_slices > 1 ? "_as" + std::to_string(d.atomic_slices) : "");
  }
  std::string operator()(const FewChannelWgradDivision& d) const {
    return "few_channel_wgrad_" + std::to_string(d.tile_p) + "x" + std::to_string(d.tile_q) + "_n" +
           std::to_string(32 * d.column_tiles) + (d.cluster_split > 1 ? "_cs" + std::to_string(d.cluster_split) : "") +
           (d.atomic_slices > 1 ? "_as" + std::to_string(d.atomic_slices) : "");
  }
  std::string operator()(const FewChannelDivision& d) const {
    return "few_channel_" + std::to_string(d.tile_p) + "x" + std::to_string(d.tile_q) + "_c" +
           std::to_string(d.columns);
  }
  std::string operator()(const FewFilterDivision& d) const {
    return "few_filter_" + std::to_string(d.tile_p) + "x" + std::to_string(d.tile_q) + "_c" +
           std::to_string(d.chunk_c) + (d.buffers > 1 ? "_db" : "");
  }
  std::string operator()(const WindowMmaDivision& d) const {
    return "window_mma_" + std::to_string(d.block_pixels) + "x" + std::to_string(d.block_filters) + "_c" +
           std::to_string(d.chunk_c) + "_s" + std::to_string(d.stages) +
           (d.cluster_split > 1 ? "_cs" + std::to_string(d.cluster_split) : "");
  }
  std::string operator()(const StrideFixedDivision& d) const {
    return "stride_fixed_" + std::to_string(d.tile_cols) + "x" + std::to_string(d.tile_rows) + "_s" +
           std::to_string(d.segment_channels * 4) + (d.thread_pixels == 4 ? "_p4" : "");
  }
};

struct TextOf {
  std::string operator()(const std::monostate&) const { return ""; }
  std::string operator()(const ImplicitPrecompDivision& d) const {
    std::ostringstream os;
    os << "division  tile " << d.tile_name << " (" << d.block_m << " pixels x " << d.block_n << " filters x "
       << d.block_k << " rows per stage), " << d.k_tiles << " row tiles, split_k " << d.split_k << " ("
       << d.k_tiles_per_split << " row tiles a slice"
       << (d.ordered_split ? ", summed in rank order in a cluster"
           : d.split_k > 1 ? ", atomics"
                           : "")
       << ")\n";
    return os.str() + launch_text(d.launch);
  }
  std::string operator()(const ImplicitMmaDivision& d) const {
    std::ostringstream os;
    os << "division  tile " << d.tile_name << " (" << d.block_m << " pixels x " << d.block_n << " filters x "
       << d.block_k << " rows per stage, " << d.stages << " stages), " << d.k_tiles << " row tiles, "
       << (!d.tensor_maps ? "gather " + std::string(gather_form_name(d.a_gather)) + "/" + gather_form_name(d.b_gather)
           : d.a_gather == GatherForm::Transposed
               ? std::string("loads x M-major im2col tensor map, w N-major tiled tensor map")
               : std::string("loads x ") + (d.image_pixel_rows ? "pixel-row" : "im2col") + " tensor map, w " +
                     (d.b_gather == GatherForm::Transposed ? "N-major " : "") + "tiled tensor map")
       << (d.consumers != ConsumerSchedule::None
               ? std::string(", ") + consumer_schedule_text(d.consumers, d.tf32_stages())
           : d.persistent ? std::string(", persistent blocks storing through a tensor map of y")
                          : std::string())
       << (d.images_fastest ? ", images fastest" : "") << ", cluster split " << d.cluster_split;
    if (d.atomic_slices > 1)
      os << ", " << d.atomic_slices << " atomic slices (y pre-pass on " << d.prepass_blocks << " blocks)";
    os << "\n";
    return os.str() + launch_text(d.launch);
  }
  std::string operator()(const DirectBlockDivision& d) const {
    std::ostringstream os;
    os << "division  shape " << d.shape_name << ", input tile " << d.tile_rows << "x" << d.tile_cols << " (pitch "
       << d.pitch << "), " << d.filter_slices << " filter slice(s), " << d.images_per_block << " image(s) a block\n";
    return os.str() + launch_text(d.launch);
  }
  std::string operator()(const SingleChannelDivision& d) const {
    std::ostringstream os;
    os << "division  method " << d.method << ", " << d.filters_per_block << " filters x " << d.rows_per_block
       << " rows a block, runs of " << d.run << " rows, strip " << d.strip_rows << "x" << d.strip_cols << " (pitch "
       << d.strip_pitch << ")\n";
    return os.str() + launch_text(d.launch);
  }
  std::string operator()(const PlaneStreamDivision& d) const {
    std::ostringstream os;
    os << "division  " << d.planes_per_block << " plane(s) x " << d.rows_per_block << " rows a chunk, " << d.blocks
       << " chunks, runs of " << d.run << " rows, shared rows " << d.layout.rows << " x pitch " << d.layout.pitch
       << "\n";
    return os.str() + launch_text(d.launch);
  }
  std::string operator()(const PlaneBulkDivision& d) const {
    std::ostringstream os;
    os << "division  " << d.planes_per_chunk << " plane(s) x " << d.rows_per_chunk << " rows a chunk, " << d.chunks
       << " chunks, segments of " << d.segment << ", runs of " << d.run << ", " << d.blocks_per_sm
       << " block(s) per SM\n";
    return os.str() + launch_text(d.launch);
  }
  std::string operator()(const ChannelsLastDepthwiseDivision& d) const {
    std::ostringstream os;
    os << "division  " << d.chunk_channels << " channels a block, " << d.rows_per_thread << " x "
       << d.outputs_per_thread << " output pixels a thread, ";
    if (d.tile_rows > 0)
      os << "tiles of " << d.tile_rows << " x " << d.tile_cols
         << " outputs, input window staged in shared memory (row pitch " << d.window_pitch << " x 16 bytes)";
    else
      os << d.pixel_groups << " pixel groups";
    os << ", " << d.blocks_per_sm << " block(s) an SM\n";
    return os.str() + launch_text(d.launch);
  }
  std::string operator()(const DepthwiseWgradDivision& d) const {
    std::ostringstream os;
    os << "division  " << d.chunk_vectors << " x " << d.vector << " filters a block, " << d.taps_per_block
       << " taps a thread" << (d.window > 0 ? " (register window)" : "") << ", runs of " << d.run << " dy pixels "
       << (d.run_down ? "down a column" : "along a row") << ", " << d.items << " items a chunk over " << d.cluster_split
       << " block(s) of a cluster (rank order) x " << d.atomic_slices << " slice(s)"
       << (d.atomic_slices > 1 ? " adding with atomics" : "") << "\n";
    return os.str() + launch_text(d.launch);
  }
  std::string operator()(const FewChannelWgradDivision& d) const {
    std::ostringstream os;
    os << "division  items of " << d.tile_p << " x " << d.tile_q << " output pixels with their x window, "
       << 32 * d.column_tiles << " columns x 64 filters a block, " << d.items << " items over " << d.cluster_split
       << " block(s) of a cluster (rank order) x " << d.atomic_slices << " slice(s)"
       << (d.atomic_slices > 1 ? " adding with atomics" : "") << ", " << d.half_bytes
       << " bytes of shared memory a half block\n";
    return os.str() + launch_text(d.launch);
  }
  std::string operator()(const FewChannelDivision& d) const {
    std::ostringstream os;
    os << "division  blocks of " << d.tile_p << " x " << d.tile_q << " output pixels x 64 filters with their x window, "
       << d.columns << " columns (C*R*S padded to 16), " << d.smem_bytes << " bytes of shared memory a block\n";
    return os.str() + launch_text(d.launch);
  }
  std::string operator()(const FewFilterDivision& d) const {
    std::ostringstream os;
    os << "division  blocks of " << d.tile_p << " x " << d.tile_q << " output pixels x 8 filters with their x window, "
       << d.chunk_c << " channels a chunk in " << d.buffers << " buffer(s), " << d.smem_bytes
       << " bytes of shared memory a block\n";
    return os.str() + launch_text(d.launch);
  }
  std::string operator()(const WindowMmaDivision& d) const {
    std::ostringstream os;
    os << "division  blocks of " << d.block_pixels << " consecutive output pixels x " << d.block_filters
       << " filters with their window of x (at most " << d.window_rows << " rows of " << d.window_columns << "), "
       << d.chunk_c << " channels a chunk in " << d.stages << " buffers, cluster split " << d.cluster_split
       << " (summed in rank order), " << d.smem_bytes << " bytes of shared memory a block\n";
    return os.str() + launch_text(d.launch);
  }
  std::string operator()(const StrideFixedDivision& d) const {
    std::ostringstream os;
    os << "division  " << d.tile_cols << " x " << d.tile_rows << " pixels (" << d.thread_pixels
       << " a thread), segment " << d.segment_channels << " channels, " << d.rounds << " rounds in " << d.splits
       << " slice(s)\n";
    return os.str() + launch_text(d.launch);
  }
};

}  // namespace

const char* gather_form_name(GatherForm f) {
  switch (f) {
    case GatherForm::Vector:
      return "vector";
    case GatherForm::Transposed:
      return "transposed";
    case GatherForm::Element:
      return "element";
  }
  return "?";
}

std::string division_name(const Division& d) {
  return std::visit(NameOf{}, d);
}

std::string division_text(const Division& d) {
  return std::visit(TextOf{}, d);
}

}  // namespace mconv
