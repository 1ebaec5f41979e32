"""torch.ops.mconv.conv2d and mconv.conv2d against F.conv2d in float64, on random problems."""

import random

import pytest
import torch
import torch.nn.functional as F

import mconv
from reference import poison_cuda_allocator, reference, relative_error, tolerance


def random_problem(rng):
    groups = rng.choice([1, 1, 1, 2, 3, 4])
    depthwise = rng.random() < 0.15
    c = groups * rng.randint(1, 6) if not depthwise else rng.randint(1, 12)
    if depthwise:
        groups = c
    k = groups * rng.randint(1, 6)
    r, s = rng.choice([(1, 1), (3, 3), (5, 5), (1, 3), (3, 1), (2, 2), (7, 7)])
    dil = (rng.choice([1, 1, 2]), rng.choice([1, 1, 2]))
    stride = (rng.choice([1, 1, 2, 3]), rng.choice([1, 1, 2]))
    pad = (rng.randint(0, r // 2 + 1), rng.randint(0, s // 2 + 1))
    h = max(rng.randint(1, 17), dil[0] * (r - 1) + 1 - 2 * pad[0])
    w = max(rng.randint(1, 17), dil[1] * (s - 1) + 1 - 2 * pad[1])
    n = rng.randint(1, 3)
    return dict(n=n, c=c, h=h, w=w, k=k, r=r, s=s, groups=groups, stride=stride, padding=pad, dilation=dil)


def make(p, dtype, device, layout, bias, gen):
    x = torch.randn(p["n"], p["c"], p["h"], p["w"], generator=gen).to(device=device, dtype=dtype)
    w = torch.randn(p["k"], p["c"] // p["groups"], p["r"], p["s"], generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(p["k"], generator=gen).to(device=device, dtype=dtype) if bias else None
    if layout == "channels_last":
        x, w = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    elif layout == "strided":  # a view into a larger tensor: no layout of its own
        x = torch.randn(p["n"], p["c"] * 2, p["h"], p["w"] + 3, generator=gen).to(device=device, dtype=dtype)
        x = x[:, ::2, :, 1:1 + p["w"]]
    return x, w, b


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided"])
def test_random_problems(device, dtype, layout):
    seed = random.SystemRandom().randrange(1 << 31)  # fresh inputs every run; the seed is in the message
    rng, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    for i in range(12):
        p = random_problem(rng)
        bias = rng.random() < 0.5
        act = rng.choice([None, "relu", "silu"])
        x, w, b = make(p, dtype, device, layout, bias, gen)
        kw = dict(stride=p["stride"], padding=p["padding"], dilation=p["dilation"], groups=p["groups"])
        ref = reference(x, w, b, act, **kw)
        if device == "cuda":
            poison_cuda_allocator(ref.numel(), dtype)
        y = mconv.conv2d(x, w, b, activation=act, **kw)
        where = f"seed {seed} problem {i}: {p} bias={bias} act={act}"
        assert y.shape == ref.shape and y.dtype == dtype and y.device == x.device, where
        assert relative_error(y, ref) <= tolerance(dtype, device), where
        want_cl = x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()
        assert y.is_contiguous(memory_format=torch.channels_last if want_cl else torch.contiguous_format), where


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("kernel,dilation", [((3, 3), 1), ((2, 4), 1), ((3, 2), 2), ((1, 1), 1)])
def test_padding_strings(device, padding, kernel, dilation):
    x = torch.randn(2, 4, 9, 8, device=device)
    w = torch.randn(5, 4, *kernel, device=device)
    y = mconv.conv2d(x, w, None, padding=padding, dilation=dilation)
    ref = reference(x, w, None, padding=padding, dilation=dilation)
    assert y.shape == ref.shape
    assert relative_error(y, ref) <= tolerance(torch.float32, device)


def test_unbatched_input(device):
    x, w, b = torch.randn(3, 10, 10, device=device), torch.randn(4, 3, 3, 3, device=device), torch.randn(4, device=device)
    y = mconv.conv2d(x, w, b, padding=1)
    assert y.shape == (4, 10, 10)
    assert relative_error(y, reference(x[None], w, b, padding=1)[0]) <= tolerance(torch.float32, device)


def test_empty_batch(device):
    y = mconv.conv2d(torch.randn(0, 3, 8, 8, device=device), torch.randn(4, 3, 3, 3, device=device))
    assert y.shape == (0, 4, 6, 6)


def test_fp32_bias_with_half_tensors(device):
    x, w = torch.randn(1, 8, 6, 6, device=device).half(), torch.randn(8, 8, 1, 1, device=device).half()
    b = torch.randn(8, device=device)
    assert relative_error(mconv.conv2d(x, w, b), reference(x, w, b)) <= 1e-2


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_opcheck(device, layout, dtype):
    gen = torch.Generator().manual_seed(7)
    cases = [dict(n=2, c=8, h=9, w=9, k=6, r=3, s=3, groups=2, stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
             dict(n=1, c=16, h=7, w=5, k=16, r=3, s=3, groups=16, stride=(1, 1), padding=(1, 1), dilation=(1, 1)),
             dict(n=3, c=3, h=12, w=12, k=8, r=5, s=5, groups=1, stride=(2, 2), padding=(2, 2), dilation=(1, 1))]
    for p in cases:
        x, w, b = make(p, dtype, device, layout, True, gen)
        args = (x, w, b, list(p["stride"]), list(p["padding"]), list(p["dilation"]), p["groups"], "relu", False)
        torch.library.opcheck(torch.ops.mconv.conv2d.default, args)


def test_allow_tf32_is_honoured(cuda):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4, 64, 16, 16, generator=gen).to(cuda)
    w = torch.randn(64, 64, 3, 3, generator=gen).to(cuda)
    ref = reference(x, w, padding=1)
    old = torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cudnn.allow_tf32 = False
        exact = relative_error(mconv.conv2d(x, w, padding=1), ref)
        torch.backends.cudnn.allow_tf32 = True
        tf32 = relative_error(mconv.conv2d(x, w, padding=1), ref)
    finally:
        torch.backends.cudnn.allow_tf32 = old
    assert exact <= 1e-5
    assert 1e-5 < tf32 <= 2e-3  # TF32 rounds the inputs to 10 mantissa bits: measurably less exact


def test_runs_on_the_current_stream_and_is_graph_capturable(cuda):
    x = torch.randn(8, 32, 28, 28, device=cuda).to(memory_format=torch.channels_last).half()
    w = torch.randn(64, 32, 3, 3, device=cuda).to(memory_format=torch.channels_last).half()
    ref = reference(x, w, padding=1, stride=1)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y1 = mconv.conv2d(x, w, padding=1)  # plans (first call) and launches on s
    torch.cuda.current_stream().wait_stream(s)
    assert relative_error(y1, ref) <= 1e-2
    # The plan is cached now: capture, then replay on new data.
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y2 = mconv.conv2d(x, w, padding=1)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    assert relative_error(y2, reference(x, w, padding=1)) <= 1e-2


def test_two_streams_at_once(cuda):
    gen = torch.Generator().manual_seed(11)
    xs = [torch.randn(4, 16, 20, 20, generator=gen).to(cuda) for _ in range(2)]
    w = torch.randn(16, 16, 3, 3, generator=gen).to(cuda)
    streams = [torch.cuda.Stream() for _ in range(2)]
    ys = []
    for x, s in zip(xs, streams):
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            ys.append([mconv.conv2d(x, w, padding=1) for _ in range(20)][-1])
    torch.cuda.synchronize()
    for x, y in zip(xs, ys):
        assert relative_error(y, reference(x, w, padding=1)) <= tolerance(torch.float32, "cuda")


def test_second_device_guard(cuda):
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU")
    x, w = torch.randn(1, 4, 8, 8, device="cuda:1"), torch.randn(4, 4, 3, 3, device="cuda:1")
    y = mconv.conv2d(x, w)
    assert y.device == x.device and torch.cuda.current_device() == 0
    assert relative_error(y, reference(x, w)) <= tolerance(torch.float32, "cuda")
