"""Train the demo's click model (numpy only): a one-hidden-layer network, minibatch SGD, a fixed seed.

    python -u train.py --features DIR --epochs 3 --model-out DIR [--tensorboard DIR] [--hidden 64]
                       [--batch-size 256] [--lr 0.1] [--seed 7] [--samples N] [--throttle SECONDS]

Reads the features preprocess.py wrote (without ``--features`` it generates ``--samples`` rows itself), prints
progress lines as it goes, and writes ``model.npz`` and ``metrics.json`` into ``--model-out`` and TensorBoard
scalars (loss, validation AUC) into ``--tensorboard``.

Losing no work (Skiff's checkpoint env, docs/user-guide.md): with ``SKIFF_CHECKPOINT_DIR`` set it saves a
checkpoint there after every epoch, and on SIGTERM (a preemption, the task being stopped) it saves where it is,
mid-epoch, and exits 143; started again with a checkpoint there it resumes from it. Batch order comes from
(seed, epoch), so a resumed run ends with exactly the model an uninterrupted run ends with (the same
``model_sha256``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

from demo_lib import (
    EventWriter,
    auc,
    forward,
    init_params,
    make_data,
    np,
    params_sha256,
    report_gpu_load,
    save_json,
    save_npz,
    say,
    sgd_step,
)

CHECKPOINT = "checkpoint.npz"
stop_requested = False


def on_sigterm(signum, frame) -> None:
    global stop_requested
    stop_requested = True  # acted on between two batches: the parameters are never half-updated


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features", help="directory with preprocess.py's train.npz and val.npz")
    ap.add_argument("--samples", type=int, default=20000, help="rows to generate when --features is not given")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--model-out", required=True)
    ap.add_argument("--tensorboard", help="TensorBoard log directory (default: <model-out>/tensorboard)")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--log-every", type=int, default=20, help="a progress line every N batches")
    ap.add_argument("--throttle", type=float, default=0.0, help="seconds to pause after each batch (to watch it)")
    return ap.parse_args(argv)


def load_data(args) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if args.features:
        with np.load(os.path.join(args.features, "train.npz")) as t, np.load(os.path.join(args.features, "val.npz")) as v:
            say(f"reading features from {args.features}: {len(t['y'])} training rows, {len(v['y'])} validation rows")
            return t["x"], t["y"], v["x"], v["y"]
    say(f"no --features: generating {args.samples} rows (seed {args.seed})")
    x, y = make_data(args.seed, args.samples)
    vx, vy = make_data(args.seed + 1, max(args.samples // 5, 1))
    return x, y, vx, vy


def memory_limit() -> str:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = open(path).read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 50:
            return f"{int(text) / 2**30:.2f} GiB"
    return "unknown"


def load_checkpoint(directory: str | None):
    path = os.path.join(directory, CHECKPOINT) if directory else None
    if not path or not os.path.exists(path):
        return None
    with np.load(path) as z:
        meta = json.loads(str(z["meta"]))
        return meta, {k: z[k].copy() for k in z.files if k != "meta"}


def save_checkpoint(directory: str | None, params: dict, meta: dict) -> None:
    if directory:
        save_npz(os.path.join(directory, CHECKPOINT), meta=np.array(json.dumps(meta)), **params)


def main(argv: list[str]) -> int:
    args = parse(argv)
    signal.signal(signal.SIGTERM, on_sigterm)
    ckpt_dir = os.environ.get("SKIFF_CHECKPOINT_DIR") or None
    say(f"train.py: try {os.environ.get('SKIFF_TRY_NUMBER', '?')}, resume={os.environ.get('SKIFF_RESUME', '0')}, "
        f"preemptions={os.environ.get('SKIFF_PREEMPTIONS', '0')}, checkpoints in {ckpt_dir or '(none)'}, "
        f"memory limit {memory_limit()}")
    x, y, vx, vy = load_data(args)
    batches = -(-len(y) // args.batch_size)
    need = args.batch_size * args.hidden * 8 * 3 / 2**30
    say(f"model: {x.shape[1]} features -> {args.hidden} hidden -> 1; batch {args.batch_size}: about {need:.2f} GiB "
        f"of activations and gradients per batch")

    saved = load_checkpoint(ckpt_dir)
    if saved:
        meta, params = saved
        say(f"resuming from the checkpoint at epoch {meta['epoch'] + 1} batch {meta['batch']} "
            f"({os.path.join(ckpt_dir, CHECKPOINT)})")
    else:
        meta, params = {"epoch": 0, "batch": 0, "loss_sum": 0.0, "history": []}, init_params(args.seed, args.hidden)
    meta["resumed"] = meta.get("resumed", 0) + (1 if saved else 0)
    tb = EventWriter(args.tensorboard or os.path.join(args.model_out, "tensorboard"))

    report_gpu_load(90)  # busy while it trains (kubesim's simulated dcgm-exporter reads it; see demo_lib)
    for epoch in range(meta["epoch"], args.epochs):
        order = np.random.default_rng([args.seed, epoch]).permutation(len(y))
        for batch in range(meta["batch"] if epoch == meta["epoch"] else 0, batches):
            if stop_requested:
                meta.update(epoch=epoch, batch=batch)
                save_checkpoint(ckpt_dir, params, meta)
                say(f"SIGTERM: saved a checkpoint at epoch {epoch + 1} batch {batch} "
                    f"{'to ' + ckpt_dir if ckpt_dir else '(no SKIFF_CHECKPOINT_DIR: nothing saved)'}; exiting")
                return 143
            rows = order[batch * args.batch_size:(batch + 1) * args.batch_size]
            meta["loss_sum"] += sgd_step(params, x[rows], y[rows], args.lr) * len(rows)
            if (batch + 1) % args.log_every == 0 or batch + 1 == batches:
                say(f"epoch {epoch + 1}/{args.epochs} batch {batch + 1}/{batches} "
                    f"loss {meta['loss_sum'] / min((batch + 1) * args.batch_size, len(y)):.4f}")
            if args.throttle:
                time.sleep(args.throttle)
        _, p = forward(params, vx)
        entry = {"epoch": epoch + 1, "loss": meta["loss_sum"] / len(y), "val_auc": auc(vy, p)}
        meta.update(epoch=epoch + 1, batch=0, loss_sum=0.0, history=meta["history"] + [entry])
        save_checkpoint(ckpt_dir, params, meta)
        tb.scalars(epoch + 1, {"loss": entry["loss"], "val_auc": entry["val_auc"]})
        say(f"epoch {epoch + 1}/{args.epochs} done: loss {entry['loss']:.4f}, validation AUC {entry['val_auc']:.4f}"
            + (" (checkpoint saved)" if ckpt_dir else ""))

    digest = params_sha256(params)
    save_npz(os.path.join(args.model_out, "model.npz"), **params)
    save_json(os.path.join(args.model_out, "metrics.json"), {
        "epochs": meta["history"], "val_auc": meta["history"][-1]["val_auc"] if meta["history"] else None,
        "model_sha256": digest, "features": args.features, "seed": args.seed, "hidden": args.hidden,
        "resumed": meta["resumed"], "preemptions": int(os.environ.get("SKIFF_PREEMPTIONS") or 0)})
    say(f"wrote {args.model_out}/model.npz (sha256 of the parameters {digest[:16]}...), metrics.json and "
        f"TensorBoard events in {os.path.dirname(tb.path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
