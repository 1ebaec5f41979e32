"""Training shown: the digits CNN trained with nn.Conv2d and after mconv.convert from one seed (loss
curves agree, test accuracy reported), and the same under DistributedDataParallel with 2 CPU
processes (gloo), whose final parameters equal one process on the whole batch."""

import pytest
import torch

from mconv import train

pytest.importorskip("sklearn", reason="the digits dataset ships with scikit-learn")

STEPS = 200


@pytest.fixture(scope="module")
def plain():
    with torch.enable_grad():
        return train.train_digits(False, steps=STEPS)


def test_digits_trains_like_nn_conv2d(plain):
    ref_losses, ref_acc, ref_state = plain
    with torch.enable_grad():
        losses, acc, state = train.train_digits(True, steps=STEPS)
    print(f"\ndigits {STEPS} steps: test accuracy nn.Conv2d {ref_acc:.4f}, mconv {acc:.4f}; "
          f"final loss {ref_losses[-1]:.4f} vs {losses[-1]:.4f}")
    # The curves agree to ~1e-7 over the first steps; fp32 sums in another order (mconv's and the
    # CPU library's, which depend on the machine's thread count) then drift apart as training goes
    # on, as two cuDNN algorithms would (max 4e-3 by step 200 on a 2-core machine, 3e-2 on a
    # 16-core one). So: the first 20 steps exactly, then the trend, the accuracy, and the parameters
    # after 20 steps.
    assert max(abs(a - b) for a, b in zip(losses[:20], ref_losses[:20])) < 1e-5
    tail, ref_tail = sum(losses[-50:]) / 50, sum(ref_losses[-50:]) / 50
    assert abs(tail - ref_tail) < 0.1 * ref_tail + 1e-3
    assert acc > 0.9 and abs(acc - ref_acc) <= 0.03
    with torch.enable_grad():
        _, _, early_ref = train.train_digits(False, steps=20)
        _, _, early = train.train_digits(True, steps=20)
    assert train.max_param_diff(early_ref, early) < 1e-5


def test_digits_data_parallel_equals_one_process(tmp_path):
    steps = 30  # before fp32's reordered sums drift apart (see above)
    with torch.enable_grad():
        one_losses, _, one_state = train.train_digits(True, steps=steps)
    losses, acc, state = train.train_digits_ddp(True, world=2, backend="gloo", steps=steps, tmpdir=str(tmp_path))
    print(f"\ndigits DDP x2 (gloo), {steps} steps: test accuracy {acc:.4f}, parameter difference to one process "
          f"{train.max_param_diff(one_state, state):.2e}")
    assert train.max_param_diff(one_state, state) < 1e-4
    assert max(abs(a - b) for a, b in zip(losses, one_losses)) < 1e-4


def test_resnet18_data_parallel_gloo_equals_one_process(tmp_path):
    # The script of the multi-GPU run (python -m mconv.train --task resnet18 --world 2), on 2 CPU
    # processes over gloo: small images and a few steps, batch-norm statistics frozen (SyncBatchNorm
    # needs a GPU backend).
    pytest.importorskip("torchvision")
    kw = dict(use_mconv=True, steps=3, batch=8, image=32, snapshot=1)
    with torch.enable_grad():
        one_l, _, one_s, one_1 = train.train_resnet18(device="cpu", bn="frozen", **kw)
    dist_l, _, dist_s, dist_1 = train.train_resnet18_ddp(world=2, backend="gloo", port=29531, tmpdir=str(tmp_path),
                                                         **kw)
    assert train.max_param_diff(one_1, dist_1) < 1e-6
    assert train.max_param_diff(one_s, dist_s) < 1e-5
    assert max(abs(a - b) for a, b in zip(one_l, dist_l)) < 1e-4
