#!/usr/bin/env bash
# Data-parallel training of a converted torchvision resnet18 in one call: one process on the global
# batch, then one process per device under DistributedDataParallel, for nn.Conv2d and for mconv, in
# fp32 and under bf16 autocast; parameters compared (SyncBatchNorm, after 5 steps and after all), step
# times of DDP with per-process batch statistics and the scaling efficiency reported.
#   scripts/train_ddp.sh [OUT]            NCCL, one process per GPU (at least 2 visible), 224x224, 100 steps
#   BACKEND=gloo scripts/train_ddp.sh     2 CPU processes: 32x32 images, 3 steps (what CI runs, in pytest)
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1).
set -euo pipefail
OUT=${1:-train-ddp-out}
BACKEND=${BACKEND:-nccl}
PYTHON=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
if [ "$BACKEND" = nccl ]; then
  "$PYTHON" -m mconv.train --task resnet18 --world "${WORLD:-2}" --backend nccl --dtype "${DTYPES:-fp32,bf16}" \
    --steps "${STEPS:-100}" --batch "${BATCH:-64}" --out "$OUT"
else
  "$PYTHON" -m mconv.train --task resnet18 --world 2 --backend gloo --dtype fp32 --steps "${STEPS:-3}" --batch 8 \
    --image 32 --out "$OUT"
fi
