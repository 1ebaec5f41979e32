// mconv: files written whole or not at all, and read with errors that name them.
#pragma once

#include <string>

namespace mconv::file {

/// Writes `bytes` to `path` through a temporary file beside it, renamed into place only after every
/// write, flush and close succeeded: `path` is never left half-written, and on error it is as before.
/// Throws Error(IoError) naming the path and the reason.
void write_atomically(const std::string& path, const std::string& bytes);

/// The whole content of the regular file `path`; Error(IoError) for a missing, unreadable or
/// non-regular file (a directory, say).
std::string read(const std::string& path);

/// True when both paths name the same existing file (through links or different spellings), or the
/// same path where they do not exist yet.
bool same_file(const std::string& a, const std::string& b);

}  // namespace mconv::file
