"""mconv: zero-workspace convolution kernels for CNNs, as a PyTorch operator.

    import mconv
    y = mconv.conv2d(x, w, b, stride=1, padding=1, activation="relu")  # torch.ops.mconv.conv2d
    report = mconv.convert(model)                                        # nn.Conv2d -> mconv.nn.Conv2d
"""

from ._library import __version__, cuda_available
from .functional import conv2d
from . import nn
from .nn import ConvertReport, convert

__all__ = ["__version__", "cuda_available", "conv2d", "convert", "ConvertReport", "nn"]
