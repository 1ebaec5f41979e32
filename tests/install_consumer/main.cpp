// A program outside the project that finds an installed mconv with find_package(mconv).
#include <cstdio>
#include <mconv/mconv.hpp>
int main() {
  mconv::Problem p;
  p.c = 3;
  p.h = 3;
  p.w = 3;
  p.k = 2;
  p.r = 2;
  p.s = 2;
  mconv::Engine e(mconv::Target::Cpu);
  auto plan = e.plan(p, p.x_desc(mconv::Layout::NCHW), p.w_desc(mconv::Layout::NCHW), p.y_desc(mconv::Layout::NCHW));
  std::printf("rows %lld table %lld bytes\n", (long long)plan->rows(), (long long)plan->table_bytes());
}
