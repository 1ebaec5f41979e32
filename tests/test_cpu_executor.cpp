// The CPU implicit-GEMM executor against the double reference: exact (small integers, bit for bit)
// and float (random values, norm-relative error <= 1e-5), output poisoned with NaN beforehand.
#include "problem_gen.hpp"

namespace mconv::test {
namespace {

void run_case(Case c, std::mt19937_64& g, bool integers) {
  // SiLU's exponential is not an exact integer operation: the bit-exact checks take ReLU in its place.
  if (integers && c.act == Activation::SiLU) c.act = Activation::ReLU;
  SCOPED_TRACE(c.name());
  HostTensors t(c, g, integers);
  std::vector<float> ref = t.y, got = t.y;
  Epilogue e{c.alpha, c.beta, t.bias.empty() ? nullptr : t.bias.data(), c.act};
  cpu::reference_forward(c.p, t.xd, t.x.data(), t.wd, t.w.data(), t.yd, ref.data(), e);
  Engine engine(Target::Cpu);
  auto plan = engine.plan(c.p, t.xd, t.wd, t.yd);
  engine.conv2d_forward(*plan, t.x.data(), t.w.data(), got.data(), e);
  if (integers) {
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(got[i], ref[i]) << "element " << i;
  } else {
    EXPECT_LT(rel_error(got, ref), 1e-5);
  }
}

TEST(CpuImplicitPrecomp, EdgeCasesExact) {
  std::mt19937_64 g(test_seed());
  for (const Case& c : edge_cases()) run_case(c, g, true);
}

TEST(CpuImplicitPrecomp, EdgeCasesFloatEveryLayout) {
  std::mt19937_64 g(test_seed() + 1);
  for (Case c : edge_cases())
    for (int l = 0; l < 3; ++l) {
      c.xl = c.wl = c.yl = Layout(l);
      run_case(c, g, false);
    }
}

TEST(CpuImplicitPrecomp, RandomProblemsFloat) {
  std::mt19937_64 g(test_seed() + 2);
  for (int i = 0; i < 300; ++i) run_case(random_case(g), g, false);
}

TEST(CpuImplicitPrecomp, RandomProblemsExact) {
  std::mt19937_64 g(test_seed() + 3);
  for (int i = 0; i < 100; ++i) {
    Case c = random_case(g);
    c.alpha = 1.0f;  // keep every intermediate an exact small integer
    c.beta = c.beta != 0.0f ? 1.0f : 0.0f;
    run_case(c, g, true);
  }
}

TEST(CpuImplicitPrecomp, LargerThanOneChunkOfRowsAndFilters) {
  // C*R*S = 576 rows > 256 per chunk, K = 130 > 64 per tile, N*P*Q = 98 > 64 per tile.
  std::mt19937_64 g(test_seed() + 4);
  run_case({make(2, 64, 7, 7, 130, 3, 3, 1)}, g, false);
}

TEST(CpuImplicitPrecomp, ScratchIsBoundedByTilesNotProblem) {
  // The executor allocates only its per-thread tile buffers: the same bytes for any problem.
  EXPECT_LT(cpu::implicit_precomp_scratch_bytes_per_thread(), 256 * 1024);
}

TEST(CpuReference, AllLayoutsAgree) {
  std::mt19937_64 g(test_seed() + 5);
  Problem p = make(2, 3, 6, 5, 4, 3, 2, 1, 1, 1, 1);
  std::vector<std::vector<float>> outs;
  std::vector<float> x_nchw(p.n * p.c * p.h * p.w), w_kcrs(p.k * p.c * p.r * p.s);
  fill(x_nchw, g, false);
  fill(w_kcrs, g, false);
  const TensorDesc xn = p.x_desc(Layout::NCHW), wn = p.w_desc(Layout::NCHW);
  for (int l = 0; l < 3; ++l) {
    const TensorDesc xd = p.x_desc(Layout(l)), wd = p.w_desc(Layout(l)), yd = p.y_desc(Layout::NCHW);
    std::vector<float> x(xd.span_elements()), w(wd.span_elements()), y(yd.span_elements());
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t h = 0; h < p.h; ++h)
          for (int64_t ww = 0; ww < p.w; ++ww)
            x[n * xd.strides[0] + c * xd.strides[1] + h * xd.strides[2] + ww * xd.strides[3]] =
                x_nchw[n * xn.strides[0] + c * xn.strides[1] + h * xn.strides[2] + ww * xn.strides[3]];
    for (int64_t k = 0; k < p.k; ++k)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t r = 0; r < p.r; ++r)
          for (int64_t s = 0; s < p.s; ++s)
            w[k * wd.strides[0] + c * wd.strides[1] + r * wd.strides[2] + s * wd.strides[3]] =
                w_kcrs[k * wn.strides[0] + c * wn.strides[1] + r * wn.strides[2] + s * wn.strides[3]];
    cpu::reference_forward(p, xd, x.data(), wd, w.data(), yd, y.data());
    outs.push_back(y);
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
}

TEST(CpuReference, TrueConvolutionFlipsTheFilter) {
  // 1 channel, 1 filter [1 2; 3 4] over a one-hot input: cross-correlation shows the filter flipped,
  // convolution shows it upright.
  Problem p = make(1, 1, 3, 3, 1, 2, 2, 1);
  std::vector<float> x(9, 0.0f), w{1, 2, 3, 4}, y(16);
  x[4] = 1.0f;  // centre
  const TensorDesc xd = p.x_desc(Layout::NCHW), wd = p.w_desc(Layout::NCHW), yd = p.y_desc(Layout::NCHW);
  cpu::reference_forward(p, xd, x.data(), wd, w.data(), yd, y.data());
  EXPECT_EQ(y[1 * 4 + 1], 4.0f);  // y[p=1,q=1] sees x[1,1] at (r,s) = (1,1)
  EXPECT_EQ(y[2 * 4 + 2], 1.0f);
  p.mode = Mode::Convolution;
  cpu::reference_forward(p, xd, x.data(), wd, w.data(), yd, y.data());
  EXPECT_EQ(y[1 * 4 + 1], 1.0f);
  EXPECT_EQ(y[2 * 4 + 2], 4.0f);
}

}  // namespace
}  // namespace mconv::test
