// The backward passes as forward steps over views (include/mconv/backward.hpp; the derivation is in
// docs/ALGORITHMS.md, "Backward passes").
#include "mconv/backward.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <vector>

namespace mconv {

const char* pass_name(Pass p) {
  switch (p) {
    case Pass::Forward:
      return "fwd";
    case Pass::BackwardData:
      return "dgrad";
    case Pass::BackwardFilter:
      return "wgrad";
  }
  return "?";
}

Pass parse_pass(const std::string& s) {
  for (Pass p : {Pass::Forward, Pass::BackwardData, Pass::BackwardFilter})
    if (s == pass_name(p)) return p;
  throw Error(Status::BadParam, "pass: unknown name '" + s + "' (expected fwd, dgrad or wgrad)");
}

namespace {

// One spatial axis of one dgrad phase. dx rows phase, phase + stride, ... (count of them) receive
//   dx[phase + stride*i] = sum_j dy[i + c0 - j*dil'] * w[r0 + j*step],  j < taps,
// with step = stride/gcd(stride, dil) and dil' = dil/gcd: the taps r whose displacement lands on the
// phase. As a stride-1 forward convolution over dy rows [dy_first, dy_first + dy_count) that reads
// dy with padding (pad, pad_end) and the filter view rotated, output i is exactly that sum.
struct PhaseAxis {
  int64_t phase = 0, count = 0;     // dx rows of the phase
  int64_t taps = 0, tap_first = 0;  // filter view: taps entries from tap_first, step apart
  int64_t step = 1, dil = 1;
  int64_t dy_first = 0, dy_count = 0;
  int64_t pad = 0, pad_end = 0;
  bool empty = true;  // no tap lands on the phase, or every tap reads outside dy
};

PhaseAxis phase_axis(int64_t phase, int64_t in, int64_t out, int64_t f, int64_t pad, int64_t stride, int64_t dil,
                     bool flipped) {
  PhaseAxis a;
  a.phase = phase;
  a.count = phase < in ? (in - phase + stride - 1) / stride : 0;
  const int64_t g = std::gcd(stride, dil);
  a.step = stride / g;
  a.dil = dil / g;
  int64_t r0 = -1;
  for (int64_t r = 0; r < std::min(a.step, f) && r0 < 0; ++r)
    if ((phase + pad - r * dil) % stride == 0) r0 = r;  // phase + pad - r*dil may be negative: % still tests 0
  if (a.count == 0 || r0 < 0) return a;
  a.taps = (f - 1 - r0) / a.step + 1;
  const int64_t c0 = (phase + pad - r0 * dil) / stride;  // exact
  a.tap_first = flipped ? f - 1 - r0 - (a.taps - 1) * a.step : r0;
  a.pad = (a.taps - 1) * a.dil - c0;
  a.dy_count = out;
  if (a.pad < 0) {  // the first dy rows are never read: start the view past them
    a.dy_first = -a.pad;
    a.dy_count -= a.dy_first;
    a.pad = 0;
  }
  // count = dy_count + pad + pad_end - dil*(taps-1) fixes pad_end; rows the last output never reads
  // leave the view instead of making it negative.
  a.pad_end = a.count - a.dy_count - a.pad + a.dil * (a.taps - 1);
  if (a.pad_end < 0) {
    a.dy_count += a.pad_end;
    a.pad_end = 0;
  }
  a.empty = a.dy_count <= 0;
  return a;
}

TensorDesc view(DType t, std::array<int64_t, 4> dims, std::array<int64_t, 4> strides) {
  TensorDesc d;
  d.dtype = t;
  d.dims = dims;
  d.strides = strides;
  return d;
}

}  // namespace

BackwardDecomposition decompose_backward_data(const Problem& pr, const TensorDesc& dy, const TensorDesc& w,
                                              const TensorDesc& dx, GroupSteps group_steps) {
  pr.validate(dx, w, dy);
  if (pr.end_pad_h() != pr.pad_h || pr.end_pad_w() != pr.pad_w)
    throw Error(Status::Unsupported, "pad_h_end, pad_w_end: the backward passes take symmetric padding");
  const bool flipped = pr.mode == Mode::Convolution;
  const Mode step_mode = flipped ? Mode::CrossCorrelation : Mode::Convolution;
  const int64_t G = pr.groups, cg = pr.c_per_group(), kg = pr.k_per_group();
  // One step covers every group when w, viewed as (C, K/G, R', S'), puts group g at g * its channel
  // stride: with one group, or one channel per group. Otherwise the step carries w's group stride.
  const bool natural = G == 1 || cg == 1;
  const bool per_group = !natural && group_steps == GroupSteps::PerGroup;
  const auto &ds = dy.strides, &ws = w.strides, &xs = dx.strides;
  // The column phases are the same for every row phase.
  std::vector<PhaseAxis> columns;
  for (int64_t pw = 0; pw < pr.stride_w; ++pw)
    columns.push_back(phase_axis(pw, pr.w, pr.q(), pr.s, pr.pad_w, pr.stride_w, pr.dil_w, flipped));
  const bool some_column_reached =
      std::any_of(columns.begin(), columns.end(), [](const PhaseAxis& a) { return !a.empty; });
  BackwardDecomposition out;
  for (int64_t ph = 0; ph < pr.stride_h; ++ph) {
    const PhaseAxis ah = phase_axis(ph, pr.h, pr.p(), pr.r, pr.pad_h, pr.stride_h, pr.dil_h, flipped);
    if (ah.count == 0) continue;
    // Rows of dx that no tap reaches in any column phase (a 1x1 layer's odd rows at stride 2) are one
    // fill of whole rows: contiguous along W, so written in 16-byte vectors, in one launch instead
    // of stride_w strided ones.
    if (ah.empty || !some_column_reached) {
      out.fills.push_back(
          {view(dx.dtype, {pr.n, pr.c, ah.count, pr.w}, {xs[0], xs[1], xs[2] * pr.stride_h, xs[3]}), ph * xs[2]});
      continue;
    }
    for (int64_t pw = 0; pw < pr.stride_w; ++pw) {
      const PhaseAxis& aw = columns[size_t(pw)];
      if (aw.count == 0) continue;
      const TensorDesc dx_view =
          view(dx.dtype, {pr.n, pr.c, ah.count, aw.count}, {xs[0], xs[1], xs[2] * pr.stride_h, xs[3] * pr.stride_w});
      const int64_t dx_offset = ph * xs[2] + pw * xs[3];
      if (aw.empty) {  // rows reached, but not these columns
        out.fills.push_back({dx_view, dx_offset});
        continue;
      }
      ForwardStep st;
      Problem& q = st.problem;
      q.n = pr.n;
      q.c = pr.k;
      q.h = ah.dy_count;
      q.w = aw.dy_count;
      q.k = pr.c;
      q.r = ah.taps;
      q.s = aw.taps;
      q.pad_h = ah.pad;
      q.pad_w = aw.pad;
      q.pad_h_end = ah.pad_end;
      q.pad_w_end = aw.pad_end;
      q.stride_h = q.stride_w = 1;
      q.dil_h = ah.dil;
      q.dil_w = aw.dil;
      q.groups = G;
      q.mode = step_mode;
      st.x = view(dy.dtype, {pr.n, pr.k, ah.dy_count, aw.dy_count}, ds);
      st.x_offset = ah.dy_first * ds[2] + aw.dy_first * ds[3];
      // w'[c][k][j][i] = w[k][c][tap_first + j*step][...]: filters and channels exchanged.
      const int64_t w_k_stride = cg == 1 ? kg * ws[0] : ws[1];
      st.w = view(w.dtype, {pr.c, kg, ah.taps, aw.taps}, {w_k_stride, ws[0], ws[2] * ah.step, ws[3] * aw.step});
      st.w_offset = ah.tap_first * ws[2] + aw.tap_first * ws[3];
      st.y = dx_view;
      st.y_offset = dx_offset;
      if (!natural && !per_group) st.group_strides = GroupStrides{kg * ds[1], kg * ws[0], cg * xs[1]};
      if (!per_group) {
        out.steps.push_back(st);
        continue;
      }
      // One step per group: dy's channels [g*K/G, ...), w's filters [g*K/G, ...), dx's channels [g*C/G, ...).
      st.problem.c = kg;
      st.problem.k = cg;
      st.problem.groups = 1;
      st.x.dims[1] = kg;
      st.w.dims[0] = cg;
      st.y.dims[1] = cg;
      for (int64_t g = 0; g < G; ++g) {
        ForwardStep sg = st;
        sg.x_offset += g * kg * ds[1];
        sg.w_offset += g * kg * ws[0];
        sg.y_offset += g * cg * xs[1];
        out.steps.push_back(sg);
      }
    }
  }
  return out;
}

BackwardDecomposition decompose_backward_filter(const Problem& pr, const TensorDesc& x, const TensorDesc& dy,
                                                const TensorDesc& dw, GroupSteps group_steps) {
  pr.validate(x, dw, dy);
  if (pr.end_pad_h() != pr.pad_h || pr.end_pad_w() != pr.pad_w)
    throw Error(Status::Unsupported, "pad_h_end, pad_w_end: the backward passes take symmetric padding");
  if (pr.mode == Mode::Convolution)
    throw Error(Status::Unsupported,
                "mode: the filter gradient of a true convolution is not implemented (its r and s run backwards "
                "through dw, which positive strides cannot express)");
  const int64_t G = pr.groups, cg = pr.c_per_group(), kg = pr.k_per_group();
  const auto &xs = x.strides, &ds = dy.strides, &ws = dw.strides;
  ForwardStep st;
  Problem& q = st.problem;
  q.n = cg;
  q.c = G * pr.n;
  q.k = pr.k;
  q.r = pr.p();
  q.s = pr.q();
  q.stride_h = pr.dil_h;
  q.stride_w = pr.dil_w;
  q.dil_h = pr.stride_h;
  q.dil_w = pr.stride_w;
  q.groups = G;
  q.pad_h = pr.pad_h;
  q.pad_w = pr.pad_w;
  // The step's output extent (h + pad + pad_end - stride*(P-1) - 1) / dil + 1 must be R exactly;
  // input rows past the last one read leave the view.
  int64_t h = pr.h, w = pr.w;
  int64_t pad_h_end = pr.dil_h * (pr.r - 1) + pr.stride_h * (q.r - 1) + 1 - h - pr.pad_h;
  int64_t pad_w_end = pr.dil_w * (pr.s - 1) + pr.stride_w * (q.s - 1) + 1 - w - pr.pad_w;
  if (pad_h_end < 0) h += pad_h_end, pad_h_end = 0;
  if (pad_w_end < 0) w += pad_w_end, pad_w_end = 0;
  q.h = h;
  q.w = w;
  q.pad_h_end = pad_h_end;
  q.pad_w_end = pad_w_end;
  // x'[c][g*N + n] = x[n][g*C/G + c]: the group's batch axis is its channel axis, so the group
  // stride (C/G channels of x) is the step's own when there is one group.
  st.x = view(x.dtype, {cg, G * pr.n, h, w}, {xs[1], xs[0], xs[2], xs[3]});
  st.w = view(dy.dtype, {pr.k, pr.n, q.r, q.s}, {ds[1], ds[0], ds[2], ds[3]});
  st.y = view(dw.dtype, {cg, pr.k, pr.r, pr.s}, {ws[1], ws[0], ws[2], ws[3]});
  BackwardDecomposition out;
  if (G == 1) {
    out.steps.push_back(st);
    return out;
  }
  if (group_steps == GroupSteps::Fused) {
    st.group_strides = GroupStrides{cg * xs[1], kg * ds[1], kg * ws[0]};
    out.steps.push_back(st);
    return out;
  }
  q.c = pr.n;
  q.k = kg;
  q.groups = 1;
  st.x.dims[1] = pr.n;
  st.w.dims[0] = kg;
  st.y.dims[1] = kg;
  for (int64_t g = 0; g < G; ++g) {
    ForwardStep sg = st;
    sg.x_offset = g * cg * xs[1];
    sg.w_offset = g * kg * ds[1];
    sg.y_offset = g * kg * ws[0];
    out.steps.push_back(sg);
  }
  return out;
}

bool BackwardPlan::deterministic() const {
  for (const auto& p : plans)
    if (!p->deterministic()) return false;
  return true;
}

// Note [phase steps' SM shares]: a strided dgrad's phase steps run at once on side streams. A
// persistent grid of one block an SM for each would hold the whole GPU for one phase while the
// others waited, so each step's persistent grid takes a share of the SMs in proportion to its work,
// and the phases run side by side, ending about together. A step's work is its output times its
// reduction plus a tile's fixed cost (its epilogue), worth kTileCostRows reduction rows. With shares
// in proportion to the multiply-adds alone (4, 2, 2 and 1 of a 3x3 layer's 9 taps) the one-tap
// phase's 15 blocks walked the most rounds of tiles, and taking each layer's time as theirs, a tile
// cost 2.2, 3.3 and 5.3 us at 2, 4 and 8 stages of 64 rows (l2_3x3s2, l3_3x3s2, l4_3x3s2; bf16,
// H200, ping-pong 128x128): 1.15 us plus 0.52 a stage. With the tile's cost counted, l2_3x3s2 went
// 32.7 -> 24.9 us, the others unchanged. Grids of one block a tile are not capped: the hardware
// interleaves them.
namespace {
constexpr double kTileCostRows = 141;  // 1.15 / 0.52 = 2.2 stages of 64 rows
}  // namespace

std::vector<double> step_sm_shares(const BackwardDecomposition& d) {
  std::vector<double> work;
  double total = 0;
  for (const ForwardStep& st : d.steps) {
    const Problem& p = st.problem;
    work.push_back(double(p.n * p.p() * p.q()) * double(p.k) * (double(p.c_per_group() * p.r * p.s) + kTileCostRows));
    total += work.back();
  }
  std::vector<double> shares;
  for (double w : work) shares.push_back(d.steps.size() == 1 || total <= 0 ? 1.0 : std::min(w / total, 1.0));
  return shares;
}

int64_t BackwardPlan::table_bytes() const {
  int64_t b = 0;
  for (const auto& p : plans)  // only the implicit GEMMs read an offset table
    if (p->algorithm() == Algorithm::ImplicitPrecomp || p->algorithm() == Algorithm::ImplicitMma) b += p->table_bytes();
  return b;
}

std::string BackwardPlan::to_text(int64_t max_rows) const {
  std::ostringstream os;
  os << pass_name(pass) << " of " << problem.to_string() << "\n";
  os << (pass == Pass::BackwardData ? "dy " : "x  ") << a.to_string() << "\n";
  os << (pass == Pass::BackwardData ? "w  " : "dy ") << b.to_string() << "\n";
  os << (pass == Pass::BackwardData ? "dx " : "dw ") << out.to_string() << "\n";
  os << decomposition.steps.size() << " forward step(s), " << decomposition.fills.size() << " fill(s), "
     << table_bytes() << " table bytes, " << (deterministic() ? "deterministic" : "atomic split-K") << "\n";
  for (size_t i = 0; i < decomposition.steps.size(); ++i) {
    const ForwardStep& st = decomposition.steps[i];
    os << "\nstep " << i << ": offsets x+" << st.x_offset << " w+" << st.w_offset << " y+" << st.y_offset;
    if (st.group_strides)
      os << ", group strides x " << st.group_strides->x << " w " << st.group_strides->w << " y " << st.group_strides->y;
    os << "\n";
    if (i < plans.size()) os << plans[i]->to_text(max_rows);
  }
  for (const FillStep& f : decomposition.fills)
    os << "fill " << f.view.to_string() << " at +" << f.offset << " with beta * itself\n";
  return os.str();
}

}  // namespace mconv
