"""Where a resnet18 training step's GPU time goes: a few steps of mconv.train's resnet18 (batch 64,
channels_last, bf16 autocast by default) under torch.profiler, with nn.Conv2d and after mconv.convert,
kernel time summed by kind. Needs a GPU, torchvision and the mconv package.
    python3 scripts/profile_train_step.py [--dtype bf16|fp32] [--steps 5] [--csv out.csv]
"""
import argparse
import csv
import re
import sys
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

# Kernel name patterns, first match wins. implicit_mma's gather forms tell the passes apart: a forward
# stage reads vector x and w, a dgrad step N-major (transposed) filters, a wgrad step both transposed.
KINDS = [
    ("mconv wgrad", r"implicit_mma_kernel.*GatherForm\)1, \(mconv::GatherForm\)1|implicit_mma_kernel.*GatherForm\)2, \(mconv::GatherForm\)1"),
    ("mconv dgrad", r"implicit_mma_kernel.*GatherForm\)0, \(mconv::GatherForm\)1"),
    ("mconv forward", r"implicit_mma_kernel|channels_last_depthwise|implicit_precomp|stride_fixed|direct_block|single_channel"),
    ("mconv pre-pass and fills", r"output_prepass|fill_view"),
    ("cuDNN / cuBLAS convolution and GEMM", r"cudnn|sm90_xmma|xmma|cutlass|gemm|implicit_convolve|wgrad|dgrad|nhwc"),
    ("batch norm", r"batch_norm|bn_"),
    ("elementwise, casts, optimizer", r"elementwise|vectorized|unrolled|multi_tensor|foreach|copy|cast|fill"),
    ("pooling, loss, reductions", r"pool|softmax|nll|reduce|cross"),
]


def kind_of(name):
    for kind, pattern in KINDS:
        if re.search(pattern, name, re.IGNORECASE):
            return kind
    return "other"


def profile_run(use_mconv, dtype, steps):
    from mconv.nn import convert
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=100).cuda().to(memory_format=torch.channels_last)
    if use_mconv:
        convert(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(64, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 100, (64,), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=dtype, enabled=dtype != torch.float32):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(10):  # plans, autotuning and caches settle first
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    per_kind = defaultdict(float)
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)
        if t and e.key and not e.key.startswith("ProfilerStep"):
            per_kind[kind_of(e.key)] += t / 1e3 / steps  # ms a step
    return per_kind


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--csv", help="also write kind, torch ms, mconv ms")
    a = ap.parse_args(argv)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]
    runs = {}
    for name, use in (("nn.Conv2d", False), ("mconv", True)):
        print(f"profiling resnet18 {a.dtype} with {name} ...", file=sys.stderr)
        runs[name] = profile_run(use, dtype, a.steps)
    kinds = sorted(set(runs["nn.Conv2d"]) | set(runs["mconv"]), key=lambda k: -max(r.get(k, 0) for r in runs.values()))
    print(f"resnet18 b64 {a.dtype}: GPU kernel time a step (ms), {a.steps} profiled steps")
    print(f"{'kind':40s}{'nn.Conv2d':>12s}{'mconv':>12s}")
    rows = []
    for k in kinds:
        t, m = runs["nn.Conv2d"].get(k, 0.0), runs["mconv"].get(k, 0.0)
        rows.append((k, t, m))
        print(f"{k:40s}{t:12.3f}{m:12.3f}")
    print(f"{'total':40s}{sum(runs['nn.Conv2d'].values()):12.3f}{sum(runs['mconv'].values()):12.3f}")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["kind", "torch_ms", "mconv_ms"])
            w.writerows(rows)


if __name__ == "__main__":
    main()
