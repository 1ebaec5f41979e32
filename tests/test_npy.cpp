// .npy round trips and malformed files.
#include <cstdio>
#include <fstream>

#include "problem_gen.hpp"

namespace mconv::test {
namespace {

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "mconv_" + name;
}

TEST(Npy, RoundTrip) {
  std::mt19937_64 g(test_seed());
  for (std::vector<int64_t> shape : {std::vector<int64_t>{2, 3, 4, 5}, {7}, {1, 1, 1, 1}, {3, 0, 2}}) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v(n);
    fill(v, g, false);
    const std::string path = tmp_path("roundtrip.npy");
    npy::save(path, shape, v.data());
    npy::Array a = npy::load(path);
    EXPECT_EQ(a.shape, shape);
    EXPECT_EQ(a.data, v);
  }
}

TEST(Npy, ReadsWhatNumpyWrites) {
  // The bytes numpy 1.x writes for np.arange(3, dtype='<f4').
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string bytes =
      std::string("\x93NUMPY\x01\x00", 8) + char(header.size() & 0xff) + char(header.size() >> 8) + header;
  const float vals[3] = {0.0f, 1.0f, 2.0f};
  bytes.append(reinterpret_cast<const char*>(vals), 12);
  npy::Array a = npy::parse(bytes);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(a.data, (std::vector<float>{0, 1, 2}));
}

void expect_io_error(const std::string& bytes, const std::string& what) {
  try {
    npy::parse(bytes, "test.npy");
    ADD_FAILURE() << "no error for " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::IoError);
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

std::string with_header(const std::string& dict, size_t data_bytes) {
  std::string h = dict + "\n";
  return std::string("\x93NUMPY\x01\x00", 8) + char(h.size() & 0xff) + char(h.size() >> 8) + h +
         std::string(data_bytes, '\0');
}

TEST(Npy, MalformedFilesGetClearErrors) {
  expect_io_error("", "bad magic");
  expect_io_error("GIF89a....", "bad magic");
  expect_io_error(std::string("\x93NUMPY\x09\x00\x00\x00", 10), "version");
  expect_io_error(std::string("\x93NUMPY\x01\x00\xff\x00", 10) + "{'descr'", "truncated");
  expect_io_error(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16), "float32");
  expect_io_error(with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8), "float32");
  expect_io_error(with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8), "fortran_order");
  expect_io_error(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 8), "data holds");
  expect_io_error(with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (x,), }", 8), "shape");
  expect_io_error(with_header("{'descr': '<f4', 'fortran_order': False}", 8), "shape");
  EXPECT_THROW(npy::load(tmp_path("does_not_exist.npy")), Error);
}

}  // namespace
}  // namespace mconv::test
