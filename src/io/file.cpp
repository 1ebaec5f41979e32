// Whole-file reads and atomic writes (temporary file + rename).
#include "mconv/file.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <thread>

#include "mconv/types.hpp"

namespace mconv::file {
namespace fs = std::filesystem;

namespace {

/// Writes, flushes and closes `f`; the errno of the first step that failed, or 0.
int write_all(FILE* f, const std::string& bytes, bool sync) {
  int err = 0;
  if (std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) err = errno ? errno : EIO;
  if (!err && std::fflush(f) != 0) err = errno ? errno : EIO;
  if (!err && sync && ::fsync(::fileno(f)) != 0) err = errno;
  if (std::fclose(f) != 0 && !err) err = errno ? errno : EIO;
  return err;
}

}  // namespace

void write_atomically(const std::string& path, const std::string& bytes) {
  if (path.empty()) throw Error(Status::IoError, "output: empty path");
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (fs::is_directory(status)) throw Error(Status::IoError, path + ": is a directory");
  if (fs::exists(status) && !fs::is_regular_file(status)) {
    // A device or pipe (/dev/null, /dev/stdout) is written in place: it cannot be replaced.
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw Error(Status::IoError, path + ": cannot write (" + std::strerror(errno) + ")");
    errno = 0;
    if (const int err = write_all(f, bytes, false))
      throw Error(Status::IoError, path + ": write failed (" + std::strerror(err) + ")");
    return;
  }
  // A name no other writer uses (process, thread, call), so concurrent writers each rename a whole file.
  static std::atomic<unsigned> calls{0};
  const fs::path target(path);
  const std::string tmp =
      (target.parent_path() / ("." + target.filename().string() + ".tmp" + std::to_string(long(::getpid())) + "." +
                               std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 1000000) +
                               "." + std::to_string(calls++)))
          .string();
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw Error(Status::IoError, path + ": cannot write (" + std::strerror(errno) + ")");
  errno = 0;
  if (const int err = write_all(f, bytes, true)) {
    std::remove(tmp.c_str());
    throw Error(Status::IoError, path + ": write failed (" + std::strerror(err) + ")");
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
