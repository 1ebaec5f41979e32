// Bad input gets a clear error naming the field, and leaves y untouched.
#include "problem_gen.hpp"

namespace mconv::test {
namespace {

// Expects `f` to throw Error with `status` and a message containing `field`.
template <class F>
void expect_error(F&& f, Status status, const std::string& field) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one about '" << field << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << "message: " << e.what();
  }
}

Problem good() {
  return make(2, 4, 8, 8, 6, 3, 3, 1, 1, 1, 2);
}

TEST(Validation, EverySizeMustBePositive) {
  for (auto [member, name] : std::vector<std::pair<int64_t Problem::*, std::string>>{{&Problem::n, "n"},
                                                                                     {&Problem::c, "c"},
                                                                                     {&Problem::h, "h"},
                                                                                     {&Problem::w, "w"},
                                                                                     {&Problem::k, "k"},
                                                                                     {&Problem::r, "r"},
                                                                                     {&Problem::s, "s"},
                                                                                     {&Problem::stride_h, "stride_h"},
                                                                                     {&Problem::stride_w, "stride_w"},
                                                                                     {&Problem::dil_h, "dil_h"},
                                                                                     {&Problem::dil_w, "dil_w"},
                                                                                     {&Problem::groups, "groups"}}) {
    for (int64_t bad : {0, -3}) {
      Problem p = good();
      p.*member = bad;
      expect_error([&] { p.validate(); }, Status::BadParam, name);
    }
  }
  Problem p = good();
  p.pad_h = -1;
  expect_error([&] { p.validate(); }, Status::BadParam, "pad_h");
}

TEST(Validation, GroupsMustDivideCAndK) {
  Problem p = good();
  p.groups = 3;
  expect_error([&] { p.validate(); }, Status::BadParam, "groups");
  p = good();
  p.k = 7;
  expect_error([&] { p.validate(); }, Status::BadParam, "groups");
}

TEST(Validation, FilterLargerThanPaddedInput) {
  Problem p = make(1, 1, 4, 4, 1, 7, 3, 1);
  expect_error([&] { p.validate(); }, Status::BadParam, "r");
  p = make(1, 1, 8, 4, 1, 3, 3, 0, 1, 3);  // dilated width 7 > 4
  expect_error([&] { p.validate(); }, Status::BadParam, "s");
}

TEST(Validation, OverflowingShapes) {
  Problem p = make(1 << 20, 1 << 20, 1 << 12, 1 << 12, 1, 1, 1);
  expect_error([&] { p.validate(); }, Status::Overflow, "");
  p = make(1, 1, int64_t(1) << 30, 1, 1, 1, 1);
  expect_error([&] { p.validate(); }, Status::Overflow, "h");
  p = make(1 << 16, 1, 1 << 12, 1 << 12, 1, 1, 1);  // n*p*q = 2^40 columns
  expect_error([&] { p.validate(); }, Status::Overflow, "n*p*q");
}

TEST(Validation, DescriptorsMustMatchTheProblem) {
  Problem p = good();
  TensorDesc x = p.x_desc(Layout::NCHW), w = p.w_desc(Layout::NCHW), y = p.y_desc(Layout::NCHW);
  TensorDesc bad = x;
  bad.dims[1] = 5;
  expect_error([&] { p.validate(bad, w, y); }, Status::BadParam, "x.dims[1]");
  bad = w;
  bad.dims[1] = p.c;  // a full-channel filter on a grouped problem
  expect_error([&] { p.validate(x, bad, y); }, Status::BadParam, "w.dims[1]");
  bad = y;
  bad.dims[2] += 1;
  expect_error([&] { p.validate(x, w, bad); }, Status::BadParam, "y.dims[2]");
  bad = x;
  bad.dtype = DType::Float16;
  expect_error([&] { p.validate(bad, w, y); }, Status::Unsupported, "x.dtype");
  bad = x;
  bad.strides[3] = -1;
  expect_error([&] { p.validate(bad, w, y); }, Status::Unsupported, "x.strides[3]");
  bad = y;
  bad.strides[1] = 1;  // channels and columns on top of each other
  expect_error([&] { p.validate(x, w, bad); }, Status::BadParam, "y.strides");
}

TEST(Validation, ErrorsLeaveTheOutputUntouched) {
  Problem p = good();
  TensorDesc x = p.x_desc(Layout::NCHW), w = p.w_desc(Layout::NCHW), y = p.y_desc(Layout::NCHW);
  std::vector<float> xs(x.span_elements(), 1.0f), ws(w.span_elements(), 1.0f), ys(y.span_elements(), 42.0f);
  Engine e(Target::Cpu);
  auto plan = e.plan(p, x, w, y);
  expect_error([&] { e.conv2d_forward(*plan, nullptr, ws.data(), ys.data()); }, Status::NullPointer, "x");
  expect_error([&] { e.conv2d_forward(*plan, xs.data(), nullptr, ys.data()); }, Status::NullPointer, "w");
  expect_error([&] { e.conv2d_forward(*plan, xs.data(), ws.data(), nullptr); }, Status::NullPointer, "y");
  const char* raw = reinterpret_cast<const char*>(xs.data());
  expect_error([&] { e.conv2d_forward(*plan, raw + 2, ws.data(), ys.data()); }, Status::Misaligned, "x");
  Epilogue ep;
  ep.bias = reinterpret_cast<const float*>(raw + 1);
  expect_error([&] { e.conv2d_forward(*plan, xs.data(), ws.data(), ys.data(), ep); }, Status::Misaligned, "bias");
  // y sharing memory with x or w, alpha or beta not finite.
  expect_error([&] { e.conv2d_forward(*plan, xs.data(), ws.data(), xs.data()); }, Status::BadParam, "overlaps x");
  // w and y in one buffer of their own, so that y overlaps w and nothing else wherever the heap puts x.
  std::vector<float> wy(ws.size() + ys.size() + 1, 1.0f);
  expect_error([&] { e.conv2d_forward(*plan, xs.data(), wy.data(), wy.data() + 1); }, Status::BadParam, "overlaps w");
  ep = Epilogue{};
  ep.alpha = NAN;
  expect_error([&] { e.conv2d_forward(*plan, xs.data(), ws.data(), ys.data(), ep); }, Status::BadParam, "alpha");
  ep = Epilogue{};
  ep.beta = INFINITY;
  expect_error([&] { e.conv2d_forward(*plan, xs.data(), ws.data(), ys.data(), ep); }, Status::BadParam, "beta");
  TensorDesc bad = x;
  bad.dims[0] = 3;
  expect_error([&] { cpu::reference_forward(p, bad, xs.data(), w, ws.data(), y, ys.data()); }, Status::BadParam,
               "x.dims[0]");
  for (float v : ys) ASSERT_EQ(v, 42.0f);
}

TEST(Validation, CudaTargetWithoutCudaSaysSo) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present";
  expect_error([] { Engine e(Target::Cuda); }, Status::NoDevice, "target");
}

TEST(Validation, NamesParse) {
  EXPECT_EQ(parse_layout("nhwc"), Layout::NHWC);
  expect_error([] { parse_layout("NWHC"); }, Status::BadParam, "layout");
  EXPECT_EQ(parse_algorithm("implicit_precomp"), Algorithm::ImplicitPrecomp);
  expect_error([] { parse_algorithm("fast"); }, Status::BadParam, "algorithm");
}

}  // namespace
}  // namespace mconv::test

namespace mconv::test {
namespace {

TEST(HardwareModel, JsonRoundTripAndDerivedQuantities) {
  HardwareModel m;
  m.name = "Test GPU";
  m.uuid = "abc";
  m.cc_major = 9;
  m.sm_count = 132;
  m.cores_per_sm = 128;
  m.clock_mhz = 1980;
  m.latency_cycles = 600;
  m.bandwidth = 3.0e12;
  EXPECT_DOUBLE_EQ(m.n_fma(), 600.0 * 128 * 2);
  EXPECT_NEAR(m.bytes_per_cycle(), 3.0e12 / 1.98e9, 1e-6);
  EXPECT_NEAR(m.v_s(), m.bytes_per_cycle() * 600, 1e-6);
  HardwareModel back = HardwareModel::from_json(m.to_json());
  EXPECT_EQ(back.name, m.name);
  EXPECT_EQ(back.latency_cycles, m.latency_cycles);
  EXPECT_EQ(back.bandwidth, m.bandwidth);
  EXPECT_NE(m.to_text().find("N_FMA"), std::string::npos);
}

TEST(HardwareModel, CorruptOrStaleCacheIsRejected) {
  EXPECT_THROW(HardwareModel::from_json("{\"version\": 1, \"name\": \"tru"), Error);
  EXPECT_THROW(HardwareModel::from_json("{\"version\": 1}"), Error);
  HardwareModel m;
  m.name = "x";
  m.sm_count = 1;
  m.clock_mhz = 1;
  m.latency_cycles = 1;
  m.bandwidth = 1;
  std::string j = m.to_json();
  j.replace(j.find("\"version\": 1"), 12, "\"version\": 0");
  EXPECT_THROW(HardwareModel::from_json(j), Error);
}

TEST(HardwareModel, CacheDirFollowsXdg) {
  setenv("XDG_CACHE_HOME", "/tmp/mconv-xdg-test", 1);
  EXPECT_EQ(hardware_cache_dir(), "/tmp/mconv-xdg-test/mconv");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_NE(hardware_cache_dir().find(".cache/mconv"), std::string::npos);
}

TEST(HardwareModel, NoDeviceSaysSo) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(hardware_model(0), Error);
}

}  // namespace
}  // namespace mconv::test
