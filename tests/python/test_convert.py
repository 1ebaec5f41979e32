"""mconv.nn.Conv2d and mconv.convert on torchvision models: same outputs as the unconverted model."""

import copy

import pytest
import torch
from torch import nn

import mconv
from reference import relative_error

torchvision = pytest.importorskip("torchvision")

MODELS = ["resnet18", "mobilenet_v3_small", "resnext50_32x4d", "efficientnet_b0", "convnext_tiny"]


def build(name, device, seed=0):
    torch.manual_seed(seed)
    return torchvision.models.get_model(name, weights=None).eval().to(device)


@pytest.mark.parametrize("name", MODELS)
def test_converted_model_matches(device, name):
    model = build(name, device)
    converted = copy.deepcopy(model)
    report = mconv.convert(converted)
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(report.swapped) == len(convs) and not report.kept, str(report)
    assert all(type(m) is mconv.nn.Conv2d for m in converted.modules() if isinstance(m, nn.Conv2d))
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1)).to(device)
    ref, y = model(x), converted(x)
    # Dozens of layers in sequence, each within fp32 (or TF32 on the GPU, as the unconverted model).
    tol = 1e-4 if device == "cpu" or not torch.backends.cudnn.allow_tf32 else 2e-2
    assert relative_error(y, ref.double()) <= tol


def test_channels_last_bf16_model(cuda):
    model = build("resnet18", cuda).to(memory_format=torch.channels_last, dtype=torch.bfloat16)
    converted = copy.deepcopy(model)
    mconv.convert(converted)
    x = torch.randn(4, 3, 64, 64, device=cuda).to(memory_format=torch.channels_last, dtype=torch.bfloat16)
    assert relative_error(converted(x), model(x).double()) <= 3e-2


def test_state_dict_loads_into_a_converted_model():
    source = build("resnet18", "cpu", seed=5)
    target = build("resnet18", "cpu", seed=6)
    mconv.convert(target)
    assert list(target.state_dict()) == list(source.state_dict())
    target.load_state_dict(source.state_dict())
    x = torch.randn(1, 3, 32, 32)
    assert relative_error(target(x), source(x).double()) <= 1e-4


def test_report_says_what_was_kept_and_why():
    class Special(nn.Conv2d):
        pass

    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), Special(4, 4, 1),
                          nn.Conv2d(4, 4, 3).double(), nn.Conv2d(4, 8, 1, bias=False))
    report = mconv.convert(model)
    assert [n for n, _ in report.swapped] == ["0", "3"]
    assert "padding_mode='reflect'" in dict(report.swapped)["0"]
    kept = dict(report.kept)
    assert "subclass" in kept["1"] and "Special" in kept["1"]
    assert "torch.float64" in kept["2"]
    assert "2 Conv2d swapped, 2 kept" in str(report)


def test_reflect_padding_matches():
    torch.manual_seed(2)
    conv = nn.Conv2d(3, 5, 3, padding=2, padding_mode="reflect", dilation=2)
    x = torch.randn(2, 3, 9, 9)
    ref = conv(x)
    mconv.convert(conv)
    assert type(conv) is mconv.nn.Conv2d
    assert relative_error(conv(x), ref.double()) <= 1e-5


def test_conv2d_module_is_a_drop_in():
    torch.manual_seed(3)
    a = nn.Conv2d(6, 9, (3, 5), stride=(2, 1), padding=(1, 2), dilation=1, groups=3)
    b = mconv.nn.Conv2d(6, 9, (3, 5), stride=(2, 1), padding=(1, 2), dilation=1, groups=3, activation="relu")
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 6, 11, 13)
    assert relative_error(b(x), torch.relu(a(x)).double()) <= 1e-5
    assert "activation='relu'" in repr(b)


def test_compiled_converted_model_has_no_graph_break(device):
    model = build("resnet18", device)
    mconv.convert(model)
    x = torch.randn(2, 3, 64, 64, device=device)
    backend = "inductor" if device == "cuda" else "aot_eager"
    compiled = torch.compile(model, fullgraph=True, backend=backend)  # a graph break raises
    # Inductor fuses the layers between the convolutions in its own order, and on the GPU its kernels
    # (the fc matmul among them) may take TF32: 3.3e-4 was measured with cuDNN's TF32 flag off.
    tol = 1e-4 if device == "cpu" else 2e-3
    assert relative_error(compiled(x), model(x).double()) <= tol
