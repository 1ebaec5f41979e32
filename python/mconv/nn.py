"""mconv.nn.Conv2d (a drop-in torch.nn.Conv2d) and mconv.convert(model)."""

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .functional import _SUPPORTED_DTYPES, conv2d

__all__ = ["Conv2d", "ConvertReport", "convert"]


class Conv2d(nn.Conv2d):
    """torch.nn.Conv2d on mconv's kernels: the same constructor, parameters and state_dict, plus
    `activation` (None, "relu" or "silu") fused into the convolution.

    padding_mode other than "zeros" pads the input with F.pad first, exactly as nn.Conv2d does.
    Trainable: its gradients come from mconv's backward kernels.
    """

    activation: Optional[str] = None

    def __init__(self, *args, activation: Optional[str] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.activation = activation

    def _conv_forward(self, input, weight, bias):
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv2d(input, weight, bias, self.stride, 0, self.dilation, self.groups, self.activation)
        return conv2d(input, weight, bias, self.stride, self.padding, self.dilation, self.groups, self.activation)

    def extra_repr(self):
        s = super().extra_repr()
        return s + (f", activation={self.activation!r}" if self.activation else "")


@dataclass
class ConvertReport:
    """What mconv.convert swapped (module name, its configuration) and what it kept (name, reason)."""

    swapped: List[Tuple[str, str]] = field(default_factory=list)
    kept: List[Tuple[str, str]] = field(default_factory=list)

    def __str__(self):
        lines = [f"mconv.convert: {len(self.swapped)} Conv2d swapped, {len(self.kept)} kept"]
        lines += [f"  swapped  {name:<40} {what}" for name, what in self.swapped]
        lines += [f"  kept     {name:<40} {why}" for name, why in self.kept]
        return "\n".join(lines)


def _why_not(m: nn.Conv2d) -> Optional[str]:
    if type(m) is not nn.Conv2d:
        return f"a subclass of nn.Conv2d ({type(m).__name__}) may change its forward"
    if m.weight.dtype not in _SUPPORTED_DTYPES:
        return f"weight dtype {m.weight.dtype} (mconv runs float32, float16, bfloat16)"
    if m.weight.device.type not in ("cpu", "cuda"):
        return f"weight on {m.weight.device} (mconv runs on cpu and cuda)"
    return None


def _describe(m: nn.Conv2d) -> str:
    r, s = m.kernel_size
    text = (f"{m.in_channels}->{m.out_channels} {r}x{s} stride {tuple(m.stride)} padding {m.padding} "
            f"dilation {tuple(m.dilation)} groups {m.groups}{' bias' if m.bias is not None else ''}")
    if m.padding_mode != "zeros":
        text += f" (padding_mode={m.padding_mode!r}: F.pad first, as nn.Conv2d)"
    return text


def convert(model: nn.Module) -> ConvertReport:
    """Swaps, in place, every torch.nn.Conv2d of `model` that mconv runs for an mconv.nn.Conv2d.

    The swap changes the module's class only: parameters, buffers, hooks and state_dict keys stay the
    same objects, so optimizers keep their state and pretrained weights load as before. Returns a
    ConvertReport of what was swapped and why anything was kept.
    """
    report = ConvertReport()
    for name, m in model.named_modules():
        if not isinstance(m, nn.Conv2d) or isinstance(m, Conv2d):
            continue
        why = _why_not(m)
        if why:
            report.kept.append((name, why))
            continue
        m.__class__ = Conv2d
        m.activation = None
        report.swapped.append((name, _describe(m)))
    return report
