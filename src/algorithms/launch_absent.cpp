// Stand-in for the kernel families in builds without nvcc: launching reports NoDevice.
#include "launch.hpp"

namespace mconv::detail {

void launch_forward(const Plan&, const float*, const float*, float*, const Epilogue&, void*) {
  throw Error(Status::NoDevice, "target: mconv was built without CUDA");
}

}  // namespace mconv::detail
