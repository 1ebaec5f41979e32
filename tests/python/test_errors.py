"""Bad input gets a Python exception that names the argument, never a crash."""

import pytest
import torch

import mconv

X = torch.randn(1, 4, 8, 8)
W = torch.randn(6, 4, 3, 3)


@pytest.mark.parametrize("call,exc,words", [
    (lambda: mconv.conv2d("x", W), TypeError, "input must be a torch.Tensor"),
    (lambda: mconv.conv2d(X, W, bias=3), TypeError, "bias must be"),
    (lambda: mconv.conv2d(X.to(torch.int32), W.to(torch.int32)), TypeError, "input.dtype"),
    (lambda: mconv.conv2d(X, W.half()), TypeError, "weight.dtype"),
    (lambda: mconv.conv2d(X, W, torch.randn(6).double()), TypeError, "bias.dtype"),
    (lambda: mconv.conv2d(X, W[0]), ValueError, "weight must be 4-d"),
    (lambda: mconv.conv2d(X[0, 0], W), ValueError, "input must be 3-d"),
    (lambda: mconv.conv2d(X, W, torch.randn(5)), ValueError, "bias must have shape (6,)"),
    (lambda: mconv.conv2d(X, torch.randn(6, 3, 3, 3)), ValueError, "input has 4 channels"),
    (lambda: mconv.conv2d(X, torch.randn(6, 2, 3, 3), groups=2.5), ValueError, "groups"),
    (lambda: mconv.conv2d(X, torch.randn(5, 2, 3, 3), groups=2), ValueError, "does not divide out_channels"),
    (lambda: mconv.conv2d(X, W, stride=0), ValueError, "stride and dilation"),
    (lambda: mconv.conv2d(X, W, stride=(1, 2, 3)), ValueError, "stride must have 1 or 2 values"),
    (lambda: mconv.conv2d(X, W, stride="2"), TypeError, "stride must be an int or a pair"),
    (lambda: mconv.conv2d(X, W, padding=-1), ValueError, "padding must be >= 0"),
    (lambda: mconv.conv2d(X, W, padding="full"), ValueError, "padding must be 'valid', 'same'"),
    (lambda: mconv.conv2d(X, W, padding="same", stride=2), ValueError, "needs stride 1"),
    (lambda: mconv.conv2d(X, torch.randn(6, 4, 9, 9)), ValueError, "larger than the padded input height"),
    (lambda: mconv.conv2d(X, W, activation="tanh"), ValueError, "activation"),
    (lambda: mconv.conv2d(X.to("meta"), W.to("meta")), ValueError, "input is on meta"),
    (lambda: torch.ops.mconv.conv2d(X, W, None, [1], [0], [1], 3, "identity", False), RuntimeError,
     "groups != input channels"),
    (lambda: torch.ops.mconv.conv2d(X, W, None, [1, 2, 3], [0], [1], 1, "identity", False), RuntimeError,
     "stride: expected 1 or 2 values"),
    (lambda: torch.ops.mconv.conv2d(X, W, None, [1], [-1], [1], 1, "identity", False), RuntimeError, "pad_h"),
    (lambda: torch.ops.mconv.conv2d(X, W, None, [1], [0], [1], 1, "gelu", False), RuntimeError, "activation"),
    (lambda: torch.ops.mconv.conv2d(X[0], W, None, [1], [0], [1], 1, "identity", False), RuntimeError, "4-d"),
    (lambda: torch.ops.mconv.conv2d(X.to(torch.int32), W.to(torch.int32), None, [1], [0], [1], 1, "identity",
                                    False), RuntimeError, "input.dtype"),
])
def test_bad_input_raises_naming_the_argument(call, exc, words):
    with pytest.raises(exc, match=None) as info:
        call()
    assert words in str(info.value)


def test_double_backward_is_an_explicit_error():
    with torch.enable_grad():
        x = X.double().requires_grad_()
        w = W.double().requires_grad_()
        (g,) = torch.autograd.grad(mconv.conv2d(x, w).square().sum(), w, create_graph=True)
        with pytest.raises(RuntimeError, match="double backward"):
            torch.autograd.grad(g.sum(), x)


def test_backward_op_bad_sizes():
    dy = torch.randn(2, 4, 5, 5)
    with pytest.raises(RuntimeError, match="grad_output: sizes do not match"):
        torch.ops.mconv.conv2d_backward_data(dy, W, [2, 4, 9, 9], [1], [0], [1], 1)
    with pytest.raises(RuntimeError, match="input_size: expected 4 sizes"):
        torch.ops.mconv.conv2d_backward_data(dy, W, [2, 4, 9], [1], [0], [1], 1)
    with pytest.raises(RuntimeError, match="weight_size: expected 4 sizes"):
        torch.ops.mconv.conv2d_backward_filter(torch.randn(1, 6, 6, 6), X, [6, 4, 3], [1], [0], [1], 1)


def test_device_mismatch(cuda):
    with pytest.raises(ValueError, match="weight is on cuda"):
        mconv.conv2d(X, W.to(cuda))
    with pytest.raises(RuntimeError, match="weight: on a different device"):
        torch.ops.mconv.conv2d(X, W.to(cuda), None, [1], [0], [1], 1, "identity", False)


def test_inputs_are_untouched_by_an_error(device):
    x, w = X.to(device), W.to(device)
    x0, w0 = x.clone(), w.clone()
    with pytest.raises(RuntimeError):
        torch.ops.mconv.conv2d(x, w, None, [1], [0], [1], 3, "identity", False)
    assert torch.equal(x, x0) and torch.equal(w, w0)
