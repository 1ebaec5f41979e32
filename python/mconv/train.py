"""Training on mconv's kernels, shown against the same training on nn.Conv2d.

    python -m mconv.train --task digits                     # CPU or GPU: loss curves, test accuracy
    python -m mconv.train --task digits --world 2           # DistributedDataParallel, 2 processes (gloo)
    python -m mconv.train --task resnet18 --dtype fp32,bf16 # GPU: 100 steps on random data, step time
    python -m mconv.train --task resnet18 --world 2 --backend nccl   # 2 GPUs vs 1: parameters, scaling

digits: scikit-learn's handwritten digits (1,797 8x8 images, shipped inside the package), a small CNN
trained with SGD from one seed, once with nn.Conv2d and once after mconv.convert. Data-parallel: the
global batch split across `world` processes under DistributedDataParallel; its final parameters are
compared with one process on the whole batch. Results as a table, CSV/JSON and a PNG of the curves
(--out).
"""

import argparse
import csv
import json
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

from .nn import convert

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def load_digits(device="cpu"):
    """(train_x, train_y, test_x, test_y): the first 1,500 images for training, the rest for testing,
    pixels scaled to [0, 1]."""
    from sklearn.datasets import load_digits as sk_digits

    d = sk_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(d.target, dtype=torch.long)
    return x[:1500].to(device), y[:1500].to(device), x[1500:].to(device), y[1500:].to(device)


def digits_model():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),   # 8x8 -> 4x4
        nn.Conv2d(32, 32, 3, padding=1, groups=4), nn.ReLU(),   # grouped
        nn.Flatten(), nn.Linear(32 * 16, 10))


def _batches(n, batch, steps, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    while len(out) < steps:
        perm = torch.randperm(n, generator=g)
        out += [perm[i:i + batch] for i in range(0, n - batch + 1, batch)]
    return out[:steps]


def train_digits(use_mconv, steps=300, batch=64, lr=0.1, seed=0, device="cpu", rank=0, world=1):
    """Trains the digits CNN; returns (losses, test accuracy, final state_dict). With world > 1 (inside
    an initialised process group) each rank takes its slice of every global batch under DDP."""
    torch.manual_seed(seed)
    model = digits_model().to(device)
    if use_mconv:
        convert(model)
    net = model
    if world > 1:
        net = nn.parallel.DistributedDataParallel(model, device_ids=[rank] if device != "cpu" else None)
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    tx, ty, vx, vy = load_digits(device)
    losses = []
    for idx in _batches(len(tx), batch, steps, seed):
        idx = idx.chunk(world)[rank].to(device)
        loss = F.cross_entropy(net(tx[idx]), ty[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if world > 1:  # the global batch's loss, for curves comparable with one process
            loss = loss.detach().clone()
            torch.distributed.all_reduce(loss)
            loss /= world
        losses.append(float(loss.detach()))
    with torch.no_grad():
        acc = float((model(vx).argmax(1) == vy).float().mean())
    return losses, acc, {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def _ddp_worker(rank, world, backend, port, result_path, train_fn, kw):
    """One process of a data-parallel run: joins the group, trains on its device, rank 0 saves the result."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.distributed.init_process_group(backend, rank=rank, world_size=world)
    device = f"cuda:{rank}" if backend == "nccl" else "cpu"
    if backend == "nccl":
        torch.cuda.set_device(rank)
    try:
        out = train_fn(device=device, rank=rank, world=world, **kw)
        if rank == 0:
            torch.save(out, result_path)
    finally:
        torch.distributed.destroy_process_group()


def _spawn(train_fn, kw, world, backend, port, tmpdir):
    path = os.path.join(tmpdir, f"mconv_ddp_{train_fn.__name__}_{os.getpid()}.pt")
    torch.multiprocessing.spawn(_ddp_worker, args=(world, backend, port, path, train_fn, kw), nprocs=world)
    out = torch.load(path)
    os.remove(path)
    return out


def train_digits_ddp(use_mconv, world=2, backend="gloo", steps=300, port=29517, tmpdir="."):
    """The digits training under DistributedDataParallel with `world` processes; returns rank 0's
    (losses, accuracy, state)."""
    return _spawn(train_digits, dict(use_mconv=use_mconv, steps=steps), world, backend, port, tmpdir)


def max_param_diff(a, b):
    """The largest |a - b| over the parameters, relative to the largest |a|."""
    num = max(float((a[k] - b[k]).abs().max()) for k in a)
    den = max(float(a[k].abs().max()) for k in a)
    return num / den


def train_resnet18(use_mconv, dtype=torch.float32, steps=100, batch=64, seed=0, device="cuda", rank=0, world=1,
                   image=224, bn="train", snapshot=5):
    """A torchvision resnet18 (channels_last) on random data fixed by the seed, SGD with momentum; bf16 or
    fp16 under autocast with fp32 weights. `batch` is the global batch: with world > 1 (inside an
    initialised process group) each rank takes its slice under DistributedDataParallel. bn: "train"
    (batch statistics), "sync" (SyncBatchNorm: statistics over the global batch, so a data-parallel
    run computes what one process on the global batch does) or "frozen" (running statistics, for
    backends SyncBatchNorm does not run on, gloo). Returns (losses, median step ms, final state, state
    after `snapshot` steps)."""
    import torchvision

    torch.manual_seed(seed)
    model = torchvision.models.resnet18(num_classes=100)
    if bn == "sync":
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model = model.to(device).to(memory_format=torch.channels_last)
    if bn == "frozen":
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.eval()
    if use_mconv:
        convert(model)
    net = model
    if world > 1:
        net = nn.parallel.DistributedDataParallel(model, device_ids=[rank] if device != "cpu" else None)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 3, image, image, generator=g).chunk(world)[rank]
    y = torch.randint(0, 100, (batch,), generator=g).chunk(world)[rank]
    x = x.to(device).contiguous(memory_format=torch.channels_last)
    y = y.to(device)
    cuda = device != "cpu"
    losses, times = [], []

    def state_now():
        return {k: v.detach().float().cpu().clone() for k, v in model.state_dict().items() if v.is_floating_point()}

    early = None
    for step in range(steps):
        if cuda:
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
        else:
            c0 = time.perf_counter()
        with torch.autocast(torch.device(device).type, dtype=dtype, enabled=dtype != torch.float32):
            loss = F.cross_entropy(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if world > 1:
            loss = loss.detach().clone()
            torch.distributed.all_reduce(loss)
            loss /= world
        if cuda:
            t1.record()
            t1.synchronize()
            times.append(t0.elapsed_time(t1))
        else:
            times.append((time.perf_counter() - c0) * 1e3)
        losses.append(float(loss.detach()))
        if step + 1 == min(snapshot, steps):
            early = state_now()
    times = sorted(times[min(10, steps // 2):])
    return losses, times[len(times) // 2], state_now(), early


def train_resnet18_ddp(world=2, backend="nccl", port=29527, tmpdir=".", **kw):
    """train_resnet18 under DistributedDataParallel with `world` processes (one per GPU with nccl;
    SyncBatchNorm there, frozen statistics with gloo); returns rank 0's (losses, step ms, state)."""
    kw.setdefault("bn", "sync" if backend == "nccl" else "frozen")
    return _spawn(train_resnet18, kw, world, backend, port, tmpdir)


def _plot(curves, path, title):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, losses in curves.items():
        ax.plot(losses, label=name, linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m mconv.train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", choices=["digits", "resnet18"], default="digits")
    ap.add_argument("--steps", type=int, default=None, help="default: 300 (digits), 100 (resnet18)")
    ap.add_argument("--world", type=int, default=1, help="digits: DistributedDataParallel processes")
    ap.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    ap.add_argument("--dtype", default="fp32,bf16", help="resnet18: fp32, bf16, fp16 (autocast)")
    ap.add_argument("--batch", type=int, default=64, help="resnet18: the global batch")
    ap.add_argument("--image", type=int, default=224, help="resnet18: image size")
    ap.add_argument("--out", default=None, help="directory for CSV, JSON and PNG")
    a = ap.parse_args(argv)
    rows, curves = [], {}
    if a.task == "digits":
        steps = a.steps or 300
        device = "cuda" if a.backend == "nccl" or (a.world == 1 and torch.cuda.is_available()) else "cpu"
        ref_l, ref_acc, ref_state = train_digits(False, steps=steps, device=device)
        print(f"digits, {steps} steps, batch 64, {device}")
        for name, use_mconv, world in [("mconv", True, 1)] + ([(f"mconv DDP x{a.world}", True, a.world),
                                                                (f"nn.Conv2d DDP x{a.world}", False, a.world)]
                                                               if a.world > 1 else []):
            print(f"  training {name} ...", flush=True)
            if world > 1:
                losses, acc, state = train_digits_ddp(use_mconv, world=world, backend=a.backend, steps=steps)
            else:
                losses, acc, state = train_digits(use_mconv, steps=steps, device=device)
            curves[name] = losses
            rows.append({"run": name, "final_loss": losses[-1], "test_accuracy": acc,
                         "max_loss_diff_vs_nn": max(abs(u - v) for u, v in zip(losses, ref_l)),
                         "max_param_diff_vs_nn": max_param_diff(ref_state, state)})
        curves["nn.Conv2d"] = ref_l
        rows.insert(0, {"run": "nn.Conv2d", "final_loss": ref_l[-1], "test_accuracy": ref_acc,
                        "max_loss_diff_vs_nn": 0.0, "max_param_diff_vs_nn": 0.0})
    elif a.world == 1:
        steps = a.steps or 100
        device = "cuda" if torch.cuda.is_available() else "cpu"
        for dt in a.dtype.split(","):
            kw = dict(dtype=_DTYPES[dt], steps=steps, batch=a.batch, image=a.image, device=device)
            print(f"  resnet18 {dt}: nn.Conv2d, then mconv ...", flush=True)
            ref_l, ref_t, _, _ = train_resnet18(False, **kw)
            got_l, got_t, _, _ = train_resnet18(True, **kw)
            curves[f"nn.Conv2d {dt}"] = ref_l
            curves[f"mconv {dt}"] = got_l
            rows.append({"run": f"resnet18 {dt} b{a.batch}", "step_ms_torch": ref_t, "step_ms_mconv": got_t,
                         "torch_over_mconv": ref_t / got_t, "final_loss_torch": ref_l[-1],
                         "final_loss_mconv": got_l[-1],
                         "max_loss_diff": max(abs(u - v) for u, v in zip(ref_l, got_l))})
    else:
        # Data-parallel, for nn.Conv2d and mconv: one process on the global batch against `world`
        # processes under DDP with SyncBatchNorm (the same computation), parameters compared after 5
        # steps and after all of them; step times of DDP as users run it (batch statistics per
        # process) and the scaling efficiency t1 / (world * t_world) at the same global batch.
        steps = a.steps or 100
        cuda = a.backend == "nccl"
        for dt in a.dtype.split(","):
            for name, use_mconv in (("nn.Conv2d", False), ("mconv", True)):
                kw = dict(use_mconv=use_mconv, dtype=_DTYPES[dt], steps=steps, batch=a.batch, image=a.image)
                print(f"  resnet18 {dt} {name}: 1 process, then {a.world} ({a.backend}) ...", flush=True)
                one_l, one_t, one_s, one_5 = train_resnet18(device="cuda" if cuda else "cpu",
                                                            bn="train" if cuda else "frozen", **kw)
                same_l, _, same_s, same_5 = train_resnet18_ddp(world=a.world, backend=a.backend,
                                                               bn="sync" if cuda else "frozen", **kw)
                dist_t = train_resnet18_ddp(world=a.world, backend=a.backend, bn="train" if cuda else "frozen",
                                            **kw)[1]
                curves[f"{name} {dt} x1"] = one_l
                curves[f"{name} {dt} x{a.world}"] = same_l
                rows.append({"run": f"resnet18 {dt} {name}", "global_batch": a.batch, "step_ms_1": one_t,
                             f"step_ms_{a.world}": dist_t, "scaling_efficiency": one_t / (a.world * dist_t),
                             "param_diff_5_steps": max_param_diff(one_5, same_5) if steps > 5 else None,
                             f"param_diff_{steps}_steps": max_param_diff(one_s, same_s),
                             "max_loss_diff": max(abs(u - v) for u, v in zip(one_l, same_l)),
                             "final_loss": same_l[-1]})
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    keys = list(rows[0].keys())
    print("  ".join(f"{k:>20}" for k in keys))
    for r in rows:
        print("  ".join(f"{v:>20.6g}" if isinstance(v, float) else f"{'-' if v is None else v:>20}"
                        for v in r.values()))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        base = os.path.join(a.out, f"train_{a.task}" + (f"_x{a.world}_{a.backend}" if a.world > 1 else ""))
        with open(base + ".csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
        with open(base + ".json", "w") as f:
            json.dump({"rows": rows, "curves": curves}, f)
        _plot(curves, base + ".png", f"{a.task}: loss, nn.Conv2d vs mconv")
    return rows


if __name__ == "__main__":
    main()
