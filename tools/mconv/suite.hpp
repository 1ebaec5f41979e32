// Benchmark suite files: one layer a row,
// name,n,c,h,w,k,r,s,pad_h,pad_w,stride_h,stride_w,dil_h,dil_w,groups
#pragma once

#include <string>
#include <vector>

#include "mconv/problem.hpp"

namespace mconv::tools {

struct Layer {
  std::string name;
  Problem problem;
};

std::vector<Layer> parse_suite(const std::string& csv_text, const std::string& source);
std::vector<Layer> load_suite(const std::string& path);

}  // namespace mconv::tools
