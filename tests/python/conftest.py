"""Shared fixtures: the devices the tests run on (the CPU always, CUDA where mconv and torch see a GPU)."""

import pytest
import torch

import mconv

DEVICES = ["cpu"] + (["cuda"] if mconv.cuda_available() and torch.cuda.is_available() else [])


def pytest_report_header(config):
    return f"mconv {mconv.__version__}, torch {torch.__version__}, devices: {', '.join(DEVICES)}"


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture
def cuda():
    if "cuda" not in DEVICES:
        pytest.skip("no GPU visible to mconv and torch")
    return "cuda"


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield
