#include "suite.hpp"

#include <fstream>
#include <sstream>

#include "mconv/file.hpp"
#include "mconv/types.hpp"

namespace mconv::tools {

std::vector<Layer> parse_suite(const std::string& text, const std::string& source) {
  static const char* kColumns[] = {"name",  "n",     "c",        "h",        "w",     "k",     "r",     "s",
                                   "pad_h", "pad_w", "stride_h", "stride_w", "dil_h", "dil_w", "groups"};
  std::istringstream in(text);
  std::string line;
  std::vector<Layer> layers;
  int line_no = 0;
  bool header_seen = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) f.push_back(cell);
    const std::string where = source + ":" + std::to_string(line_no);
    if (f.size() != 15) throw Error(Status::IoError, where + ": expected 15 columns, got " + std::to_string(f.size()));
    if (!header_seen) {
      for (int i = 0; i < 15; ++i)
        if (f[i] != kColumns[i])
          throw Error(Status::IoError, where + ": header column " + std::to_string(i) + " is '" + f[i] +
                                           "', expected '" + kColumns[i] + "'");
      header_seen = true;
      continue;
    }
    int64_t v[14];
    for (int i = 0; i < 14; ++i) {
      try {
        size_t used = 0;
        v[i] = std::stoll(f[i + 1], &used);
        if (used != f[i + 1].size()) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        throw Error(Status::IoError,
                    where + ": column '" + kColumns[i + 1] + "' is not an integer: '" + f[i + 1] + "'");
      }
    }
    Layer l;
    l.name = f[0];
    Problem& p = l.problem;
    p.n = v[0];
    p.c = v[1];
    p.h = v[2];
    p.w = v[3];
    p.k = v[4];
    p.r = v[5];
    p.s = v[6];
    p.pad_h = v[7];
    p.pad_w = v[8];
    p.stride_h = v[9];
    p.stride_w = v[10];
    p.dil_h = v[11];
    p.dil_w = v[12];
    p.groups = v[13];
    try {
      p.validate();
    } catch (const Error& e) {
      throw Error(e.status(), where + " (" + l.name + "): " + e.what());
    }
    layers.push_back(l);
  }
  if (!header_seen) throw Error(Status::IoError, source + ": empty suite (no header)");
  if (layers.empty()) throw Error(Status::IoError, source + ": the suite has a header but no layers");
  return layers;
}

std::vector<Layer> load_suite(const std::string& path) {
  return parse_suite(file::read(path), path);
}

}  // namespace mconv::tools
