// The tensor-core implicit-GEMM planner: the tile and the gather form, each with its reason.
#include "planner.hpp"

#include <algorithm>
#include <sstream>

#include "tiles.hpp"

namespace mconv::detail {
namespace {

// Note [mma vector gather]: a 16-byte vector is V = 16 / element-size consecutive rows. With rows
// in RSC order (channels fastest) and C/G a multiple of V, every aligned run of V rows shares (r, s)
// and covers V consecutive channels, contiguous in x (channel stride 1) and in w (likewise): one
// cp.async of 16 bytes per (pixel, run) and per (filter, run). Every start address and offset is
// then a multiple of V elements when the strides are, so 16-byte aligned x and w keep every vector
// aligned.
std::string vector_gather_refusal(const Problem& p, const TensorDesc& x, const TensorDesc& w, bool rsc) {
  const int64_t v = 16 / dtype_size(x.dtype);
  if (!rsc) return "rows not channels-fastest (x is not channels-last)";
  if (x.strides[1] != 1) return "x channel stride is not 1";
  if (w.strides[1] != 1) return "w channel stride is not 1 (filters not KRSC)";
  if (p.c_per_group() % v != 0) return "C/G = " + std::to_string(p.c_per_group()) + " is not a multiple of " +
                                        std::to_string(v);
  for (int i : {0, 2, 3})
    if (x.strides[i] % v != 0) return "an x stride is not a multiple of " + std::to_string(v);
  for (int i : {0, 2, 3})
    if (w.strides[i] % v != 0) return "a w stride is not a multiple of " + std::to_string(v);
  return "";
}

int choose_tile(const Problem& p, const HardwareModel& hw, std::vector<std::string>& why) {
  const int64_t cols = p.n * p.p() * p.q(), kg = p.k_per_group();
  const int sms = std::max(hw.sm_count, 1);
  // Largest tile first (more MMAs per byte of shared memory read); skip a tile whose filter half
  // would idle, and one whose grid leaves SMs without a block when a smaller one fills them.
  const int last = int(kMmaTileCatalog.size()) - 1;
  for (int i = 0; i <= last; ++i) {
    const MmaTileShape& t = kMmaTileCatalog[i];
    if (kg <= t.block_n / 2 && t.block_n > 64) continue;
    const int64_t blocks = ceil_div(cols, t.block_m) * ceil_div(kg, t.block_n) * p.groups;
    if (blocks >= sms || i == last) {
      std::ostringstream os;
      os << "tile " << t.name() << ": " << blocks << " blocks for " << sms << " SMs (K/G = " << kg
         << ", N*P*Q = " << cols << "); larger tiles skipped for K/G <= block_n/2 or fewer blocks than SMs";
      why.push_back(os.str());
      return i;
    }
  }
  return last;
}

}  // namespace

std::string implicit_mma_tile_names() {
  std::string names;
  for (const auto& t : kMmaTileCatalog) names += (names.empty() ? "" : ", ") + t.name();
  return names;
}

ImplicitMmaDivision plan_implicit_mma(const Problem& p, const TensorDesc& x, const TensorDesc& w, int64_t rows,
                                      bool rows_order_rsc, const HardwareModel& hw, const std::string& forced_tile,
                                      std::vector<std::string>& why) {
  int tile;
  if (!forced_tile.empty()) {
    tile = find_mma_tile(forced_tile);
    if (tile < 0)
      throw Error(Status::BadParam,
                  "tile: unknown implicit_mma tile '" + forced_tile + "' (known: " + implicit_mma_tile_names() + ")");
    why.push_back("tile " + forced_tile + ": forced");
  } else {
    tile = choose_tile(p, hw, why);
  }
  const MmaTileShape& t = kMmaTileCatalog[tile];
  ImplicitMmaDivision d;
  d.tile = tile;
  d.tile_name = t.name();
  d.block_m = t.block_m;
  d.block_n = t.block_n;
  d.block_k = 64 / dtype_size(x.dtype);
  d.stages = t.stages;
  d.k_tiles = static_cast<int>(ceil_div(rows, d.block_k));
  const std::string refusal = vector_gather_refusal(p, x, w, rows_order_rsc);
  d.vector_gather = refusal.empty();
  why.push_back(d.vector_gather ? "gather: 16-byte vectors of channels (x and w channels-last, C/G a multiple of " +
                                      std::to_string(16 / dtype_size(x.dtype)) + ")"
                                : "gather: single elements (" + refusal + ")");
  d.launch.grid_x = ceil_div(p.n * p.p() * p.q(), t.block_m);
  d.launch.grid_y = ceil_div(p.k_per_group(), t.block_n);
  d.launch.grid_z = p.groups;
  d.launch.threads = t.threads;
  d.launch.smem_bytes = t.smem_bytes;
  if (d.launch.grid_y > 65535) throw Error(Status::Unsupported, "k: too many filter tiles for one launch");
  return d;
}

}  // namespace mconv::detail
