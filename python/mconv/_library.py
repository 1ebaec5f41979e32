"""Loads mconv's two shared libraries and registers the operator's fake implementation.

libmconv.so is the library itself (its C ABI answers version and device questions through ctypes);
libmconv_torch_ops.so registers torch.ops.mconv.conv2d through LibTorch's stable ABI.
"""

import ctypes
import os

import torch

_here = os.path.dirname(os.path.abspath(__file__))

# Dispatches below the Autograd keys (what torch.library's own autograd wrapper does before it
# redispatches): mconv's calls that record their autograd themselves, or need none, skip the op's.
_BelowAutograd = torch._C._AutoDispatchBelowAutograd


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


def _pairs(stride, padding, dilation):
    def pair(v):
        return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])

    return pair(stride), pair(padding), pair(dilation)


@torch.library.register_fake("mconv::conv2d_backward_data")
def _backward_data_fake(grad_output, weight, input_size, stride, padding, dilation, groups, allow_tf32=False):
    fmt = torch.channels_last if output_is_channels_last(grad_output) else torch.contiguous_format
    return torch.empty(list(input_size), dtype=grad_output.dtype, device=grad_output.device, memory_format=fmt)


@torch.library.register_fake("mconv::conv2d_backward_filter")
def _backward_filter_fake(grad_output, input, weight_size, stride, padding, dilation, groups, allow_tf32=False,
                          deterministic=False):
    fmt = torch.channels_last if output_is_channels_last(input) else torch.contiguous_format
    return torch.empty(list(weight_size), dtype=grad_output.dtype, device=grad_output.device, memory_format=fmt)


# Autograd of mconv::conv2d: both gradients through mconv's own backward kernels (dgrad, wgrad), the
# bias gradient as the sum of grad_output over n, p, q. A fused activation is differentiated first:
# relu from the saved output, silu from the pre-activation, recomputed by a second forward. The
# backward ops themselves have no autograd formula, so a double backward is an error.
def _setup_context(ctx, inputs, output):
    input, weight, bias, stride, padding, dilation, groups, activation, allow_tf32 = inputs
    ctx.conf = inputs[3:]  # stride, padding, dilation, groups, activation, allow_tf32 (read only)
    ctx.sizes = (input.shape, weight.shape)
    ctx.bias_dtype = None if bias is None else bias.dtype
    needs = ctx.needs_input_grad
    if activation == "identity":  # the common case: only what the two gradients read
        ctx.save_for_backward(input if needs[1] else None, weight if needs[0] else None)
        return
    silu = activation == "silu"
    ctx.save_for_backward(input if needs[1] or silu else None, weight if needs[0] or silu else None,
                          output if activation == "relu" else None, bias if silu else None)


def _backward_op(op, *args):
    """A backward op of an ordinary backward runs below autograd (nothing differentiates it). Under
    create_graph=True it goes through the op's autograd, which records the double-backward error."""
    if torch.is_grad_enabled():
        return op(*args)
    with _BelowAutograd():
        return op(*args)


def _conv2d_backward(ctx, grad):
    stride, padding, dilation, groups, activation, allow_tf32 = ctx.conf
    if activation == "identity":
        input, weight = ctx.saved_tensors
    else:
        input, weight, output, bias = ctx.saved_tensors
    if activation == "relu":
        grad = grad * (output > 0)
    elif activation == "silu":
        pre = _backward_op(torch.ops.mconv.conv2d.default, input, weight, bias, stride, padding, dilation, groups,
                           "identity", allow_tf32)
        sig = torch.sigmoid(pre)
        grad = grad * sig * (1 + pre * (1 - sig))
    if 0 in grad.stride() and grad.numel() > 1:  # expanded (sum().backward()): mconv takes positive strides
        grad = grad.contiguous()
    grad_input = grad_weight = grad_bias = None
    if ctx.needs_input_grad[0]:
        grad_input = _backward_op(torch.ops.mconv.conv2d_backward_data.default, grad, weight, ctx.sizes[0], stride,
                                  padding, dilation, groups, allow_tf32)
    if ctx.needs_input_grad[1]:
        grad_weight = _backward_op(torch.ops.mconv.conv2d_backward_filter.default, grad, input, ctx.sizes[1], stride,
                                   padding, dilation, groups, allow_tf32, torch.are_deterministic_algorithms_enabled())
    if ctx.bias_dtype is not None and ctx.needs_input_grad[2]:
        grad_bias = grad.sum((0, 2, 3), dtype=torch.float32).to(ctx.bias_dtype)
    return grad_input, grad_weight, grad_bias, None, None, None, None, None, None


torch.library.register_autograd("mconv::conv2d", _conv2d_backward, setup_context=_setup_context)


def _no_double_backward(ctx, grad):
    raise RuntimeError("mconv: double backward (a gradient of mconv's gradients) is not implemented; "
                       "torch.nn.functional.conv2d supports it")


for _op in ("mconv::conv2d_backward_data", "mconv::conv2d_backward_filter"):
    torch.library.register_autograd(_op, _no_double_backward, setup_context=lambda ctx, inputs, output: None)


# The eager path of mconv.conv2d. Calling the op goes through its registered autograd, which is
# Python (torch.library) on every call, gradient or not (docs/PERFORMANCE.md, "The PyTorch operator:
# where a call's host time goes"). Eager calls skip it: with no gradient to record the op runs below
# autograd; with one, this Function records the same backward. torch.compile and functorch
# transforms trace the op itself (its fake and autograd registrations).
class _Conv2dFunction(torch.autograd.Function):
    # forward(ctx, ...) rather than a separate setup_context: apply() then binds no signature (with
    # setup_context it runs inspect.signature on every call, about 15 us).
    @staticmethod
    def forward(ctx, *args):
        with _BelowAutograd():
            output = torch.ops.mconv.conv2d.default(*args)
        _setup_context(ctx, args, output)
        return output

    backward = staticmethod(_conv2d_backward)


def conv2d_call(input, weight, bias, stride, padding, dilation, groups, activation, allow_tf32):
    """torch.ops.mconv.conv2d with the op's arguments, recording autograd as the op does."""
    args = (input, weight, bias, stride, padding, dilation, groups, activation, allow_tf32)
    if torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active():
        return torch.ops.mconv.conv2d.default(*args)
    if torch.is_grad_enabled() and (input.requires_grad or weight.requires_grad or
                                    (bias is not None and bias.requires_grad)):
        return _Conv2dFunction.apply(*args)
    with _BelowAutograd():
        return torch.ops.mconv.conv2d.default(*args)
