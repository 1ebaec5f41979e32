# How cuDNN and cuBLAS convert fp32 operands in TF32 math, on a GPU machine with PyTorch (not part of
# CI): each TF32 result is compared with the exact (float64) result of the unconverted inputs, of
# the inputs rounded to TF32 (to nearest, ties away: cvt.rna) and of the inputs truncated to TF32
# (the low 13 bits dropped, which is what wgmma does to raw fp32 bits). "err" is the norm of the
# difference over the reference's norm; "scale-1" is the least-squares scale of the result against
# the reference, less 1 (truncation shrinks every product: a rounded result sits about 7e-4 above
# the truncated inputs' exact result).
#   usage: python3 scripts/tf32_rounding_probe.py
import torch, torch.nn.functional as F
torch.manual_seed(1)
torch.backends.cudnn.allow_tf32 = True
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.benchmark = True
def rna(t):
    i = t.contiguous().view(torch.int32)
    return ((i + 0x1000) & ~0x1FFF).view(torch.float32)
def rz(t):
    i = t.contiguous().view(torch.int32)
    return (i & ~0x1FFF).view(torch.float32)
def report(name, y, f):
    y = y.double()
    out = [name]
    for tag, conv in (("exact", lambda a: a.double()), ("rna", lambda a: rna(a).double()), ("rz", lambda a: rz(a).double())):
        r = f(conv)
        e = (y - r).norm() / r.norm()
        scale = (y * r).sum() / (r * r).sum() - 1
        out.append(f"{tag}: err {e:.3e} scale-1 {scale:+.2e}")
    print(" | ".join(out), flush=True)
for (n, c, k, h, rs, st) in [(32, 256, 256, 14, 3, 1), (32, 64, 256, 56, 1, 1), (16, 128, 128, 28, 3, 2), (32, 512, 2048, 7, 1, 1)]:
    x = torch.randn(n, c, h, h, device="cuda")
    w = torch.randn(k, c, rs, rs, device="cuda")
    for layout in ("nchw", "nhwc"):
        xl = x if layout == "nchw" else x.to(memory_format=torch.channels_last)
        wl = w if layout == "nchw" else w.to(memory_format=torch.channels_last)
        for _ in range(3): y = F.conv2d(xl, wl, padding=rs // 2, stride=st)
        torch.cuda.synchronize()
        report(f"conv n{n} c{c} k{k} h{h} r{rs} s{st} {layout}", y,
               lambda cv: F.conv2d(cv(x), cv(w), padding=rs // 2, stride=st))
a = torch.randn(4096, 4096, device="cuda"); b = torch.randn(4096, 4096, device="cuda")
report("matmul 4096", a @ b, lambda cv: cv(a) @ cv(b))
