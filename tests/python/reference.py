"""The reference every test compares with: F.conv2d in float64 on the CPU (double accumulation)."""

import torch
import torch.nn.functional as F

# Error relative to the reference's norm, by what the kernels compute in.
TOLERANCE = {torch.float32: 1e-5, "tf32": 2e-3, torch.float16: 1e-2, torch.bfloat16: 2e-2}


def reference(x, w, b=None, activation=None, **kw):
    y = F.conv2d(x.double().cpu(), w.double().cpu(), None if b is None else b.double().cpu(), **kw)
    if activation == "relu":
        y = F.relu(y)
    elif activation == "silu":
        y = F.silu(y)
    return y


def relative_error(y, ref):
    assert torch.isfinite(y).all(), "non-finite values in y (an element left unwritten?)"
    y, ref = y.double().cpu(), ref.double().cpu()
    return ((y - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def tolerance(dtype, device):
    if dtype == torch.float32 and device == "cuda" and torch.backends.cudnn.allow_tf32:
        return TOLERANCE["tf32"]
    return TOLERANCE[dtype]


def poison_cuda_allocator(numel, dtype):
    """Frees a NaN-filled block of y's size into PyTorch's caching allocator, which hands the same block
    to the next allocation of that size on the stream: a y the kernel does not fully write shows NaN."""
    torch.full((numel,), float("nan"), dtype=dtype, device="cuda")
