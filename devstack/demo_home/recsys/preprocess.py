"""Make the day's features: generated click data (numpy, a seed from the date; nothing downloaded).

    python -u preprocess.py --date 2026-12-03 --out DIR [--samples 20000]

Writes ``train.npz`` and ``val.npz`` (arrays ``x``, ``y``) into ``--out``, for train.py's ``--features``.
"""

from __future__ import annotations

import argparse
import os
import sys
import zlib

from demo_lib import make_data, save_npz, say


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--date", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", type=int, default=20000)
    args = ap.parse_args(argv)
    seed = zlib.crc32(args.date.encode())
    say(f"preprocess {args.date}: generating {args.samples} rows (seed {seed})")
    x, y = make_data(seed, args.samples)
    vx, vy = make_data(seed + 1, max(args.samples // 5, 1))
    say(f"click rate {y.mean():.3f} in training, {vy.mean():.3f} in validation")
    save_npz(os.path.join(args.out, "train.npz"), x=x, y=y)
    save_npz(os.path.join(args.out, "val.npz"), x=vx, y=vy)
    say(f"wrote {args.out}/train.npz ({len(y)} rows) and val.npz ({len(vy)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
