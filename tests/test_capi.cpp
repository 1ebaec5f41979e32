// The C ABI: a full call sequence, and errors as status codes with messages.
#include <cstring>
#include <regex>

#include "mconv/mconv.h"
#include "problem_gen.hpp"

namespace mconv::test {
namespace {

TEST(CApi, RunsAConvolutionOnTheCpu) {
  mconv_problem_t p = mconv_problem_default();
  p.n = 1;
  p.c = 2;
  p.h = 5;
  p.w = 5;
  p.k = 3;
  p.r = 3;
  p.s = 3;
  p.pad_h = p.pad_w = 1;
  mconv_tensor_desc_t x, w, y;
  ASSERT_EQ(mconv_tensor_desc_packed(MCONV_LAYOUT_NCHW, 1, 2, 5, 5, &x), MCONV_STATUS_SUCCESS);
  ASSERT_EQ(mconv_tensor_desc_packed(MCONV_LAYOUT_NCHW, 3, 2, 3, 3, &w), MCONV_STATUS_SUCCESS);
  ASSERT_EQ(mconv_tensor_desc_packed(MCONV_LAYOUT_NHWC, 1, 3, 5, 5, &y), MCONV_STATUS_SUCCESS);
  mconv_engine_t e = nullptr;
  ASSERT_EQ(mconv_engine_create(MCONV_TARGET_CPU, 0, nullptr, &e), MCONV_STATUS_SUCCESS);
  mconv_plan_t plan = nullptr;
  ASSERT_EQ(mconv_plan_create(e, &p, &x, &w, &y, MCONV_ALGO_AUTO, nullptr, MCONV_MATH_EXACT, &plan),
            MCONV_STATUS_SUCCESS)
      << mconv_last_error_message();
  int64_t bytes = 0;
  EXPECT_EQ(mconv_plan_table_bytes(plan, &bytes), MCONV_STATUS_SUCCESS);
  EXPECT_EQ(bytes, kOffsetTableRowAlign * 16);
  int64_t needed = 0;
  char buf[64];
  EXPECT_EQ(mconv_plan_describe(plan, buf, sizeof buf, &needed), MCONV_STATUS_SUCCESS);
  EXPECT_GT(needed, 64);
  EXPECT_EQ(std::strlen(buf), 63u);

  std::mt19937_64 g(test_seed());
  std::vector<float> xs(50), ws(54), ys(75, NAN), ref(75);
  fill(xs, g, true);
  fill(ws, g, true);
  ASSERT_EQ(mconv_conv2d_forward(e, plan, xs.data(), ws.data(), ys.data(), 1.0f, 0.0f, nullptr, 0),
            MCONV_STATUS_SUCCESS);
  Problem pp = make(1, 2, 5, 5, 3, 3, 3, 1);
  cpu::reference_forward(pp, pp.x_desc(Layout::NCHW), xs.data(), pp.w_desc(Layout::NCHW), ws.data(),
                         pp.y_desc(Layout::NHWC), ref.data());
  EXPECT_EQ(ys, ref);
  EXPECT_EQ(mconv_plan_destroy(plan), MCONV_STATUS_SUCCESS);
  EXPECT_EQ(mconv_engine_destroy(e), MCONV_STATUS_SUCCESS);
}

TEST(CApi, BackwardPassesOnTheCpu) {
  mconv_problem_t p = mconv_problem_default();
  p.n = 2;
  p.c = 4;
  p.h = p.w = 7;
  p.k = 6;
  p.r = p.s = 3;
  p.pad_h = p.pad_w = 1;
  p.stride_h = p.stride_w = 2;
  mconv_tensor_desc_t x, w, y;
  ASSERT_EQ(mconv_tensor_desc_packed(MCONV_LAYOUT_NHWC, 2, 4, 7, 7, &x), MCONV_STATUS_SUCCESS);
  ASSERT_EQ(mconv_tensor_desc_packed(MCONV_LAYOUT_NCHW, 6, 4, 3, 3, &w), MCONV_STATUS_SUCCESS);
  ASSERT_EQ(mconv_tensor_desc_packed(MCONV_LAYOUT_NHWC, 2, 6, 4, 4, &y), MCONV_STATUS_SUCCESS);
  mconv_engine_t e = nullptr;
  ASSERT_EQ(mconv_engine_create(MCONV_TARGET_CPU, 0, nullptr, &e), MCONV_STATUS_SUCCESS);
  mconv_backward_plan_t dgrad = nullptr, wgrad = nullptr;
  ASSERT_EQ(mconv_backward_plan_create(e, MCONV_PASS_DGRAD, &p, &y, &w, &x, MCONV_MATH_EXACT, 0, &dgrad),
            MCONV_STATUS_SUCCESS)
      << mconv_last_error_message();
  ASSERT_EQ(mconv_backward_plan_create(e, MCONV_PASS_WGRAD, &p, &x, &y, &w, MCONV_MATH_EXACT, 1, &wgrad),
            MCONV_STATUS_SUCCESS)
      << mconv_last_error_message();
  std::mt19937_64 g(test_seed() + 70);
  std::vector<float> xv(2 * 4 * 49), wv(6 * 4 * 9), yv(2 * 6 * 16);
  fill(xv, g, false);
  fill(wv, g, false);
  fill(yv, g, false);
  std::vector<float> dx(xv.size(), NAN), dw(wv.size(), NAN), ref_dx(xv.size()), ref_dw(wv.size());
  ASSERT_EQ(mconv_conv2d_backward_data(e, dgrad, yv.data(), wv.data(), dx.data(), 1.0f, 0.0f), MCONV_STATUS_SUCCESS);
  ASSERT_EQ(mconv_conv2d_backward_filter(e, wgrad, xv.data(), yv.data(), dw.data(), 1.0f, 0.0f), MCONV_STATUS_SUCCESS);
  Problem q = make(2, 4, 7, 7, 6, 3, 3, 1, 2);
  const TensorDesc xd = q.x_desc(Layout::NHWC), wd = q.w_desc(Layout::NCHW), yd = q.y_desc(Layout::NHWC);
  cpu::reference_backward_data(q, yd, yv.data(), wd, wv.data(), xd, ref_dx.data());
  cpu::reference_backward_filter(q, xd, xv.data(), yd, yv.data(), wd, ref_dw.data());
  EXPECT_LT(rel_error(dx, ref_dx), 1e-5);
  EXPECT_LT(rel_error(dw, ref_dw), 1e-5);
  // A dgrad plan given to the filter pass, and an unknown pass: status and message.
  EXPECT_EQ(mconv_conv2d_backward_filter(e, dgrad, xv.data(), yv.data(), dw.data(), 1.0f, 0.0f),
            MCONV_STATUS_BAD_PARAM);
  EXPECT_NE(std::string(mconv_last_error_message()).find("dgrad plan"), std::string::npos);
  mconv_backward_plan_t bad = nullptr;
  EXPECT_EQ(mconv_backward_plan_create(e, 7, &p, &y, &w, &x, MCONV_MATH_EXACT, 0, &bad), MCONV_STATUS_BAD_PARAM);
  EXPECT_EQ(bad, nullptr);
  EXPECT_EQ(mconv_backward_plan_destroy(dgrad), MCONV_STATUS_SUCCESS);
  EXPECT_EQ(mconv_backward_plan_destroy(wgrad), MCONV_STATUS_SUCCESS);
  EXPECT_EQ(mconv_engine_destroy(e), MCONV_STATUS_SUCCESS);
}

TEST(CApi, ErrorsComeBackAsStatusAndMessage) {
  mconv_engine_t e = nullptr;
  ASSERT_EQ(mconv_engine_create(MCONV_TARGET_CPU, 0, nullptr, &e), MCONV_STATUS_SUCCESS);
  mconv_problem_t p = mconv_problem_default();
  p.groups = 0;
  mconv_tensor_desc_t d;
  mconv_tensor_desc_packed(MCONV_LAYOUT_NCHW, 1, 1, 1, 1, &d);
  mconv_plan_t plan = nullptr;
  EXPECT_EQ(mconv_plan_create(e, &p, &d, &d, &d, MCONV_ALGO_AUTO, nullptr, MCONV_MATH_EXACT, &plan),
            MCONV_STATUS_BAD_PARAM);
  EXPECT_NE(std::string(mconv_last_error_message()).find("groups"), std::string::npos);
  EXPECT_EQ(plan, nullptr);
  EXPECT_EQ(mconv_plan_create(e, nullptr, &d, &d, &d, 0, nullptr, MCONV_MATH_EXACT, &plan), MCONV_STATUS_NULL_POINTER);
  EXPECT_EQ(mconv_plan_create(e, &p, &d, &d, &d, 99, nullptr, MCONV_MATH_EXACT, &plan), MCONV_STATUS_BAD_PARAM);
  EXPECT_EQ(mconv_tensor_desc_packed(7, 1, 1, 1, 1, &d), MCONV_STATUS_BAD_PARAM);
  EXPECT_STREQ(mconv_status_string(MCONV_STATUS_OVERFLOW), "overflow");
  EXPECT_TRUE(std::regex_match(mconv_version(), std::regex("[0-9]+\\.[0-9]+\\.[0-9]+")));
  EXPECT_EQ(mconv_cuda_available(), cuda_available() ? 1 : 0);
  mconv_engine_destroy(e);
}

}  // namespace
}  // namespace mconv::test
