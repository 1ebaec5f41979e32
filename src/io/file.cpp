// Whole-file reads and atomic writes (temporary file + rename).
#include "mconv/file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "mconv/types.hpp"

namespace mconv::file {
namespace fs = std::filesystem;

void write_atomically(const std::string& path, const std::string& bytes) {
  if (path.empty()) throw Error(Status::IoError, "output: empty path");
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(Status::IoError, path + ": is a directory");
  const fs::path target(path);
  const std::string tmp = (target.parent_path() / ("." + target.filename().string() + ".tmp" +
                                                    std::to_string(static_cast<long>(::getpid()))))
                              .string();
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw Error(Status::IoError, path + ": cannot write (" + std::strerror(errno) + ")");
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const int write_errno = errno;
  const bool flushed = written && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const int flush_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!written || !flushed || !closed) {
    std::remove(tmp.c_str());
    throw Error(Status::IoError, path + ": write failed (" +
                                     std::strerror(!written ? write_errno : !flushed ? flush_errno : errno) + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw Error(Status::IoError, path + ": cannot replace (" + std::strerror(e) + ")");
  }
}

std::string read(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) throw Error(Status::IoError, path + ": no such file");
  if (!fs::is_regular_file(status)) throw Error(Status::IoError, path + ": not a regular file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(Status::IoError, path + ": cannot open for reading");
  std::string bytes;
  try {
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  } catch (const std::exception& e) {
    throw Error(Status::IoError, path + ": read failed (" + e.what() + ")");
  }
  if (f.bad()) throw Error(Status::IoError, path + ": read failed");
  return bytes;
}

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  return fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
}

}  // namespace mconv::file
