"""Train the demo's click model data-parallel on N workers (numpy and the standard library only).

    python -u train_dp.py --features DIR --epochs 3 --model-out DIR [--hidden 64] [--batch-size 256] [--lr 0.1]
                          [--seed 7] [--samples N] [--throttle SECONDS]

Run by a Skiff step with ``workers=N`` (docs/user-guide.md): each worker reads its rank and rank 0's address from
``SKIFF_RANK``, ``SKIFF_WORKERS``, ``SKIFF_MASTER_ADDR`` and ``SKIFF_MASTER_PORT``. Every minibatch is split
across the workers (worker r takes rows r, r+N, ...); each computes the gradient of its shard, the workers
exchange them over TCP (rank 0 adds them up and sends the sum back: an all-reduce through rank 0), and every
worker applies the same full-batch update, so the model is the one-worker model (up to the order of float
additions). Rank 0 writes the checkpoint (after each epoch, in ``SKIFF_CHECKPOINT_DIR``, which every rank sees),
``model.npz`` and ``metrics.json`` (with the training time, for ``compare.py``). With one worker it trains alone.

Preempted (SIGTERM to every rank: Kueue suspends the Job, the Job controller deletes its pods), a rank says so and
exits 143; Skiff's retry or Kueue's readmission starts the whole gang again and every rank resumes after the last
epoch rank 0 saved: batch order comes from (seed, epoch), so the model is exactly the uninterrupted run's.

``--throttle`` stands in for the accelerator time of a real model: each worker pauses that long per full batch
times its share of the rows, so N workers share it; numpy on this tiny model is itself too fast to gain from it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time

from demo_lib import auc, forward, init_params, make_data, np, params_sha256, save_json, save_npz, say

CHECKPOINT = "checkpoint_dp.npz"
KEYS = ("w1", "b1", "w2", "b2")


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--features", help="directory with preprocess.py's train.npz and val.npz")
    ap.add_argument("--samples", type=int, default=20000, help="rows to generate when --features is not given")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--model-out", required=True)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--throttle", type=float, default=0.0, help="seconds of simulated compute per full batch")
    return ap.parse_args(argv)


def gradient(params: dict, x: np.ndarray, y: np.ndarray, batch: int) -> tuple[np.ndarray, float]:
    """The shard's part of the full batch's gradient (divided by the full batch size), flat, and its loss sum."""
    h, p = forward(params, x)
    eps = 1e-12
    loss_sum = float(-np.sum(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps)))
    g = (p - y) / batch
    gh = np.outer(g, params["w2"]) * (h > 0)
    grads = {"w1": x.T @ gh, "b1": gh.sum(axis=0), "w2": h.T @ g, "b2": g.sum(keepdims=True)}
    return np.concatenate([grads[k].ravel() for k in KEYS]), loss_sum


def apply(params: dict, flat: np.ndarray, lr: float) -> None:
    at = 0
    for k in KEYS:
        n = params[k].size
        params[k] -= lr * flat[at:at + n].reshape(params[k].shape)
        at += n


def recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("a worker went away")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class AllReduce:
    """Sums a float64 vector over the workers through rank 0 (star): the others send theirs and get the sum."""

    def __init__(self, rank: int, workers: int, master: str, port: int):
        self.rank, self.workers, self.peers, self.sock = rank, workers, [], None
        if workers == 1:
            return
        if rank == 0:
            # its own address (the name resolves to this pod): on kubesim a wildcard bind would take the peers'
            server = socket.create_server((socket.gethostbyname(master), port))
            while len(self.peers) < workers - 1:
                conn, _ = server.accept()
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.sendall(b"R")      # the hello: a worker knows it reached rank 0 itself
                self.peers.append(conn)
            server.close()
            say(f"rank 0: all {workers} workers connected")
            return
        deadline = time.time() + 120
        while True:     # the workers start seconds apart: rank 0's name and port appear when it is up
            try:
                self.sock = socket.create_connection((master, port), timeout=120)
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.sock.recv(1) == b"R":   # a connection closed at once: rank 0 is not listening yet
                    break
                self.sock.close()
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        say(f"rank {rank}: connected to rank 0 at {master}:{port}")

    def sum(self, vec: np.ndarray) -> np.ndarray:
        if self.workers == 1:
            return vec
        size = vec.nbytes
        if self.rank == 0:
            total = vec.copy()
            for peer in self.peers:
                total += np.frombuffer(recv_exact(peer, size), dtype=np.float64)
            data = total.tobytes()
            for peer in self.peers:
                peer.sendall(data)
            return total
        self.sock.sendall(vec.astype(np.float64).tobytes())
        return np.frombuffer(recv_exact(self.sock, size), dtype=np.float64).copy()


def load_data(args):
    if args.features:
        with np.load(os.path.join(args.features, "train.npz")) as t, np.load(os.path.join(args.features, "val.npz")) as v:
            return t["x"], t["y"], v["x"], v["y"]
    x, y = make_data(args.seed, args.samples)
    vx, vy = make_data(args.seed + 1, max(args.samples // 5, 1))
    return x, y, vx, vy


def main(argv: list[str]) -> int:
    args = parse(argv)
    rank, workers = int(os.environ.get("SKIFF_RANK", "0")), int(os.environ.get("SKIFF_WORKERS", "1"))

    def on_sigterm(signum, frame) -> None:
        say(f"rank {rank}: SIGTERM: stopping; the gang resumes from rank 0's last checkpoint")
        os._exit(143)   # at once, mid-exchange: the other ranks stop too, and a half-written checkpoint never lands
    signal.signal(signal.SIGTERM, on_sigterm)
    master, port = os.environ.get("SKIFF_MASTER_ADDR", "127.0.0.1"), int(os.environ.get("SKIFF_MASTER_PORT", "29500"))
    ckpt_dir = os.environ.get("SKIFF_CHECKPOINT_DIR") or None
    say(f"train_dp.py: rank {rank} of {workers} workers, rank 0 at {master}:{port}")
    x, y, vx, vy = load_data(args)
    reduce = AllReduce(rank, workers, master, port)
    params, start_epoch, history = init_params(args.seed, args.hidden), 0, []
    path = os.path.join(ckpt_dir, CHECKPOINT) if ckpt_dir else None
    if path and os.path.exists(path):       # every rank resumes from what rank 0 saved
        with np.load(path) as z:
            meta = json.loads(str(z["meta"]))
            params = {k: z[k].copy() for k in KEYS}
        start_epoch, history = meta["epoch"], meta["history"]
        say(f"rank {rank}: resuming after epoch {start_epoch} from {path}")
    resumed_after = start_epoch
    batches = -(-len(y) // args.batch_size)
    started = time.monotonic()
    for epoch in range(start_epoch, args.epochs):
        order = np.random.default_rng([args.seed, epoch]).permutation(len(y))
        loss_sum = 0.0
        for batch in range(batches):
            rows = order[batch * args.batch_size:(batch + 1) * args.batch_size]
            mine = rows[rank::workers]
            flat, loss = gradient(params, x[mine], y[mine], len(rows))
            if args.throttle:
                time.sleep(args.throttle * len(mine) / len(rows))
            total = reduce.sum(np.append(flat, loss))
            apply(params, total[:-1], args.lr)
            loss_sum += total[-1]
        _, p = forward(params, vx)
        history.append({"epoch": epoch + 1, "loss": loss_sum / len(y), "val_auc": auc(vy, p)})
        say(f"rank {rank}: epoch {epoch + 1}/{args.epochs} loss {history[-1]['loss']:.4f}, "
            f"validation AUC {history[-1]['val_auc']:.4f}")
        if rank == 0 and ckpt_dir:
            save_npz(path, meta=np.array(json.dumps({"epoch": epoch + 1, "history": history})), **params)
    seconds = time.monotonic() - started
    if rank == 0:
        digest = params_sha256(params)
        save_npz(os.path.join(args.model_out, "model.npz"), **params)
        save_json(os.path.join(args.model_out, "metrics.json"), {
            "epochs": history, "val_auc": history[-1]["val_auc"] if history else None, "model_sha256": digest,
            "workers": workers, "train_seconds": seconds, "seed": args.seed, "hidden": args.hidden,
            "resumed_after_epoch": resumed_after, "preemptions": int(os.environ.get("SKIFF_PREEMPTIONS") or 0)})
        say(f"rank 0: trained on {workers} worker(s) in {seconds:.1f} s; wrote {args.model_out}/model.npz")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
