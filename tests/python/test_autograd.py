"""Autograd through mconv's backward kernels: gradcheck in float64 on the CPU, gradients against
F.conv2d's in every dtype and layout (and on the GPU where there is one), deterministic weight
gradients, autocast."""

import pytest
import torch
import torch.nn.functional as F

import mconv
from reference import tolerance

# (N, C, H, W, K, kernel, stride, padding, dilation, groups): stride 2 with P*stride != H, 1x1
# stride 2 (dx rows no tap reaches), dilation, grouped, depthwise with a multiplier, padding beyond
# the filter.
SHAPES = [
    (2, 3, 7, 7, 4, 3, 1, 1, 1, 1),
    (2, 4, 8, 9, 6, 3, 2, 1, 1, 1),
    (1, 4, 6, 6, 5, 1, 2, 0, 1, 1),
    (1, 3, 9, 9, 2, 3, 1, 2, 2, 1),
    (2, 6, 7, 7, 4, 3, 2, 1, 1, 2),
    (1, 4, 8, 8, 8, 3, 1, 1, 1, 4),
    (1, 2, 5, 6, 3, 1, 1, 2, 1, 1),
    (1, 3, 10, 10, 4, (3, 5), (2, 3), (1, 2), (1, 2), 1),
]


def _inputs(shape, dtype, device, bias=True, channels_last=False):
    n, c, h, w, k, ks, st, pad, dil, g = shape
    kh, kw = (ks, ks) if isinstance(ks, int) else ks
    gen = torch.Generator().manual_seed(hash(str(shape)) % 2**31)
    x = torch.randn(n, c, h, w, generator=gen, dtype=torch.float64)
    wt = torch.randn(k, c // g, kh, kw, generator=gen, dtype=torch.float64)
    b = torch.randn(k, generator=gen, dtype=torch.float64) if bias else None
    x, wt = x.to(device=device, dtype=dtype), wt.to(device=device, dtype=dtype)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
        wt = wt.to(memory_format=torch.channels_last)
    b = None if b is None else b.to(device=device, dtype=dtype)
    return [t.requires_grad_() if t is not None else None for t in (x, wt, b)], dict(stride=st, padding=pad,
                                                                                    dilation=dil, groups=g)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("activation", [None, "relu", "silu"])
def test_gradcheck_float64(shape, activation):
    with torch.enable_grad():
        (x, w, b), kw = _inputs(shape, torch.float64, "cpu")
        f = lambda x, w, b: mconv.conv2d(x, w, b, activation=activation, **kw)  # noqa: E731
        assert torch.autograd.gradcheck(f, (x, w, b))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("channels_last", [False, True])
def test_gradients_match_torch(device, shape, dtype, channels_last):
    if dtype == torch.float16 and device == "cpu":
        pytest.skip("F.conv2d has no float16 CPU backward to compare with")
    with torch.enable_grad():
        (x, w, b), kw = _inputs(shape, dtype, device, channels_last=channels_last)
        y = mconv.conv2d(x, w, b, **kw)
        dy = torch.randn_like(y)
        gx, gw, gb = torch.autograd.grad(y, (x, w, b), dy)
        # float64 reference on the same (rounded) values
        x64, w64, b64 = (t.detach().double().requires_grad_() for t in (x, w, b))
        y64 = F.conv2d(x64, w64, b64, **kw)
        rx, rw, rb = torch.autograd.grad(y64, (x64, w64, b64), dy.double())
    tol = tolerance(dtype, device)
    for got, ref, name in ((gx, rx, "input"), (gw, rw, "weight"), (gb, rb, "bias")):
        assert got.dtype == dtype and got.shape == ref.shape
        err = float((got.double() - ref).norm() / ref.abs().norm().clamp_min(1e-30))
        assert err < tol, f"{name} gradient: relative error {err:.2e} (tolerance {tol})"


def test_needs_input_grad_is_respected():
    with torch.enable_grad():
        (x, w, b), kw = _inputs(SHAPES[1], torch.float32, "cpu")
        x.requires_grad_(False)
        mconv.conv2d(x, w, b, **kw).sum().backward()
        assert x.grad is None and w.grad is not None and b.grad is not None


def test_deterministic_weight_gradient(cuda):
    torch.use_deterministic_algorithms(True)
    try:
        with torch.enable_grad():
            (x, w, b), kw = _inputs((8, 32, 28, 28, 32, 3, 1, 1, 1, 1), torch.float32, cuda)
            grads = []
            for _ in range(2):
                (gw,) = torch.autograd.grad(mconv.conv2d(x, w, b, **kw).square().sum(), w)
                grads.append(gw)
    finally:
        torch.use_deterministic_algorithms(False)
    assert torch.equal(grads[0], grads[1])


def test_autocast_runs_in_the_autocast_dtype(device):
    conv = mconv.nn.Conv2d(4, 6, 3, padding=1).to(device)
    x = torch.randn(2, 4, 8, 8, device=device)
    with torch.enable_grad(), torch.autocast(device, dtype=torch.bfloat16):
        y = conv(x)
        assert y.dtype == torch.bfloat16
        y.float().sum().backward()
    assert conv.weight.grad.dtype == torch.float32 and conv.bias.grad.dtype == torch.float32


@pytest.mark.parametrize("activation", ["identity", "relu", "silu"])
def test_eager_path_and_the_ops_autograd_agree(activation):
    # mconv.conv2d records its own autograd Function in eager mode; the op's registered autograd is
    # what torch.compile traces. Both run the same kernels, so the gradients are bitwise equal.
    with torch.enable_grad():
        (x, w, b), kw = _inputs(SHAPES[4], torch.float64, "cpu")
        conf = ([kw["stride"]] * 2, [kw["padding"]] * 2, [kw["dilation"]] * 2, kw["groups"], activation, False)
        y_op = torch.ops.mconv.conv2d.default(x, w, b, *conf)
        y_eager = mconv.conv2d(x, w, b, activation=None if activation == "identity" else activation, **kw)
        assert torch.equal(y_op, y_eager) and y_eager.grad_fn is not None
        dy = torch.randn_like(y_op)
        op_grads = torch.autograd.grad(y_op, (x, w, b), dy)
        eager_grads = torch.autograd.grad(y_eager, (x, w, b), dy)
        assert all(torch.equal(a, e) for a, e in zip(op_grads, eager_grads))
        assert torch.autograd.gradcheck(lambda x, w, b: torch.ops.mconv.conv2d.default(x, w, b, *conf), (x, w, b))


def test_no_graph_without_gradients():
    (x, w, b), kw = _inputs(SHAPES[0], torch.float32, "cpu")
    with torch.no_grad():
        y = mconv.conv2d(x, w, b, **kw)
    assert y.grad_fn is None and not y.requires_grad
    with torch.inference_mode():
        assert torch.equal(mconv.conv2d(x, w, b, **kw), y)
    with torch.enable_grad():
        y = mconv.conv2d(x.detach(), w.detach(), b.detach(), **kw)
    assert y.grad_fn is None and not y.requires_grad
