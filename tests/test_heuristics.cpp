// The planner's choices (src/plan/heuristics.cpp), checked without a GPU: each rule fires where its
// measured evidence says it should, and every choice carries a reason.
#include "../src/plan/heuristics.hpp"
#include "problem_gen.hpp"

namespace mconv::test {
namespace {

using detail::DeviceSummary;
const DeviceSummary kH100{132, 227 * 1024};

Algorithm pick(const Problem& p) {
  std::vector<std::string> why;
  Algorithm a = detail::choose_algorithm(p, why);
  EXPECT_EQ(why.size(), 1u);
  return a;
}

TEST(Heuristics, AlgorithmChoice) {
  EXPECT_EQ(pick(make(32, 32, 112, 112, 32, 3, 3, 1, 1, 1, 32)), Algorithm::DirectBlock);   // depthwise
  EXPECT_EQ(pick(make(32, 96, 112, 112, 192, 3, 3, 1, 2, 1, 96)), Algorithm::DirectBlock);  // multiplier 2
  EXPECT_EQ(pick(make(1, 1, 56, 56, 256, 3, 3)), Algorithm::DirectBlock);                   // single channel
  EXPECT_EQ(pick(make(1, 1, 112, 112, 128, 5, 5)), Algorithm::DirectBlock);
  EXPECT_EQ(pick(make(1, 1, 224, 224, 64, 5, 5)), Algorithm::ImplicitPrecomp);  // 5x5 on a large map
  EXPECT_EQ(pick(make(32, 64, 56, 56, 64, 3, 3, 1)), Algorithm::ImplicitPrecomp);
  EXPECT_EQ(pick(make(32, 64, 56, 56, 64, 3, 3, 1, 1, 1, 2)), Algorithm::ImplicitPrecomp);  // grouped, C/G = 32
}

TEST(Heuristics, TileChoice) {
  std::vector<std::string> why;
  EXPECT_EQ(detail::choose_implicit_precomp_tile(make(32, 512, 7, 7, 512, 3, 3, 1), kH100, false, why).name, "128x128x16");
  EXPECT_EQ(detail::choose_implicit_precomp_tile(make(32, 512, 7, 7, 512, 3, 3, 1), kH100, true, why).name, "128x128x8");
  EXPECT_EQ(detail::choose_implicit_precomp_tile(make(32, 64, 56, 56, 64, 3, 3, 1), kH100, false, why).name, "128x64x8");
  EXPECT_EQ(detail::choose_implicit_precomp_tile(make(1, 512, 7, 7, 512, 3, 3, 1), kH100, false, why).name, "64x32x8");
  EXPECT_EQ(why.size(), 4u);
}

TEST(Heuristics, SplitKOnlyWhenTheGridIsSmall) {
  std::vector<std::string> why;
  const auto& small = *detail::find_tile("64x32x8");
  EXPECT_GT(detail::choose_split_k(make(1, 512, 7, 7, 512, 3, 3, 1), small, kH100, why), 1);
  const auto& big = *detail::find_tile("128x128x16");
  EXPECT_EQ(detail::choose_split_k(make(32, 256, 56, 56, 256, 3, 3, 1), big, kH100, why), 1);
  EXPECT_EQ(detail::choose_split_k(make(1, 4, 7, 7, 8, 1, 1), small, kH100, why), 1);  // too few rows to split
}

TEST(Heuristics, DirectShapeFitsOrSaysWhy) {
  std::vector<std::string> why;
  EXPECT_EQ(detail::choose_direct_shape(make(1, 8, 7, 7, 8, 3, 3, 1, 1, 1, 8), kH100, why).name, "direct_16x8_r1x1_f1");
  EXPECT_EQ(detail::choose_direct_shape(make(1, 1, 56, 56, 64, 3, 3), kH100, why).name, "direct_32x8_r2x2_f4");
  EXPECT_THROW(detail::choose_direct_shape(make(1, 1, 3000, 3000, 1, 7, 7, 0, 1, 400), kH100, why), Error);
}

}  // namespace
}  // namespace mconv::test
