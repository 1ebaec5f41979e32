// single_channel's channels-last kernel (Note [channels-last depthwise]).
//
// Note [channels-last depthwise]: a layer with one input channel per group (depthwise, and with K/G
// filters per group a channel multiplier; a single-channel layer is the one-group case) with
// channels-last x and y, the layout of fp16/bf16 models. The plane streams want whole channel planes
// (NCHW); here a channel plane is strided by C, so the kernel works across output channels instead: a
// thread owns V adjacent output channels (one 16-byte vector of 16-bit values) and QT adjacent output
// pixels of one row, and a block's threads along x cover a chunk of channel vectors, so the threads of
// a pixel write one contiguous run of y. The chunk's filters sit in shared memory in fp32, tap-major,
// so every tap is one conflict-free read of V floats. x is read straight from global memory: the QT
// outputs and the S taps of a row overlap, and those re-reads hit L1. Accumulation in fp32, one
// rounding at the store.
//
// Note [channels-last shared input]: with K/G = 1 the thread's V outputs read V channels of x (one
// vector load, XV = V). With K/G a multiple of V they all read the same channel of x (XV = 1): one
// scalar load, converted once and used by the V filters. That is the single-channel layer's case: its
// cost is writing y (K values a pixel) and the R*S*K FMAs, not reading x.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../common/conv_geometry.cuh"
#include "../common/dependent_launch.cuh"
#include "../common/epilogue.cuh"
#include "../common/fast_divmod.cuh"
#include "../common/storage.cuh"

namespace mconv::cuda {

constexpr int kChannelsLastDepthwiseThreads = 256;

struct ChannelsLastDepthwiseParams : ConvGeometry, StoragePointers {
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

/// Where value v of `lane`'s vector of filters for `tap` sits among the chunk's filters in shared
/// memory. Lane-major ([lanes][V] floats a tap), or with Quads and V a multiple of 4 in quads of
/// channels, each quad's lanes adjacent ([V / 4][lanes][4]). Lane-major puts a quarter warp's
/// 16-byte reads 32 bytes apart, two lanes on each bank group with chunks of 8 vectors (ncu on
/// mbv2_dw_c576_h14_s1: 291K of 872K shared-load wavefronts); quads read 128 contiguous bytes.
/// Quads measured faster in the tile kernels (3x3 and 7x7 filters, and 5x5 with two outputs a thread)
/// and 1.5-2% slower in that of 5x5 filters with four and in the pixel-group kernel, which keep
/// lane-major (Note [channels-last staged tile]).
template <int V, bool Quads = false>
__device__ __forceinline__ int filter_slot(int tap, int tc, int lane, int v) {
  if constexpr (V % 4 == 0 && Quads) return (tap * V + (v & ~3)) * tc + lane * 4 + (v & 3);
  return (tap * tc + lane) * V + v;
}

/// The thread's V filter values of one tap, from the chunk's filters in shared memory: V / 4 16-byte
/// reads, which the compiler does not form on its own from a float pointer; read one float at a time
/// they cost 8 shared loads per 32 FMAs.
template <int V, bool Quads = false>
__device__ __forceinline__ void filter_tap(const float* sFilter, int tap, int tc, int lane, float (&wv)[V]) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int q = 0; q < V / 4; ++q) {
      const float4 f = *reinterpret_cast<const float4*>(sFilter + filter_slot<V, Quads>(tap, tc, lane, 4 * q));
      wv[4 * q] = f.x;
      wv[4 * q + 1] = f.y;
      wv[4 * q + 2] = f.z;
      wv[4 * q + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int v = 0; v < V; ++v) wv[v] = sFilter[filter_slot<V, Quads>(tap, tc, lane, v)];
  }
}

/// `out` = the V values rounded to T, two at a time where T is 16-bit (one paired conversion).
template <class T, int V>
__device__ __forceinline__ void store_rounded(Vector<T, V>& out, const float (&v)[V]) {
  if constexpr (V % 2 == 0 && std::is_same_v<T, __nv_bfloat16>) {
#pragma unroll
    for (int i = 0; i < V; i += 2) {
      const __nv_bfloat162 h = __floats2bfloat162_rn(v[i], v[i + 1]);
      out.v[i] = h.x;
      out.v[i + 1] = h.y;
    }
  } else if constexpr (V % 2 == 0 && std::is_same_v<T, __half>) {
#pragma unroll
    for (int i = 0; i < V; i += 2) {
      const __half2 h = __floats2half2_rn(v[i], v[i + 1]);
      out.v[i] = h.x;
      out.v[i + 1] = h.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) out.v[i] = from_float<T>(v[i]);
  }
}

/// x values a thread holds for one pixel: XV channels packed in one 16-byte vector (XV = V = 8; a
/// window of them stays packed, half the registers of one value each), or one value in fp32 that its
/// V filters share (XV = 1, Note [channels-last shared input]).
template <class T, int XV>
using InputValues = std::conditional_t<XV == 1, float, uint4>;

/// The thread's x values of one pixel; zero outside the map.
template <class T, int XV>
__device__ __forceinline__ InputValues<T, XV> load_input(const T* p, bool inside) {
  static_assert(XV == 1 || sizeof(T) * XV == 16, "one value, or one 16-byte vector");
  if constexpr (XV == 1) {
    return inside ? to_float(p[0]) : 0.0f;
  } else {
    return inside ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
  }
}

/// acc += x * w over the thread's V output channels, in fp32.
template <class T, int V, int XV>
__device__ __forceinline__ void fma_channels(float (&acc)[V], const InputValues<T, XV>& xv, const float (&wv)[V]) {
  if constexpr (XV == 1) {
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = fmaf(xv, wv[v], acc[v]);
  } else {
    Vector<T, V> x;
    __builtin_memcpy(&x, &xv, 16);
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = fmaf(to_float(x.v[v]), wv[v], acc[v]);
  }
}

/// Stages the filters of channel vectors [cv0, cv0 + chunk) in shared memory, in fp32, tap-major
/// (at filter_slot), flipped where the plan says so. Channel-major reads: a
/// filter's taps are contiguous (KCRS and KRSC alike when C/G = 1), so neighbouring threads read
/// neighbouring taps. (Tap-major reads, R*S elements apart, cost more than the convolution itself on
/// batch-1 layers, where many small blocks each load their filters.) The caller synchronises.
template <class T, int V, bool Quads = false>
__device__ __forceinline__ void stage_filters(const ChannelsLastDepthwiseParams& prm, float* sFilter, int cv0,
                                              int chunk, int R, int S) {
  const T* w = static_cast<const T*>(prm.ws);
  const int taps = R * S, tc = prm.chunk_vectors;
  for (int i = threadIdx.x; i < taps * chunk * V; i += blockDim.x) {
    const int c = i / taps, tap = i - c * taps;
    int r = tap / S, s = tap - r * S;
    if (prm.flip) r = R - 1 - r, s = S - 1 - s;
    const long long k = static_cast<long long>(cv0) * V + c;
    sFilter[filter_slot<V, Quads>(tap, tc, c / V, c % V)] = to_float(w[k * prm.w_sk + r * prm.w_sr + s * prm.w_ss]);
  }
}

/// The thread's bias values of its V output channels from c0 on (0 without a bias).
template <int V>
__device__ __forceinline__ void load_bias(const ChannelsLastDepthwiseParams& prm, long long c0, float (&bias)[V]) {
#pragma unroll
  for (int v = 0; v < V; ++v) bias[v] = prm.bias ? __ldg(prm.bias + c0 + v) : 0.0f;
}

/// Writes one output pixel's V channels at `out` through the epilogue.
template <class T, int V>
__device__ __forceinline__ void store_output(const ChannelsLastDepthwiseParams& prm, T* out, const float (&acc)[V],
                                             const float (&bias)[V]) {
  Vector<T, V> res;
  if (prm.beta != 0.0f || prm.activation == kActivationSiLU) {  // SiLU: Note [fused silu]
    Vector<T, V> old{};
    if (prm.beta != 0.0f) old = *reinterpret_cast<const Vector<T, V>*>(out);
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const float o = to_float(old.v[v]);
      res.v[v] =
          from_float<T>(epilogue_value<ActivationSet::Any>(prm.alpha, acc[v], prm.beta, &o, bias[v], prm.activation));
    }
  } else {
    // Without beta (the usual call) y is not read and a value costs one FMA, the ReLU and its share
    // of a paired conversion: at 3x3 the full epilogue was as many instructions as the taps.
    float v_out[V];
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const float t = fmaf(prm.alpha, acc[v], bias[v]);
      v_out[v] = activate<ActivationSet::NoSiLU>(t, prm.activation);
    }
    store_rounded<T, V>(res, v_out);
  }
  *reinterpret_cast<Vector<T, V>*>(out) = res;
}

/// T: storage type; V: output channels a thread (8: one 16-byte vector, or 1); XV: x values a thread
/// reads per pixel, V or 1 (Note [channels-last shared input]); QT: outputs a thread along a row, PT:
/// rows of them; KS: square filter size as a constant (1, 3, 5, 7: the tap loops unroll and a row's
/// loads issue together), 0 = any size at run time; MinBlocks: blocks an SM must hold (3 caps the
/// registers at 80, Note [channels-last occupancy]; 1 leaves them to the compiler, 100-128).
template <class T, int V, int XV, int QT, int PT, int KS, int MinBlocks = 1>
__global__ void __launch_bounds__(kChannelsLastDepthwiseThreads, MinBlocks)
    channels_last_depthwise_kernel(const ChannelsLastDepthwiseParams prm) {
  // Note [dependent launch]
  detail::wait_then_allow_dependent_grids();
  extern __shared__ __align__(16) float sFilter[];  // [R*S taps][chunk_vectors * V channels], fp32 (filter_slot)
  const int tc = prm.chunk_vectors;
  const int cv0 = blockIdx.y * tc;
  const int chunk = min(tc, prm.channel_vectors - cv0);
  const int R = KS ? KS : prm.R, S = KS ? KS : prm.S;
  stage_filters<T, V>(prm, sFilter, cv0, chunk, R, S);
  __syncthreads();
  const int lane = threadIdx.x % tc, slot = threadIdx.x / tc, slots = blockDim.x / tc;
  if (lane >= chunk) return;
  const long long c0 = (static_cast<long long>(cv0) + lane) * V;  // first output channel
  // Its group's one input channel (K < 2^31: a 32-bit divide); with XV = V > 1, K/G = 1 and the V
  // channels follow it.
  const int x_channel = XV == V && V > 1 ? static_cast<int>(c0) : static_cast<int>(c0) / prm.kg;
  const T* x = static_cast<const T*>(prm.xs) + static_cast<long long>(x_channel) * prm.x_sc;
  T* y = static_cast<T*>(prm.ys) + c0;
  float bias[V];
  load_bias(prm, c0, bias);

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
          InputValues<T, XV> window[kWindow];
#pragma unroll
          for (int u = 0; u < kWindow; ++u) {
            const int iw = iw0 + u;
            window[u] =
                load_input<T, XV>(row + iw * prm.x_sw, static_cast<unsigned>(iw) < static_cast<unsigned>(prm.W));
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
              for (int j = 0; j < QT; ++j) fma_channels<T, V, XV>(acc[i][j], window[j * SW + s], wv);
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
                fma_channels<T, V, XV>(acc[i][j], load_input<T, XV>(row + iw * prm.x_sw, true), wv);
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
        store_output<T, V>(
            prm, y + n * prm.y_sn + static_cast<long long>(p) * prm.y_sp + static_cast<long long>(q0 + j) * prm.y_sq,
            acc[i][j], bias);
      }
    }
  }
}

}  // namespace mconv::cuda
