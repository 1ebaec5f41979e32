// single_channel's channels-last depthwise kernel (Note [channels-last depthwise]).
//
// Note [channels-last depthwise]: a depthwise layer (one channel, one filter per group) with
// channels-last x and y, the layout of fp16/bf16 models. The plane streams want whole channel planes
// (NCHW); here a channel plane is strided by C, so the kernel works across channels instead: a thread
// owns V adjacent channels (one 16-byte vector of 16-bit values) and QT adjacent output pixels of one
// row, and a block's threads along x cover a chunk of channel vectors, so the threads of a pixel read
// one contiguous run of x. The chunk's filters sit in shared memory in fp32, tap-major, so every tap
// is one conflict-free read of V floats. x is read straight from global memory: the QT outputs and the
// S taps of a row overlap, and those re-reads hit L1. Accumulation in fp32, one rounding at the store.
#pragma once

#include <cstdint>

#include "../common/conv_geometry.cuh"
#include "../common/epilogue.cuh"
#include "../common/fast_divmod.cuh"
#include "../common/storage.cuh"

namespace mconv::cuda {

constexpr int kChannelsLastDepthwiseThreads = 256;

struct ChannelsLastDepthwiseParams : ConvGeometry {  // ConvGeometry's numbers; its float pointers unused
  const void* xs;
  const void* ws;
  void* ys;
  int channel_vectors;     // C / V
  int chunk_vectors;       // channel vectors of one block (threads along x of a pixel slot)
  long long pixel_groups;  // N * ceil(P / PT) * ceil(Q / QT)
  FastDivmod q_groups;     // ceil(Q / QT)
  FastDivmod p_groups;     // ceil(P / PT)
};

template <class T, int V>
struct alignas(V * sizeof(T)) Vector {
  T v[V];
};

/// One vector of V values through the read-only path: a single 16-byte load for 16-bit V = 8.
template <class T, int V>
__device__ __forceinline__ Vector<T, V> load_vector(const T* p) {
  Vector<T, V> r;
  if constexpr (sizeof(T) * V == 16) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    __builtin_memcpy(&r, &u, 16);
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v) r.v[v] = p[v];
  }
  return r;
}

/// The thread's V filter values of one tap, from the chunk's filters in shared memory.
template <int V>
__device__ __forceinline__ void filter_tap(const float* sFilter, int tap, int tc, int lane, float (&wv)[V]) {
  const float* wt = sFilter + (tap * tc + lane) * V;
#pragma unroll
  for (int v = 0; v < V; ++v) wv[v] = wt[v];
}

/// acc += x * w over one vector of channels, in fp32.
template <class T, int V>
__device__ __forceinline__ void fma_channels(float (&acc)[V], const Vector<T, V>& xv, const float (&wv)[V]) {
#pragma unroll
  for (int v = 0; v < V; ++v) acc[v] = fmaf(to_float(xv.v[v]), wv[v], acc[v]);
}

/// T: storage type; V: channels a thread (8: one 16-byte vector, or 1); QT: outputs a thread along a
/// row, PT: rows of them; KS: square filter size as a constant (1, 3, 5, 7: the tap loops unroll and a
/// row's loads issue together), 0 = any size at run time.
template <class T, int V, int QT, int PT, int KS>
__global__ void __launch_bounds__(kChannelsLastDepthwiseThreads)
    channels_last_depthwise_kernel(const ChannelsLastDepthwiseParams prm) {
  extern __shared__ float sFilter[];  // [R*S taps][chunk_vectors * V channels], fp32
  const int tc = prm.chunk_vectors;
  const int cv0 = blockIdx.y * tc;
  const int chunk = min(tc, prm.channel_vectors - cv0);
  const int R = KS ? KS : prm.R, S = KS ? KS : prm.S;
  const int taps = R * S;
  const T* w = static_cast<const T*>(prm.ws);
  // Channel-major: a depthwise filter's taps are contiguous (KCRS and KRSC alike when C/G = 1), so
  // neighbouring threads read neighbouring taps. (Tap-major reads, R*S elements apart, cost more than
  // the convolution itself on batch-1 layers, where many small blocks each load their filters.)
  for (int i = threadIdx.x; i < taps * chunk * V; i += blockDim.x) {
    const int c = i / taps, tap = i - c * taps;
    int r = tap / S, s = tap - r * S;
    if (prm.flip) r = R - 1 - r, s = S - 1 - s;
    const long long k = static_cast<long long>(cv0) * V + c;
    sFilter[tap * tc * V + c] = to_float(w[k * prm.w_sk + r * prm.w_sr + s * prm.w_ss]);
  }
  __syncthreads();
  const int lane = threadIdx.x % tc, slot = threadIdx.x / tc, slots = blockDim.x / tc;
  if (lane >= chunk) return;
  const long long c0 = (static_cast<long long>(cv0) + lane) * V;
  const T* x = static_cast<const T*>(prm.xs) + c0;
  T* y = static_cast<T*>(prm.ys) + c0;
  float bias[V];
#pragma unroll
  for (int v = 0; v < V; ++v) bias[v] = prm.bias ? __ldg(prm.bias + c0 + v) : 0.0f;

  for (long long pg = static_cast<long long>(blockIdx.x) * slots + slot; pg < prm.pixel_groups;
       pg += static_cast<long long>(gridDim.x) * slots) {
    unsigned np = 0, qg = 0, n = 0, pg_row = 0;
    prm.q_groups.divmod(static_cast<unsigned>(pg), np, qg);
    prm.p_groups.divmod(np, n, pg_row);
    const int p0 = static_cast<int>(pg_row) * PT, q0 = static_cast<int>(qg) * QT;
    float acc[PT][QT][V];
#pragma unroll
    for (int i = 0; i < PT; ++i)
#pragma unroll
      for (int j = 0; j < QT; ++j)
#pragma unroll
        for (int v = 0; v < V; ++v) acc[i][j][v] = 0.0f;
    const T* xn = x + n * prm.x_sn;
    bool windowed = false;
    if constexpr (KS > 0 && QT >= 2 && sizeof(T) * V == 16) {
      // Note [channels-last row window]: at dilation 1 the QT outputs of a row read (QT - 1) * SW + KS
      // adjacent input columns (SW: the stride, 1 for QT = 4 and 2 for QT = 2). They are loaded once,
      // together (no load waits behind another's bounds check), kept packed, and slid across the
      // outputs; columns outside x are zero. With PT rows of outputs (the same stride SW down, dilation
      // 1) the thread streams the (PT - 1) * SW + KS input rows they read, each row's window loaded once
      // and used by every output row whose taps cover it: (PT - 1) * SW fewer row loads per PT rows
      // than row by row, which L1 would otherwise have to serve.
      constexpr int SW = QT == 4 ? 1 : 2;
      if (prm.dil_w == 1 && prm.stride_w == SW && (PT == 1 || (prm.dil_h == 1 && prm.stride_h == SW))) {
        windowed = true;
        constexpr int kWindow = (QT - 1) * SW + KS, kRows = (PT - 1) * SW + KS;
        const int iw0 = q0 * SW - prm.pad_w;
        const int ih0 = p0 * prm.stride_h - prm.pad_h, dh = PT == 1 ? prm.dil_h : 1;
#pragma unroll
        for (int t = 0; t < kRows; ++t) {
          const int ih = ih0 + t * dh;
          if (static_cast<unsigned>(ih) >= static_cast<unsigned>(prm.H)) continue;
          const T* row = xn + ih * prm.x_sh;
          uint4 window[kWindow];
#pragma unroll
          for (int u = 0; u < kWindow; ++u) {
            const int iw = iw0 + u;
            window[u] = static_cast<unsigned>(iw) < static_cast<unsigned>(prm.W)
                            ? __ldg(reinterpret_cast<const uint4*>(row + iw * prm.x_sw))
                            : make_uint4(0, 0, 0, 0);
          }
#pragma unroll
          for (int i = 0; i < PT; ++i) {
            const int r = t - i * SW;  // the tap row of output row i that reads input row t
            if (r < 0 || r >= KS) continue;
#pragma unroll
            for (int s = 0; s < KS; ++s) {
              float wv[V];
              filter_tap(sFilter, r * KS + s, tc, lane, wv);
#pragma unroll
              for (int j = 0; j < QT; ++j) {
                Vector<T, V> xv;
                __builtin_memcpy(&xv, &window[j * SW + s], 16);
                fma_channels(acc[i][j], xv, wv);
              }
            }
          }
        }
      }
    }
    if (!windowed) {
#pragma unroll
      for (int i = 0; i < PT; ++i) {
        const int p = p0 + i;
        if (p >= prm.P) break;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int ih = p * prm.stride_h - prm.pad_h + r * prm.dil_h;
          if (static_cast<unsigned>(ih) >= static_cast<unsigned>(prm.H)) continue;
          const T* row = xn + ih * prm.x_sh;
#pragma unroll
          for (int s = 0; s < S; ++s) {
            float wv[V];
            filter_tap(sFilter, r * S + s, tc, lane, wv);
            const int iw0 = q0 * prm.stride_w - prm.pad_w + s * prm.dil_w;
#pragma unroll
            for (int j = 0; j < QT; ++j) {
              const int iw = iw0 + j * prm.stride_w;
              if (q0 + j < prm.Q && static_cast<unsigned>(iw) < static_cast<unsigned>(prm.W)) {
                fma_channels(acc[i][j], load_vector<T, V>(row + iw * prm.x_sw), wv);
              }
            }
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < PT; ++i) {
      const int p = p0 + i;
      if (p >= prm.P) break;
#pragma unroll
      for (int j = 0; j < QT; ++j) {
        if (q0 + j >= prm.Q) break;
        T* out = y + n * prm.y_sn + static_cast<long long>(p) * prm.y_sp + static_cast<long long>(q0 + j) * prm.y_sq;
        Vector<T, V> old{}, res;
        if (prm.beta != 0.0f) old = *reinterpret_cast<const Vector<T, V>*>(out);
#pragma unroll
        for (int v = 0; v < V; ++v) {
          const float o = to_float(old.v[v]);
          res.v[v] = from_float<T>(epilogue_value(prm.alpha, acc[i][j][v], prm.beta, &o, bias[v], prm.relu));
        }
        *reinterpret_cast<Vector<T, V>*>(out) = res;
      }
    }
  }
}

}  // namespace mconv::cuda
