// The layer as the two implicit-GEMM families (implicit_precomp on FFMA, implicit_mma on tensor
// cores) read it: the Plan's offset table, group strides, start-address and output rules, sizes and
// the epilogue's scalars. Each family's parameter struct derives from it and adds its tensors' element
// types and its own launch flags; implicit_gemm_geometry() fills it from a Plan once for both.
#pragma once

#include "mconv/engine.hpp"
#include "mconv/plan.hpp"

namespace mconv::cuda {

struct ImplicitGemmGeometry {
  const int4* table;  // OffsetRow {x_offset, dh, dw, w_offset}, rows padded to kOffsetTableRowAlign
  const float* bias;  // K values or null
  long long x_group, w_group, y_group;
  long long x_sn, x_sh, x_sw;
  long long w_sk;
  long long y_sn, y_sk, y_sp, y_sq;
  int npq, pq, q;  // columns, P*Q, Q
  int kg;          // filters per group
  int rows;        // valid rows C/G*R*S
  int H, W;
  int stride_h, stride_w, pad_h, pad_w;
  float alpha, beta;
  int activation;  // mconv::Activation's number (epilogue.cuh)
};

#ifdef __CUDACC__
/// Asks L2 for the line that holds table row `row`, when the row is below `end` (Note [offset table
/// prefetch], implicit_mma/kernel.cuh). A hint: nothing waits for it.
__device__ __forceinline__ void prefetch_table_row(const ImplicitGemmGeometry& g, int row, int end) {
  if (row < end) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(g.table + row));
}
#endif

/// The geometry of `plan` and the call's epilogue (host side, once per launch). `family` names the
/// algorithm in the error when the plan has no device table (it was not made by an Engine).
inline ImplicitGemmGeometry implicit_gemm_geometry(const Plan& plan, const Epilogue& e, const char* family) {
  const Problem& pr = plan.problem();
  const auto& sr = plan.start_rule();
  const auto& out = plan.output_rule();
  ImplicitGemmGeometry g{};
  g.table = static_cast<const int4*>(plan.device_table());
  if (!g.table)
    throw Error(Status::BadParam,
                std::string("plan: ") + family + " needs the plan's device table (make the plan with Engine::plan)");
  g.bias = e.bias;
  g.x_group = plan.group_strides().x;
  g.w_group = plan.group_strides().w;
  g.y_group = plan.group_strides().y;
  g.x_sn = sr.stride_n;
  g.x_sh = sr.stride_h;
  g.x_sw = sr.stride_w;
  g.w_sk = plan.w_desc().strides[0];
  g.y_sn = out.stride_n;
  g.y_sk = out.stride_k;
  g.y_sp = out.stride_p;
  g.y_sq = out.stride_q;
  g.npq = static_cast<int>(pr.n * pr.p() * pr.q());  // < 2^31: Problem::validate
  g.pq = static_cast<int>(pr.p() * pr.q());
  g.q = static_cast<int>(pr.q());
  g.kg = static_cast<int>(pr.k_per_group());
  g.rows = static_cast<int>(plan.rows());
  g.H = static_cast<int>(pr.h);
  g.W = static_cast<int>(pr.w);
  g.stride_h = static_cast<int>(pr.stride_h);
  g.stride_w = static_cast<int>(pr.stride_w);
  g.pad_h = static_cast<int>(pr.pad_h);
  g.pad_w = static_cast<int>(pr.pad_w);
  g.alpha = e.alpha;
  g.beta = e.beta;
  g.activation = static_cast<int>(e.activation);
  return g;
}

}  // namespace mconv::cuda
