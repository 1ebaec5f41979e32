"""python -m mconv.bench: mconv's operator measured the way a PyTorch user would, beside F.conv2d.

    python -m mconv.bench --suite resnet50 --dtype bf16 --layout NHWC --vs torch
    python -m mconv.bench --model resnet50,mobilenet_v2 --batch 1,32 --dtype fp32,bf16
    python -m mconv.bench --overhead

Suites: layers of a CSV (name,n,c,h,w,k,r,s,pad_h,pad_w,stride_h,stride_w,dil_h,dil_w,groups), or the
name of one shipped with the package. Each layer runs mconv's op and F.conv2d (cudnn.benchmark=True)
on the same tensors, each as a CUDA graph of back-to-back calls over enough input copies to miss L2,
median of repeats; a result is printed only after the output matched a float64 reference.
Models: torchvision models with random weights in eval mode, converted by mconv.convert vs not, timed
in eager mode (what a user runs) in images/s, outputs compared.
fp32 means exact fp32 for both (allow_tf32 off), tf32 means TF32 for both (PyTorch's default).
"""

import argparse
import copy
import csv
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from . import convert, cuda_available
from ._library import output_size

_here = os.path.dirname(os.path.abspath(__file__))
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TOLERANCE = {"fp32": 1e-5, "tf32": 2e-3, "fp16": 1e-2, "bf16": 2e-2}
COLUMNS = ["suite", "layer", "dtype", "layout", "n", "c", "h", "w", "k", "r", "s", "stride", "pad", "dil", "groups",
           "mconv_ms", "torch_ms", "ratio", "mconv_tflops", "torch_tflops", "mconv_rel_err", "torch_rel_err", "status"]


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


def set_precision(dtype_name):
    torch.backends.cudnn.allow_tf32 = dtype_name == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"


def suite_path(name):
    if os.path.exists(name):
        return name
    shipped = os.path.join(_here, "suites", name + ".csv")
    if os.path.exists(shipped):
        return shipped
    raise SystemExit(f"mconv.bench: no suite file {name!r} (and none shipped by that name: "
                     f"{', '.join(sorted(f[:-4] for f in os.listdir(os.path.join(_here, 'suites'))))})")


def read_suite(path, batch):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"mconv.bench: suite {path} has no layers")
    layers = []
    for row in rows:
        try:
            layer = {k: int(v) for k, v in row.items() if k != "name"}
        except ValueError as e:
            raise SystemExit(f"mconv.bench: {path}: layer {row.get('name')}: {e}") from None
        layer["name"] = row["name"]
        if batch:
            layer["n"] = batch
        layers.append(layer)
    return layers


def graph_time(calls, iters=20, repeats=5):
    """Median milliseconds of one call: a CUDA graph of `iters` calls (cycling through `calls`), replayed."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for c in calls[:3]:
            c()  # warm-up: plans, cuDNN's benchmark search, allocator pools
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(iters):
            calls[i % len(calls)]()
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / iters)
    del graph
    return statistics.median(times)


def rel_err(y, ref):
    if not torch.isfinite(y).all():
        return math.inf
    return ((y.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def _pass_calls(pass_name, xs, ws, y_shape, fmt, st, pad, dil, g, tf32):
    """(mconv call, PyTorch call, float64 reference) of one pass; call(i) runs on the i-th copy. The peer
    of the backward passes is aten.convolution_backward (cuDNN's, under cudnn.benchmark) with only the
    one gradient asked for."""
    if pass_name == "fwd":
        op = torch.ops.mconv.conv2d.default
        ref = F.conv2d(xs[0].double(), ws[0].double(), None, st, pad, dil, g)
        return (lambda i: op(xs[i], ws[i], None, st, pad, dil, g, "identity", tf32),
                lambda i: F.conv2d(xs[i], ws[i], None, st, pad, dil, g), ref)
    dys = [torch.randn(y_shape, device="cuda").to(dtype=xs[0].dtype, memory_format=fmt) for _ in xs]
    bwd = torch.ops.aten.convolution_backward.default
    dgrad = pass_name == "dgrad"
    mask = [dgrad, not dgrad, False]
    ref = bwd(dys[0].double(), xs[0].double(), ws[0].double(), None, st, pad, dil, False, [0, 0], g,
              mask)[0 if dgrad else 1]
    peer = lambda i: bwd(dys[i], xs[i], ws[i], None, st, pad, dil, False, [0, 0], g, mask)[0 if dgrad else 1]  # noqa: E731
    if dgrad:
        op = torch.ops.mconv.conv2d_backward_data.default
        return lambda i: op(dys[i], ws[i], list(xs[i].shape), st, pad, dil, g, tf32), peer, ref
    op = torch.ops.mconv.conv2d_backward_filter.default
    return lambda i: op(dys[i], xs[i], list(ws[i].shape), st, pad, dil, g, tf32, False), peer, ref


def bench_layer(layer, dtype_name, layout, l2_bytes, pass_name="fwd"):
    dtype = DTYPES[dtype_name]
    fmt = torch.channels_last if layout == "NHWC" else torch.contiguous_format
    n, c, h, w, k, r, s, g = (layer[x] for x in ("n", "c", "h", "w", "k", "r", "s", "groups"))
    kw = dict(stride=(layer["stride_h"], layer["stride_w"]), padding=(layer["pad_h"], layer["pad_w"]),
              dilation=(layer["dil_h"], layer["dil_w"]), groups=g)
    p = output_size(h, layer["pad_h"], layer["dil_h"], r, layer["stride_h"])
    q = output_size(w, layer["pad_w"], layer["dil_w"], s, layer["stride_w"])
    flops = 2.0 * n * k * p * q * (c // g) * r * s
    size = torch.finfo(dtype).bits // 8 * (n * c * h * w + k * (c // g) * r * s)
    copies = max(1, min(16, math.ceil(2 * l2_bytes / size)))  # rotate past L2
    xs = [torch.randn(n, c, h, w, device="cuda").to(dtype=dtype, memory_format=fmt) for _ in range(copies)]
    ws = [torch.randn(k, c // g, r, s, device="cuda").div_(math.sqrt(c // g * r * s)).to(dtype=dtype, memory_format=fmt)
          for _ in range(copies)]
    st, pad, dil = list(kw["stride"]), list(kw["padding"]), list(kw["dilation"])
    tf32 = dtype_name == "tf32"
    mconv_call, torch_call, ref = _pass_calls(pass_name, xs, ws, (n, k, p, q), fmt, st, pad, dil, g, tf32)
    row = {"status": "ok"}
    with torch.inference_mode():
        y_m, y_t = mconv_call(0), torch_call(0)
        row["mconv_rel_err"], row["torch_rel_err"] = rel_err(y_m, ref), rel_err(y_t, ref)
        if row["mconv_rel_err"] > TOLERANCE[dtype_name]:
            row["status"] = "WRONG"
            return row
        del y_m, y_t, ref
        row["mconv_ms"] = graph_time([lambda i=i: mconv_call(i) for i in range(copies)])
        row["torch_ms"] = graph_time([lambda i=i: torch_call(i) for i in range(copies)])
    row["ratio"] = row["torch_ms"] / row["mconv_ms"]
    row["mconv_tflops"] = flops / row["mconv_ms"] / 1e9
    row["torch_tflops"] = flops / row["torch_ms"] / 1e9
    return row


def run_suite(args, suite, dtype_name):
    set_precision(dtype_name)
    torch.backends.cudnn.benchmark = True
    layers = read_suite(suite_path(suite), int(args.batch) if args.batch else 0)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    name = os.path.splitext(os.path.basename(suite))[0]
    rows = []
    for i, layer in enumerate(layers):
        progress(f"[{i + 1}/{len(layers)}] {name} {args.pass_} {dtype_name} {args.layout} {layer['name']}")
        base = {"suite": name, "pass": args.pass_, "layer": layer["name"], "dtype": dtype_name, "layout": args.layout,
                **{x: layer[x] for x in ("n", "c", "h", "w", "k", "r", "s", "groups")},
                "stride": f"{layer['stride_h']}x{layer['stride_w']}", "pad": f"{layer['pad_h']}x{layer['pad_w']}",
                "dil": f"{layer['dil_h']}x{layer['dil_w']}"}
        try:
            base.update(bench_layer(layer, dtype_name, args.layout, l2, args.pass_))
        except Exception as e:  # one layer that cannot run is reported; the suite goes on
            base["status"] = f"error: {str(e).splitlines()[0][:120]}"
        torch.cuda.empty_cache()
        rows.append(base)
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    summary = {"suite": name, "pass": args.pass_, "dtype": dtype_name, "layout": args.layout, "device": torch.cuda.get_device_name(0),
               "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "layers": len(rows),
               "timed": len(ratios),
               "geomean_ratio_vs_torch": math.exp(statistics.fmean(map(math.log, ratios))) if ratios else None,
               "mconv_total_ms": sum(r["mconv_ms"] for r in rows if "ratio" in r),
               "torch_total_ms": sum(r["torch_ms"] for r in rows if "ratio" in r)}
    stem = f"{name}_{args.layout}_{dtype_name}" + ("" if args.pass_ == "fwd" else f"_{args.pass_}")
    write_suite(args.out, stem + "_vs_torch", rows, summary)
    return summary


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def write_suite(out, stem, rows, summary):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, stem + ".csv"), "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        wr.writeheader()
        wr.writerows(rows)
    with open(os.path.join(out, stem + ".json"), "w") as f:
        json.dump({"summary": summary, "layers": rows}, f, indent=1)
    lines = [f"{'layer':<28} {'mconv ms':>9} {'torch ms':>9} {'ratio':>6} {'TFLOP/s':>8} {'err':>8}  status"]
    for r in rows:
        lines.append(f"{r['layer']:<28} {fmt(r.get('mconv_ms'), '9.4f')} {fmt(r.get('torch_ms'), '9.4f')} "
                     f"{fmt(r.get('ratio'), '6.3f')} {fmt(r.get('mconv_tflops'), '8.1f')} "
                     f"{fmt(r.get('mconv_rel_err'), '8.1e')}  {r['status']}")
    g = summary["geomean_ratio_vs_torch"]
    lines.append(f"{summary['suite']} {summary['dtype']} {summary['layout']}: {summary['timed']}/{summary['layers']} "
                 f"layers, mconv {summary['mconv_total_ms']:.3f} ms, F.conv2d {summary['torch_total_ms']:.3f} ms, "
                 f"geomean ratio (F.conv2d time / mconv time) {fmt(g, '.3f')}")
    text = "\n".join(lines)
    print(text, flush=True)
    with open(os.path.join(out, stem + ".txt"), "w") as f:
        f.write(text + "\n")
    plot_ratios(os.path.join(out, stem + ".png"), rows, f"{summary['suite']} {summary['dtype']} {summary['layout']}: "
                f"F.conv2d time / mconv time (>1: mconv faster)")


def plot_ratios(path, rows, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress("matplotlib not installed: no plot")
        return
    timed = [r for r in rows if "ratio" in r]
    if not timed:
        return
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(timed)), 4))
    ax.bar(range(len(timed)), [r["ratio"] for r in timed],
           color=["tab:green" if r["ratio"] >= 1 else "tab:red" for r in timed])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(timed)), [r["layer"] for r in timed], rotation=75, fontsize=7)
    ax.set_ylabel("ratio")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_models(args):
    import torchvision

    rows = []
    for name in args.model.split(","):
        for batch in [int(b) for b in (args.batch or "1,32").split(",")]:
            for dtype_name in args.dtype.split(","):
                progress(f"model {name} batch {batch} {dtype_name}")
                set_precision(dtype_name)
                torch.backends.cudnn.benchmark = True
                rows.append(bench_model(torchvision, name, batch, dtype_name, args.iters))
                torch.cuda.empty_cache()
    os.makedirs(args.out, exist_ok=True)
    cols = ["model", "batch", "dtype", "layout", "convs_swapped", "convs_kept", "torch_img_s", "mconv_img_s", "ratio",
            "rel_diff", "status"]
    with open(os.path.join(args.out, "models.csv"), "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        wr.writeheader()
        wr.writerows(rows)
    with open(os.path.join(args.out, "models.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "models": rows}, f, indent=1)
    lines = [f"{'model':<18} {'batch':>5} {'dtype':>5} {'torch img/s':>12} {'mconv img/s':>12} {'ratio':>6} "
             f"{'rel diff':>9}  status"]
    for r in rows:
        lines.append(f"{r['model']:<18} {r['batch']:>5} {r['dtype']:>5} {fmt(r.get('torch_img_s'), '12.1f')} "
                     f"{fmt(r.get('mconv_img_s'), '12.1f')} {fmt(r.get('ratio'), '6.3f')} "
                     f"{fmt(r.get('rel_diff'), '9.2e')}  {r['status']}")
    text = "\n".join(lines)
    print(text, flush=True)
    with open(os.path.join(args.out, "models.txt"), "w") as f:
        f.write(text + "\n")


def images_per_second(model, x, iters):
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            model(x)
        end.record()
        end.synchronize()
    return x.shape[0] * iters / (start.elapsed_time(end) / 1e3)


def bench_model(torchvision, name, batch, dtype_name, iters):
    dtype = DTYPES[dtype_name]
    # Half-precision inference as PyTorch users run it: the model cast, channels_last.
    fmt_ = torch.channels_last if dtype != torch.float32 else torch.contiguous_format
    row = {"model": name, "batch": batch, "dtype": dtype_name, "layout": "NHWC" if dtype != torch.float32 else "NCHW"}
    try:
        torch.manual_seed(0)
        model = torchvision.models.get_model(name, weights=None).eval().to("cuda", dtype=dtype, memory_format=fmt_)
        converted = copy.deepcopy(model)
        report = convert(converted)
        row["convs_swapped"], row["convs_kept"] = len(report.swapped), len(report.kept)
        x = torch.randn(batch, 3, 224, 224, device="cuda").to(dtype=dtype, memory_format=fmt_)
        with torch.inference_mode():
            a, b = model(x).double(), converted(x).double()
        row["rel_diff"] = ((a - b).norm() / a.norm()).item()
        row["torch_img_s"] = images_per_second(model, x, iters)
        row["mconv_img_s"] = images_per_second(converted, x, iters)
        row["ratio"] = row["mconv_img_s"] / row["torch_img_s"]
        row["status"] = "ok" if row["rel_diff"] <= (5e-2 if dtype_name != "fp32" else 1e-4) else "OUTPUTS DIFFER"
    except Exception as e:
        row["status"] = f"error: {str(e).splitlines()[0][:120]}"
    return row


def run_overhead(args):
    """Host time per call with the GPU busy (calls only queue), and the first call of a new shape."""
    set_precision("tf32")
    torch.backends.cudnn.benchmark = True
    x = torch.randn(1, 64, 14, 14, device="cuda")
    w = torch.randn(64, 64, 3, 3, device="cuda")
    b = torch.randn(64, device="cuda")
    from . import conv2d
    from .nn import Conv2d

    torch_mod = torch.nn.Conv2d(64, 64, 3, padding=1).cuda()
    mconv_mod = Conv2d(64, 64, 3, padding=1).cuda()
    op = torch.ops.mconv.conv2d.default
    calls = {
        "F.conv2d": lambda: F.conv2d(x, w, b, 1, 1),
        "mconv.conv2d": lambda: conv2d(x, w, b, 1, 1),
        "torch.ops.mconv.conv2d": lambda: op(x, w, b, [1, 1], [1, 1], [1, 1], 1, "identity", True),
        "nn.Conv2d": lambda: torch_mod(x),
        "mconv.nn.Conv2d": lambda: mconv_mod(x),
    }
    # A training call: forward with every gradient recorded, then its backward (dgrad, wgrad, bias).
    xg, wg, bg = (t.clone().requires_grad_() for t in (x, w, b))
    dy = torch.randn(1, 64, 14, 14, device="cuda")
    train_calls = {
        "F.conv2d forward+backward": lambda: F.conv2d(xg, wg, bg, 1, 1).backward(dy),
        "mconv.conv2d forward+backward": lambda: conv2d(xg, wg, bg, 1, 1).backward(dy),
    }

    def host_us(fn):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        samples = []
        for _ in range(7):
            torch.cuda._sleep(50_000_000)  # keeps the GPU busy: the calls below only queue
            t0 = time.perf_counter()
            for _ in range(200):
                fn()
            samples.append((time.perf_counter() - t0) / 200 * 1e6)
            torch.cuda.synchronize()
        return statistics.median(samples)

    rows = []
    for name, fn in train_calls.items():
        rows.append({"call": name, "host_us_per_call": host_us(fn)})
    with torch.inference_mode():
        for name, fn in calls.items():
            rows.append({"call": name, "host_us_per_call": host_us(fn)})
        # First call of a shape not seen before: mconv plans (and uploads its table); cuDNN searches.
        for name, fn in (("mconv first call (plan + launch)",
                          lambda xx, ww: op(xx, ww, None, [1, 1], [1, 1], [1, 1], 1, "identity", True)),
                         ("F.conv2d first call (cudnn.benchmark)", lambda xx, ww: F.conv2d(xx, ww, None, 1, 1))):
            samples = []
            for i in range(5):
                xx = torch.randn(2, 48 + 8 * i, 30 + i, 30 + i, device="cuda")
                ww = torch.randn(40 + 8 * i, 48 + 8 * i, 3, 3, device="cuda")
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                fn(xx, ww)
                torch.cuda.synchronize()
                samples.append((time.perf_counter() - t0) * 1e3)
            rows.append({"call": name, "first_call_ms": statistics.median(samples)})
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "overhead.csv"), "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=["call", "host_us_per_call", "first_call_ms"])
        wr.writeheader()
        wr.writerows(rows)
    lines = ["host cost per call, eager, GPU busy (layer n1 c64 14x14 k64 3x3, fp32 tf32, bias); forward+backward "
             "with gradients recorded, the rest under inference_mode:"]
    for r in rows:
        if "host_us_per_call" in r:
            base = rows[0 if "backward" in r["call"] else len(train_calls)]["host_us_per_call"]
            lines.append(f"  {r['call']:<30} {r['host_us_per_call']:7.2f} us  ({r['host_us_per_call'] / base:.2f}x "
                         f"F.conv2d)")
        else:
            lines.append(f"  {r['call']:<40} {r['first_call_ms']:8.2f} ms (median of 5 new shapes)")
    text = "\n".join(lines)
    print(text, flush=True)
    with open(os.path.join(args.out, "overhead.txt"), "w") as f:
        f.write(text + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m mconv.bench", description=__doc__.split("\n")[0])
    ap.add_argument("--suite", action="append", help="suite CSV or shipped suite name (repeatable)")
    ap.add_argument("--model", help="comma list of torchvision models (resnet50,mobilenet_v2,...)")
    ap.add_argument("--overhead", action="store_true", help="host cost per call and first-call time")
    ap.add_argument("--dtype", default="fp32", help="comma list of fp32, tf32, fp16, bf16")
    ap.add_argument("--layout", default="NCHW", choices=["NCHW", "NHWC"], help="suites: memory format")
    ap.add_argument("--batch", help="suites: one N that replaces every layer's n; models: comma list "
                    "(default 1,32)")
    ap.add_argument("--pass", dest="pass_", default="fwd", choices=["fwd", "dgrad", "wgrad"],
                    help="suites: forward, backward data or backward filter (peer: aten.convolution_backward)")
    ap.add_argument("--vs", default="torch", choices=["torch"], help="the peer: F.conv2d with cudnn.benchmark")
    ap.add_argument("--iters", type=int, default=30, help="models: timed forward passes")
    ap.add_argument("--out", default="bench-out", help="folder for the CSV, JSON, text and plots")
    args = ap.parse_args(argv)
    for d in args.dtype.split(","):
        if d not in DTYPES:
            ap.error(f"--dtype: unknown {d!r} (fp32, tf32, fp16, bf16)")
    if not (args.suite or args.model or args.overhead):
        ap.error("give --suite, --model or --overhead")
    if args.suite and args.batch and not args.batch.isdigit():
        ap.error("--batch: one positive integer with --suite")
    if not (cuda_available() and torch.cuda.is_available()):
        raise SystemExit("mconv.bench: needs a GPU visible to both mconv and torch")
    summaries = []
    for suite in args.suite or []:
        for d in args.dtype.split(","):
            summaries.append(run_suite(args, suite, d))
    if summaries:
        with open(os.path.join(args.out, "suites_summary.json"), "w") as f:
            json.dump(summaries, f, indent=1)
    if args.model:
        run_models(args)
    if args.overhead:
        run_overhead(args)


if __name__ == "__main__":
    main()
