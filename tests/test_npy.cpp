// .npy round trips and malformed files.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

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

// Several writers at once, each with its own content: the file is always one whole content, never a
// mix or a truncation, and no temporary file is left behind.
TEST(File, ConcurrentAtomicWritesLeaveOneWholeFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mconv-file-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "out.bin").string();
  std::vector<std::string> contents;
  for (char c = 'a'; c < 'a' + 6; ++c) contents.emplace_back(size_t(200000 + 1000 * (c - 'a')), c);
  std::vector<std::thread> writers;
  for (const auto& content : contents)
    writers.emplace_back([&] {
      for (int i = 0; i < 20; ++i) file::write_atomically(path, content);
    });
  for (auto& t : writers) t.join();
  const std::string got = file::read(path);
  EXPECT_NE(std::find(contents.begin(), contents.end(), got), contents.end()) << "a mixed or truncated file";
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "a temporary file was left";
  // A directory in the way, or a folder that does not exist: an error naming the path, nothing written.
  EXPECT_THROW(file::write_atomically(dir.string(), "x"), Error);
  EXPECT_THROW(file::write_atomically((dir / "no" / "such").string(), "x"), Error);
  EXPECT_THROW(file::read(dir.string()), Error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mconv::test
