"""mconv.conv2d: torch.nn.functional.conv2d's signature on mconv's kernels, plus a fused activation."""

from typing import Optional, Sequence, Union

import torch
import torch.nn.functional as F

from ._library import conv2d_call, output_size

_SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_CPU_ONLY_DTYPES = (torch.float64,)  # the CPU's double loops: gradient checks
_ACTIVATIONS = {None: "identity", "identity": "identity", "relu": "relu", "silu": "silu"}

IntOrPair = Union[int, Sequence[int]]


def _pair(v: IntOrPair, name: str):
    if isinstance(v, int):
        return [v, v]
    if isinstance(v, str):
        raise TypeError(f"mconv.conv2d: {name} must be an int or a pair of ints, got {v!r}")
    try:
        vals = [int(i) for i in v]
    except TypeError:
        raise TypeError(f"mconv.conv2d: {name} must be an int or a pair of ints, got {type(v).__name__}") from None
    if len(vals) == 1:
        return vals * 2
    if len(vals) != 2:
        raise ValueError(f"mconv.conv2d: {name} must have 1 or 2 values, got {len(vals)}")
    return vals


def _check_tensors(input, weight, bias):
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"mconv.conv2d: {name} must be a torch.Tensor, got {type(t).__name__}")
    if bias is not None and not isinstance(bias, torch.Tensor):
        raise TypeError(f"mconv.conv2d: bias must be a torch.Tensor or None, got {type(bias).__name__}")
    if input.dtype not in _SUPPORTED_DTYPES and not (input.dtype in _CPU_ONLY_DTYPES and input.device.type == "cpu"):
        raise TypeError(f"mconv.conv2d: input.dtype {input.dtype} is not supported (float32, float16, bfloat16; "
                        f"float64 on the CPU)")
    if weight.dtype != input.dtype:
        raise TypeError(f"mconv.conv2d: weight.dtype {weight.dtype} differs from input.dtype {input.dtype}")
    if bias is not None and bias.dtype not in (input.dtype, torch.float32):
        raise TypeError(f"mconv.conv2d: bias.dtype {bias.dtype} differs from input.dtype {input.dtype}")
    if input.device.type not in ("cpu", "cuda"):
        raise ValueError(f"mconv.conv2d: input is on {input.device}; mconv runs on cpu and cuda tensors")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.device != input.device:
            raise ValueError(f"mconv.conv2d: {name} is on {t.device}, input on {input.device}")
    if weight.dim() != 4:
        raise ValueError(f"mconv.conv2d: weight must be 4-d (out_channels, in_channels/groups, kH, kW), "
                         f"got shape {tuple(weight.shape)}")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != weight.shape[0]):
        raise ValueError(f"mconv.conv2d: bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}")


def _autocast(input, weight, bias):
    """Under torch.autocast, F.conv2d runs in the autocast dtype; so does mconv (the casts are
    differentiable, so the fp32 master weights get their gradients through them)."""
    dev = input.device.type
    if dev not in ("cpu", "cuda") or not torch.is_autocast_enabled(dev):
        return input, weight, bias
    dt = torch.get_autocast_dtype(dev)
    return input.to(dt), weight.to(dt), None if bias is None else bias.to(dt)


def conv2d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, stride: IntOrPair = 1,
           padding: Union[str, IntOrPair] = 0, dilation: IntOrPair = 1, groups: int = 1,
           activation: Optional[str] = None) -> torch.Tensor:
    """torch.nn.functional.conv2d on mconv's kernels: y = activation(conv(input, weight) + bias).

    input (N, C, H, W) or unbatched (C, H, W); weight (K, C/groups, kH, kW); float32, float16 or
    bfloat16 on the CPU or a CUDA device. Contiguous and channels_last tensors (and other positive
    strides) are read in place; y comes in input's memory format. float32 on CUDA runs in TF32 when
    torch.backends.cudnn.allow_tf32 is set, as F.conv2d does. activation: None, "relu" or "silu",
    applied by mconv (fused into the kernel, or silu by a pass over y after some of mconv's GEMM kernels).

    Copies made: padding="same" with an odd total padding pads input first (as F.conv2d does), and an
    input with a zero stride (expand()) is made contiguous. Differentiable: input, weight and bias
    gradients come from mconv's backward kernels (deterministic weight gradients under
    torch.use_deterministic_algorithms(True)). Under torch.autocast it runs in the autocast dtype, as
    F.conv2d does.
    """
    if isinstance(input, torch.Tensor) and isinstance(weight, torch.Tensor):
        input, weight, bias = _autocast(input, weight, bias)
    _check_tensors(input, weight, bias)
    if activation not in _ACTIVATIONS:
        raise ValueError(f"mconv.conv2d: activation must be None, 'relu' or 'silu', got {activation!r}")
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"mconv.conv2d: groups must be a positive int, got {groups!r}")
    unbatched = input.dim() == 3
    if unbatched:
        input = input.unsqueeze(0)
    elif input.dim() != 4:
        raise ValueError(f"mconv.conv2d: input must be 3-d (C, H, W) or 4-d (N, C, H, W), got shape "
                         f"{tuple(input.shape)}")
    if input.shape[1] != weight.shape[1] * groups:
        raise ValueError(f"mconv.conv2d: input has {input.shape[1]} channels, weight expects "
                         f"{weight.shape[1]} x {groups} groups = {weight.shape[1] * groups}")
    if weight.shape[0] % groups != 0:
        raise ValueError(f"mconv.conv2d: groups={groups} does not divide out_channels={weight.shape[0]}")
    stride_, dilation_ = _pair(stride, "stride"), _pair(dilation, "dilation")
    if min(stride_) < 1 or min(dilation_) < 1:
        raise ValueError(f"mconv.conv2d: stride and dilation must be >= 1, got {stride} and {dilation}")
    if isinstance(padding, str):
        padding_, input = _string_padding(padding, input, weight, stride_, dilation_)
    else:
        padding_ = _pair(padding, "padding")
        if min(padding_) < 0:
            raise ValueError(f"mconv.conv2d: padding must be >= 0, got {padding}")
    for dim, name in ((2, "height"), (3, "width")):
        if output_size(input.shape[dim], padding_[dim - 2], dilation_[dim - 2], weight.shape[dim],
                       stride_[dim - 2]) < 1:
            raise ValueError(f"mconv.conv2d: the kernel ({weight.shape[dim]}, dilation {dilation_[dim - 2]}) is "
                             f"larger than the padded input {name} {input.shape[dim]} + 2*{padding_[dim - 2]}")
    if 0 in input.stride() and input.numel() > 1:
        input = input.contiguous()
    act = _ACTIVATIONS[activation]
    tf32 = input.is_cuda and input.dtype == torch.float32 and torch.backends.cudnn.allow_tf32
    y = conv2d_call(input, weight, bias, stride_, padding_, dilation_, groups, act, tf32)
    return y.squeeze(0) if unbatched else y


def _string_padding(padding, input, weight, stride, dilation):
    if padding == "valid":
        return [0, 0], input
    if padding != "same":
        raise ValueError(f"mconv.conv2d: padding must be 'valid', 'same' or ints, got {padding!r}")
    if stride != [1, 1]:
        raise ValueError("mconv.conv2d: padding='same' needs stride 1 (as F.conv2d)")
    pads, extra = [], []
    for i in range(2):
        total = dilation[i] * (weight.shape[2 + i] - 1)
        pads.append(total // 2)
        extra.append(total - 2 * (total // 2))
    if any(extra):  # asymmetric: the extra row/column goes after, as F.conv2d pads it
        input = F.pad(input, [0, extra[1], 0, extra[0]])
    return pads, input
