"""Check the day's model on the validation rows train.py was given; fail the step below ``--min-auc``.

    python -u evaluate.py --model DIR [--min-auc 0.70]

Reads ``model.npz`` and ``metrics.json`` from ``--model`` (train.py's ``--model-out``), the validation rows from
the features directory ``metrics.json`` names, and writes ``evaluation.json`` beside the model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from demo_lib import auc, forward, make_data, np, params_sha256, save_json, say


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--min-auc", type=float, default=0.70)
    args = ap.parse_args(argv)
    with open(os.path.join(args.model, "metrics.json")) as f:
        metrics = json.load(f)
    with np.load(os.path.join(args.model, "model.npz")) as z:
        params = {k: z[k] for k in z.files}
    if params_sha256(params) != metrics["model_sha256"]:
        say(f"model.npz in {args.model} is not the model metrics.json describes")
        return 2
    if metrics.get("features"):
        with np.load(os.path.join(metrics["features"], "val.npz")) as v:
            vx, vy = v["x"], v["y"]
    else:
        vx, vy = make_data(metrics["seed"] + 1, 4000)
    _, p = forward(params, vx)
    score = auc(vy, p)
    passed = score >= args.min_auc
    save_json(os.path.join(args.model, "evaluation.json"), {"val_auc": score, "min_auc": args.min_auc,
                                                            "passed": passed, "rows": int(len(vy))})
    say(f"validation AUC {score:.4f} on {len(vy)} rows (minimum {args.min_auc}): {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
