// CPU implicit GEMM that executes the Plan (techniques 1 and 2 on the CPU).
//
// Work item = (group, column tile of kTileCols output pixels, block of kTileFilters filters).
// For each chunk of kChunkRows virtual-matrix rows the item gathers the image tile
//   sImage[row][col] = x[start[col] + offset[row]]   (zero where the padding predicate fails)
// and packs the filter slice through the same table (w_offset), then runs a register-blocked
// micro-kernel of kMicroFilters x kMicroCols accumulators whose inner loop over columns is a fixed
// kMicroCols-wide loop the compiler vectorises (AVX2/AVX-512 FMAs with -march=native). Scratch per thread is
// bounded by the tile sizes (about 150 KB), never proportional to N*P*Q*C*R*S.
#include <algorithm>
#include <vector>

#include "../core/call_checks.hpp"
#include "mconv/cpu.hpp"

namespace mconv::cpu {
namespace {

constexpr int kTileCols = 64;     // output pixels per work item
constexpr int kTileFilters = 64;  // filters per work item
constexpr int kChunkRows = 256;   // rows gathered at once: 256*64*4 B = 64 KB image tile
// Register block: accumulators fill half the vector registers, leaving room for operands.
// Measured on the 2-core AVX-512 development machine (min of 5, three resnet50 layers, 1 thread):
// 8 x 32 in zmm (with -mprefer-vector-width=512) 34.3 ms, 4 x 16 43.0 ms.
#if defined(__AVX512F__)
constexpr int kMicroFilters = 8;  // 8 filters x 32 pixels = 16 zmm
constexpr int kMicroCols = 32;
#else
constexpr int kMicroFilters = 4;  // 4 filters x 16 pixels = 8 ymm (AVX2 has 16)
constexpr int kMicroCols = 16;
#endif
static_assert(kTileCols % kMicroCols == 0 && kTileFilters % kMicroFilters == 0, "tiles must hold whole micro-tiles");

struct Scratch {
  std::vector<float> image;    // [kChunkRows][kTileCols]
  std::vector<float> filters;  // [kTileFilters / kMicroFilters][kChunkRows][kMicroFilters]
  std::vector<float> acc;      // [kTileFilters][kTileCols]
  std::vector<int64_t> start;  // per column: start address (the compiled representation's base)
  std::vector<int64_t> h0, w0;
  Scratch()
      : image(kChunkRows * kTileCols),
        filters(kTileFilters * kChunkRows),
        acc(kTileFilters * kTileCols),
        start(kTileCols),
        h0(kTileCols),
        w0(kTileCols) {}
};

// acc[f][j] += sum_row filters[f][row] * image[row][j] for one register block.
inline void micro_kernel(const float* __restrict image, const float* __restrict packed, int rows,
                         float* __restrict acc) {
  float r[kMicroFilters][kMicroCols];
  for (int f = 0; f < kMicroFilters; ++f)
    for (int j = 0; j < kMicroCols; ++j) r[f][j] = acc[f * kTileCols + j];
  for (int row = 0; row < rows; ++row) {
    const float* xi = image + row * kTileCols;
    const float* a = packed + row * kMicroFilters;
    for (int f = 0; f < kMicroFilters; ++f) {
      const float af = a[f];
#pragma omp simd
      for (int j = 0; j < kMicroCols; ++j) r[f][j] += af * xi[j];
    }
  }
  for (int f = 0; f < kMicroFilters; ++f)
    for (int j = 0; j < kMicroCols; ++j) acc[f * kTileCols + j] = r[f][j];
}

}  // namespace

int64_t implicit_precomp_scratch_bytes_per_thread() {
  return int64_t(kChunkRows * kTileCols + kTileFilters * kChunkRows + kTileFilters * kTileCols) * 4 + 3 * kTileCols * 8;
}

void implicit_precomp_forward(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e) {
  detail::check_call(x, w, y, e, 4);
  const Problem& pr = plan.problem();
  const auto& rows = plan.offset_table();
  const auto& sr = plan.start_rule();
  const auto& out = plan.output_rule();
  const auto& grp = plan.group_strides();
  const int64_t w_sk = plan.w_desc().strides[0];
  const int64_t P = pr.p(), Q = pr.q(), PQ = P * Q, cols = pr.n * PQ, kg = pr.k_per_group();
  const int64_t n_rows = plan.rows();
  const int64_t col_tiles = (cols + kTileCols - 1) / kTileCols;
  const int64_t filter_tiles = (kg + kTileFilters - 1) / kTileFilters;
  const int64_t items = pr.groups * col_tiles * filter_tiles;
  const int H = int(pr.h), W = int(pr.w);

#pragma omp parallel
  {
    Scratch sc;
#pragma omp for schedule(dynamic)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t ft = item % filter_tiles, ct = (item / filter_tiles) % col_tiles;
      const int64_t g = item / (filter_tiles * col_tiles);
      const float* xg = x + g * grp.x;
      const float* wg = w + g * grp.w;
      // Start addresses of this tile's columns, computed once per tile (the only divisions).
      for (int j = 0; j < kTileCols; ++j) {
        const int64_t col = ct * kTileCols + j;
        if (col < cols) {
          const int64_t n = col / PQ, p = (col % PQ) / Q, q = col % Q;
          sc.start[j] = sr.start(n, p, q);
          sc.h0[j] = p * sr.conv_stride_h - sr.pad_h;
          sc.w0[j] = q * sr.conv_stride_w - sr.pad_w;
        } else {  // past the end: every row fails the predicate
          sc.start[j] = 0;
          sc.h0[j] = sc.w0[j] = kDisabledRowDisplacement;
        }
      }
      const int64_t f0 = ft * kTileFilters;
      const int nf = int(std::min<int64_t>(kTileFilters, kg - f0));
      const int nf_blocks = (nf + kMicroFilters - 1) / kMicroFilters;
      std::fill(sc.acc.begin(), sc.acc.end(), 0.0f);
      for (int64_t r0 = 0; r0 < n_rows; r0 += kChunkRows) {
        const int nr = int(std::min<int64_t>(kChunkRows, n_rows - r0));
        // Gather: image[row][j] = x[start[j] + offset[row]], predicated for padding.
        for (int i = 0; i < nr; ++i) {
          const OffsetRow& row = rows[r0 + i];
          float* dst = sc.image.data() + i * kTileCols;
          for (int j = 0; j < kTileCols; ++j) {
            const int64_t hh = sc.h0[j] + row.dh, ww = sc.w0[j] + row.dw;
            dst[j] = (hh >= 0 && hh < H && ww >= 0 && ww < W) ? xg[sc.start[j] + row.x_offset] : 0.0f;
          }
        }
        // Pack filters [block][row][kMicroFilters] through the same table; missing filters are zero.
        // (Rows innermost was measured 15% slower: the strided order gives the prefetcher 8 streams.)
        for (int b = 0; b < nf_blocks; ++b)
          for (int i = 0; i < nr; ++i)
            for (int f = 0; f < kMicroFilters; ++f) {
              const int fi = b * kMicroFilters + f;
              sc.filters[(b * kChunkRows + i) * kMicroFilters + f] =
                  fi < nf ? wg[(f0 + fi) * w_sk + rows[r0 + i].w_offset] : 0.0f;
            }
        for (int b = 0; b < nf_blocks; ++b)
          for (int j = 0; j < kTileCols; j += kMicroCols)
            micro_kernel(sc.image.data() + j, sc.filters.data() + b * kChunkRows * kMicroFilters, nr,
                         sc.acc.data() + b * kMicroFilters * kTileCols + j);
      }
      // Epilogue: y in any layout through the output rule.
      for (int j = 0; j < kTileCols; ++j) {
        const int64_t col = ct * kTileCols + j;
        if (col >= cols) break;
        const int64_t n = col / PQ, p = (col % PQ) / Q, q = col % Q;
        float* yc = y + g * grp.y + n * out.stride_n + p * out.stride_p + q * out.stride_q;
        for (int f = 0; f < nf; ++f) {
          const int64_t k = f0 + f;
          float* dst = yc + k * out.stride_k;
          *dst = static_cast<float>(
              detail::apply_epilogue(e, sc.acc[f * kTileCols + j], dst, e.bias ? e.bias + g * kg + k : nullptr));
        }
      }
    }
  }
}

}  // namespace mconv::cpu
