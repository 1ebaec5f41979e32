// The boundary between the host library and the CUDA executor. Implemented in src/cuda/*.cu when
// mconv is built with CUDA, and by cuda_absent.cpp (every call reports NoDevice) otherwise.
#pragma once

#include "../plan/heuristics.hpp"
#include "mconv/engine.hpp"
#include "mconv/hardware.hpp"
#include "mconv/plan.hpp"

namespace mconv::detail::cuda_backend {

bool compiled();
bool available();
DeviceSummary summary();

/// Copies the plan's offset table to `device`; returns the device pointer (freed by free_table).
void* upload_table(const Plan& plan, int device);
void free_table(void* table, int device);

/// Throws NullPointer/Misaligned/BadParam if `p` is not device-accessible memory.
void check_device_pointer(const void* p, const char* field, int device);

void implicit_precomp_forward(const Plan& plan, const void* table, const float* x, const float* w, float* y,
                              const Epilogue& e, void* stream);

void direct_block_forward(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e, void* stream);

/// The single-channel family: the paper's strip kernel, or the plane stream when the plan has a
/// plane-stream division (tile().block_planes > 0).
void single_channel_forward(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e,
                            void* stream);
void single_channel_planes_forward(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e,
                                   void* stream);
/// The bulk plane stream (Note [plane bulk]; tile().name == kPlaneBulkTile).
void single_channel_bulk_forward(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e,
                                 void* stream);
/// Split-K's first pass: y = beta * y + bias, so that channel slices can add alpha * partial sums.
void output_prepass(const Plan& plan, float* y, const Epilogue& e, void* stream);
void stride_fixed_forward(const Plan& plan, const float* x, const float* w, float* y, const Epilogue& e, void* stream);
int current_device();

void synchronize(void* stream);

/// What the runtime reports about `device` (no measurement).
HardwareModel reported_hardware(int device);
/// Pointer-chase latency (cycles) and device-copy bandwidth (bytes/s, read + write) of `device`.
void measure_memory(int device, double& latency_cycles, double& bandwidth);
void set_device(int device);

}  // namespace mconv::detail::cuda_backend
