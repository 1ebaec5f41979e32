// Stand-in for the kernel families in builds without nvcc: launching reports NoDevice.
#include "launch.hpp"

namespace mconv::detail {

void launch_forward(const Plan&, const void*, const void*, void*, const Epilogue&, void*, bool) {
  throw Error(Status::NoDevice, "target: mconv was built without CUDA");
}

void fill_view(const TensorDesc&, void*, float, void*, bool) {
  throw Error(Status::NoDevice, "target: mconv was built without CUDA");
}

void prepare_launch(const Plan&) {
  throw Error(Status::NoDevice, "target: mconv was built without CUDA");
}

}  // namespace mconv::detail
