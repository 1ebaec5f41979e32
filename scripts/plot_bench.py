#!/usr/bin/env python3
"""Per-layer ratio bars (cuDNN time / mconv time, >1 = mconv faster) for every suite CSV in a folder."""
import csv
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(folder: str) -> None:
    for path in sorted(pathlib.Path(folder).glob("*.csv")):
        if path.name.endswith(".rows.csv"):  # the rows written as they finished: the same data
            continue
        rows = list(csv.DictReader(open(path)))
        if not rows or not rows[0].get("ratio_fastest"):
            continue
        names = [r["name"] for r in rows]
        fast = [float(r["ratio_fastest"] or 0) for r in rows]
        matched = [float(r["ratio_matched"] or 0) for r in rows]
        fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(rows)), 4.5))
        x = range(len(rows))
        ax.bar([i - 0.2 for i in x], matched, 0.4, label="vs cuDNN memory-matched (<= 64 KiB)")
        ax.bar([i + 0.2 for i in x], fast, 0.4, label="vs cuDNN fastest (any workspace)")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, rotation=70, ha="right", fontsize=7)
        ax.set_ylabel("cuDNN time / mconv time")
        algos = ", ".join(sorted({r["algorithm"] for r in rows}))  # what Auto picked on this suite
        # The suite's name carries its precision (resnet50_NHWC_bf16); cuDNN runs the same one.
        tokens = rows[0].get("suite", "").split("_")
        precision = next((t for t in ("tf32", "fp16", "bf16") if t in tokens), "fp32")
        peer = "FFMA" if precision == "fp32" else "the same precision"
        ax.set_title(f"{path.stem}: mconv (Auto: {algos}) {precision} vs cuDNN ({peer})", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path.with_suffix(".png"), dpi=110)
        print("wrote", path.with_suffix(".png"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bench/results")
