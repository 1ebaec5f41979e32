"""Where a resnet18 training step's time goes: a few steps of mconv.train's resnet18 (batch 64,
channels_last, bf16 autocast by default) with nn.Conv2d and after mconv.convert. First the step's wall
time against its host time (until step() returns, nothing synchronised: a step whose host time
reaches its wall time keeps the GPU waiting), then torch.profiler: GPU kernel time summed by kind,
and the host operators with the most CPU time a step. Needs a GPU, torchvision and the mconv package.
    python3 scripts/profile_train_step.py [--dtype bf16|fp32] [--steps 5] [--csv out.csv]
"""
import argparse
import csv
import re
import statistics
import sys
import time
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


def make_step(use_mconv, dtype):
    """One training step of resnet18 (nn.Conv2d, or converted to mconv) on fixed random data."""
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
    return step


def time_steps(steps, rounds=5, per_round=10):
    """Median wall and host ms a step of each step function, in alternating rounds (the host's speed
    drifts over a run: alternating gives each the same conditions)."""
    walls = {name: [] for name in steps}
    hosts = {name: [] for name in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            for _ in range(per_round):
                t0 = time.perf_counter()
                step()
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                hosts[name].append((t1 - t0) * 1e3)
                walls[name].append((time.perf_counter() - t0) * 1e3)
    return {name: {"wall": statistics.median(walls[name]), "host": statistics.median(hosts[name])} for name in steps}


def profile_steps(step, steps):
    """(GPU ms a step by kind, host operators' (CPU ms, calls) a step) under torch.profiler."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    per_kind = defaultdict(float)
    host_ops = {}
    for e in prof.key_averages():
        if not e.key or e.key.startswith("ProfilerStep"):
            continue
        if e.device_type == torch.autograd.DeviceType.CUDA:  # a kernel (CPU operators count their kernels too)
            per_kind[kind_of(e.key)] += e.device_time_total / 1e3 / steps  # ms a step
            continue
        if e.self_cpu_time_total > 0:
            host_ops[e.key] = (e.self_cpu_time_total / 1e3 / steps, e.count / steps)
    return per_kind, host_ops


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--top", type=int, default=30, help="host operators listed")
    ap.add_argument("--csv", help="also write kind, torch ms, mconv ms")
    a = ap.parse_args(argv)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.dtype]
    names = ("nn.Conv2d", "mconv")
    print(f"resnet18 {a.dtype}: building both models ...", file=sys.stderr)
    steps = {name: make_step(name == "mconv", dtype) for name in names}
    times = time_steps(steps)
    runs, hosts = {}, {}
    for name in names:
        print(f"profiling resnet18 {a.dtype} with {name} ...", file=sys.stderr)
        runs[name], hosts[name] = profile_steps(steps[name], a.steps)
    print(f"resnet18 b64 {a.dtype}, median of 50 steps in 5 alternating rounds (ms): wall time, and host time "
          f"until step() returns")
    for what in ("wall", "host"):
        print(f"{'step ' + what:40s}" + "".join(f"{times[n][what]:12.3f}" for n in names))
    kinds = sorted(set(runs["nn.Conv2d"]) | set(runs["mconv"]), key=lambda k: -max(r.get(k, 0) for r in runs.values()))
    print(f"\nGPU kernel time a step (ms), {a.steps} profiled steps")
    print(f"{'kind':40s}{'nn.Conv2d':>12s}{'mconv':>12s}")
    rows = [("step wall", times["nn.Conv2d"]["wall"], times["mconv"]["wall"]),
            ("step host", times["nn.Conv2d"]["host"], times["mconv"]["host"])]
    for k in kinds:
        t, m = runs["nn.Conv2d"].get(k, 0.0), runs["mconv"].get(k, 0.0)
        rows.append((k, t, m))
        print(f"{k:40s}{t:12.3f}{m:12.3f}")
    print(f"{'total':40s}{sum(runs['nn.Conv2d'].values()):12.3f}{sum(runs['mconv'].values()):12.3f}")
    # Host operators: self CPU time a step under the profiler (which adds its own cost to each).
    top = sorted(set(hosts["nn.Conv2d"]) | set(hosts["mconv"]),
                 key=lambda k: -max(h.get(k, (0, 0))[0] for h in hosts.values()))[:a.top]
    print(f"\nhost operators, self CPU ms a step (calls a step), profiled; the {a.top} largest")
    print(f"{'operator':56s}{'nn.Conv2d':>18s}{'mconv':>18s}")
    for k in top:
        cells = "".join(f"{h.get(k, (0, 0))[0]:10.3f} ({h.get(k, (0, 0))[1]:4.0f})" for h in (hosts[n] for n in names))
        print(f"{k[:55]:56s}{cells}")
        rows.append(("host: " + k, hosts["nn.Conv2d"].get(k, (0, 0))[0], hosts["mconv"].get(k, (0, 0))[0]))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["kind", "torch_ms", "mconv_ms"])
            w.writerows(rows)


if __name__ == "__main__":
    main()
