"""Loads mconv's two shared libraries and registers the operator's fake implementation.

libmconv.so is the library itself (its C ABI answers version and device questions through ctypes);
libmconv_torch_ops.so registers torch.ops.mconv.conv2d through LibTorch's stable ABI.
"""

import ctypes
import os

import torch

_here = os.path.dirname(os.path.abspath(__file__))


def _load():
    core = ctypes.CDLL(os.path.join(_here, "libmconv.so"))
    core.mconv_version.restype = ctypes.c_char_p
    core.mconv_cuda_available.restype = ctypes.c_int
    torch.ops.load_library(os.path.join(_here, "libmconv_torch_ops.so"))
    return core


_core = _load()

__version__ = _core.mconv_version().decode()


def cuda_available() -> bool:
    """True when mconv was built with its CUDA executors and a GPU is visible."""
    return bool(_core.mconv_cuda_available())


def output_size(size, pad, dil, kernel, stride):
    """P (or Q) of a convolution: (H + 2 pad - dil (R - 1) - 1) // stride + 1."""
    return (size + 2 * pad - dil * (kernel - 1) - 1) // stride + 1


def output_is_channels_last(x: torch.Tensor) -> bool:
    """The rule both implementations follow: y is channels_last when x is channels_last-contiguous and
    not contiguous (so an ambiguous tensor, such as one with H = W = 1, gives a contiguous y)."""
    return x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()


@torch.library.register_fake("mconv::conv2d")
def _conv2d_fake(input, weight, bias=None, stride=(1,), padding=(0,), dilation=(1,), groups=1,
                 activation="identity", allow_tf32=False):
    def pair(v):
        return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])

    torch._check(input.dim() == 4, lambda: "mconv.conv2d: input must be 4-d")
    torch._check(weight.dim() == 4, lambda: "mconv.conv2d: weight must be 4-d")
    torch._check(input.dtype == weight.dtype, lambda: "mconv.conv2d: weight.dtype differs from input.dtype")
    torch._check(weight.shape[1] * groups == input.shape[1],
                 lambda: "mconv.conv2d: weight channels x groups != input channels")
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    n, _, h, w = input.shape
    k, _, r, s = weight.shape
    p = output_size(h, ph, dh, r, sh)
    q = output_size(w, pw, dw, s, sw)
    torch._check(p > 0 and q > 0, lambda: "mconv.conv2d: the output would be empty")
    fmt = torch.channels_last if output_is_channels_last(input) else torch.contiguous_format
    return torch.empty((n, k, p, q), dtype=input.dtype, device=input.device, memory_format=fmt)
