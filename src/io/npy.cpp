// .npy reader/writer. Format: magic "\x93NUMPY", version, header length, a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (...)}, padding, then the raw data.
#include "mconv/npy.hpp"

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "mconv/file.hpp"
#include "mconv/numeric.hpp"
#include "mconv/types.hpp"

namespace mconv::npy {
namespace {

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw Error(Status::IoError, name + ": " + what);
}

// The value text after 'key': in the header dict.
std::string dict_value(const std::string& header, const std::string& key, const std::string& name) {
  const std::string k = "'" + key + "'";
  size_t pos = header.find(k);
  if (pos == std::string::npos) fail(name, "header has no '" + key + "' entry");
  pos = header.find(':', pos + k.size());
  if (pos == std::string::npos) fail(name, "header entry '" + key + "' has no value");
  ++pos;
  while (pos < header.size() && header[pos] == ' ') ++pos;
  size_t end;
  if (header[pos] == '(') {
    end = header.find(')', pos);
    if (end == std::string::npos) fail(name, "unterminated shape tuple");
    return header.substr(pos, end - pos + 1);
  }
  end = header.find_first_of(",}", pos);
  if (end == std::string::npos) fail(name, "unterminated header entry '" + key + "'");
  return header.substr(pos, end - pos);
}

}  // namespace

Array parse(const std::string& bytes, const std::string& name) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) fail(name, "not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, offset;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(name, "truncated header");
    header_len = 0;
    for (int i = 3; i >= 0; --i) header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + i]);
    offset = 12;
  } else {
    fail(name, "unsupported .npy version " + std::to_string(major));
  }
  if (bytes.size() < offset + header_len) fail(name, "truncated header");
  const std::string header = bytes.substr(offset, header_len);
  std::string descr = dict_value(header, "descr", name);
  DType dtype;
  if (descr == "'<f4'" || descr == "'=f4'" || descr == "'f4'")
    dtype = DType::Float32;
  else if (descr == "'<f2'" || descr == "'=f2'")
    dtype = DType::Float16;
  else
    fail(name, "dtype " + descr +
                   " is not little-endian float32 ('<f4') or float16 ('<f2'); convert with .astype(np.float32)");
  const size_t esz = dtype == DType::Float32 ? 4 : 2;
  if (dict_value(header, "fortran_order", name) != "False") fail(name, "fortran_order arrays are not supported");
  const std::string shape_text = dict_value(header, "shape", name);
  if (shape_text.size() < 2 || shape_text.front() != '(' || shape_text.back() != ')')
    fail(name, "shape is not a tuple: " + shape_text);
  Array a;
  int64_t count = 1;
  std::string inner = shape_text.substr(1, shape_text.size() - 2);
  std::stringstream ss(inner);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(' ');
    if (b == std::string::npos) continue;
    size_t used = 0;
    long long v = 0;
    const std::string digits = item.substr(b, item.find_last_not_of(' ') - b + 1);
    try {
      v = std::stoll(digits, &used);
    } catch (...) {
      fail(name, "bad shape entry '" + item + "' (expected an integer)");
    }
    if (used != digits.size()) fail(name, "bad shape entry '" + item + "' (expected an integer)");
    if (v < 0) fail(name, "negative dimension in shape");
    if (v > 0 && count > (int64_t(1) << 40) / v) fail(name, "shape too large");
    a.shape.push_back(v);
    count *= v;
  }
  const size_t data_off = offset + header_len;
  if (bytes.size() - data_off != static_cast<size_t>(count) * esz)
    fail(name, "data holds " + std::to_string(bytes.size() - data_off) + " bytes, shape needs " +
                   std::to_string(count * int64_t(esz)));
  a.dtype = dtype;
  a.data.resize(count);
  if (count) to_float(dtype, bytes.data() + data_off, a.data.data(), count);
  return a;
}

Array load(const std::string& path) {
  return parse(file::read(path), path);
}

void save(const std::string& path, const std::vector<int64_t>& shape, const float* data, DType dtype) {
  const bool half = dtype == DType::Float16;
  std::string shape_text = "(";
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    shape_text += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
    if (i + 1 < shape.size()) shape_text += " ";
    count *= shape[i];
  }
  shape_text += ")";
  std::string header =
      std::string("{'descr': '") + (half ? "<f2" : "<f4") + "', 'fortran_order': False, 'shape': " + shape_text + ", }";
  const size_t unpadded = 10 + header.size() + 1;  // magic+version+len, header, '\n'
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  const uint16_t len = static_cast<uint16_t>(header.size());
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(len & 0xff);
  bytes += static_cast<char>(len >> 8);
  bytes += header;
  if (half) {
    std::vector<uint16_t> h(static_cast<size_t>(count));
    from_float(DType::Float16, data, h.data(), count);
    bytes.append(reinterpret_cast<const char*>(h.data()), h.size() * 2);
  } else {
    bytes.append(reinterpret_cast<const char*>(data), static_cast<size_t>(count) * 4);
  }
  file::write_atomically(path, bytes);
}

}  // namespace mconv::npy
