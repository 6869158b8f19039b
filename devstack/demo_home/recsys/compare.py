"""Compare a data-parallel training run with the one-worker run of the same model: the speed-up and the accuracy.

    python -u compare.py --one DIR --many DIR [--max-auc-gap 0.01]

Reads the ``metrics.json`` train_dp.py wrote in each model directory, prints both runs' training time and
validation AUC and the speed-up, and exits 1 when the AUCs differ by more than ``--max-auc-gap``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from demo_lib import say


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--one", required=True, help="model directory of the one-worker run")
    ap.add_argument("--many", required=True, help="model directory of the data-parallel run")
    ap.add_argument("--max-auc-gap", type=float, default=0.01)
    args = ap.parse_args(argv)
    with open(os.path.join(args.one, "metrics.json")) as f:
        one = json.load(f)
    with open(os.path.join(args.many, "metrics.json")) as f:
        many = json.load(f)
    gap = abs(one["val_auc"] - many["val_auc"])
    say(f"1 worker: {one['train_seconds']:.1f} s, validation AUC {one['val_auc']:.4f}")
    say(f"{many['workers']} workers: {many['train_seconds']:.1f} s, validation AUC {many['val_auc']:.4f}")
    say(f"speed-up on {many['workers']} workers: {one['train_seconds'] / many['train_seconds']:.2f}x; "
        f"AUC difference {gap:.4f} (at most {args.max_auc_gap})")
    return 0 if gap <= args.max_auc_gap else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
