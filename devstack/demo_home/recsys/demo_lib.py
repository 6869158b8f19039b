"""Shared by the demo's preprocess.py, train.py and evaluate.py (in alice's home volume at /root/recsys).

numpy only: synthetic click data generated from a seed (nothing downloaded), a one-hidden-layer network, files
written atomically (a SIGKILL mid-write never leaves half a checkpoint), and a TensorBoard event writer small
enough to read: TensorBoard's ``events.out.tfevents.*`` files are TFRecords (``tensorflow/core/lib/io/record_writer.cc``:
length, masked CRC-32C of the length, data, masked CRC-32C of the data) of ``Event`` protos
(``tensorflow/core/util/event.proto``: wall_time = 1 double, step = 2 int64, file_version = 3 string,
summary = 5) holding ``Summary.Value`` scalars (``tensorflow/core/framework/summary.proto``: tag = 1 string,
simple_value = 2 float), encoded here by hand so the demo needs no TensorFlow.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import struct
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread: deterministic sums, fair on a shared machine
import numpy as np  # noqa: E402

FEATURES = 32


def say(*parts) -> None:
    print(*parts, flush=True)  # a line reaches the task log as soon as it is printed


# ---- data ---------------------------------------------------------------------------------------------------------
def make_data(seed: int, samples: int) -> tuple[np.ndarray, np.ndarray]:
    """Clicks from a hidden logistic rule over 32 features (the same rule for every seed's samples)."""
    truth = np.random.default_rng(0).normal(size=FEATURES)
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, FEATURES))
    logits = x @ truth + 0.5 * np.sin(3 * x[:, 0]) + rng.normal(scale=0.5, size=samples)
    return x, (logits > 0).astype(np.float64)


# ---- the model ----------------------------------------------------------------------------------------------------
def init_params(seed: int, hidden: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"w1": rng.normal(scale=1 / np.sqrt(FEATURES), size=(FEATURES, hidden)), "b1": np.zeros(hidden),
            "w2": rng.normal(scale=1 / np.sqrt(hidden), size=hidden), "b2": np.zeros(1)}


def forward(params: dict, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    h = np.maximum(x @ params["w1"] + params["b1"], 0.0)
    return h, 1.0 / (1.0 + np.exp(-(h @ params["w2"] + params["b2"][0])))


def sgd_step(params: dict, x: np.ndarray, y: np.ndarray, lr: float) -> float:
    """One minibatch of plain SGD on the log loss; returns the batch's loss."""
    h, p = forward(params, x)
    eps = 1e-12
    loss = float(-np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps)))
    g = (p - y) / len(y)
    gh = np.outer(g, params["w2"]) * (h > 0)
    params["w2"] -= lr * (h.T @ g)
    params["b2"] -= lr * g.sum(keepdims=True)
    params["w1"] -= lr * (x.T @ gh)
    params["b1"] -= lr * gh.sum(axis=0)
    return loss


def auc(y: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve by ranks (Mann-Whitney U), ties averaged."""
    order = np.argsort(score, kind="mergesort")
    ranks = np.empty(len(score))
    ranks[order] = np.arange(1, len(score) + 1)
    for value in np.unique(score[np.diff(np.sort(score), prepend=np.nan) == 0]):
        ranks[score == value] = ranks[score == value].mean()
    pos = y == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / max(n_pos * n_neg, 1))


def params_sha256(params: dict) -> str:
    digest = hashlib.sha256()
    for name in sorted(params):
        digest.update(name.encode() + np.ascontiguousarray(params[name], dtype=np.float64).tobytes())
    return digest.hexdigest()


# ---- files ---------------------------------------------------------------------------------------------------------
def atomic_write(path: str, write) -> None:
    """``write(file)`` into a temporary file beside ``path``, then rename it over ``path``. The temporary name is
    random, not the pid: two steps writing the same output at once (a scheduled and a manual run of one day)
    run in pods of their own, where both processes can be pid 3, and one would rename the other's file away."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp-", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # what open() gives under the usual umask, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def save_npz(path: str, **arrays) -> None:
    atomic_write(path, lambda f: np.savez(f, **arrays))


def save_json(path: str, value) -> None:
    atomic_write(path, lambda f: f.write(json.dumps(value, indent=2, sort_keys=True).encode() + b"\n"))


# ---- the GPU's load, on the demo's cluster --------------------------------------------------------------------------
GPU_LOAD_FILE = "/tmp/kubesim-gpu-util"  # kubesim/kubelet/stats.py GPU_UTIL_FILE, in the container's own /tmp


def report_gpu_load(percent: float) -> None:
    """The demo's model computes on the CPU (numpy), so a GPU it holds would read 0 %. On the demo's cluster kubesim
    simulates dcgm-exporter: a process that holds a GPU states its utilisation by writing the percent here, and the
    dashboard's GPU panels show it (docs/operations.md). On a real GPU node dcgm-exporter measures the device and
    nothing reads this file. Only for a process given a GPU (CUDA_VISIBLE_DEVICES set)."""
    if not os.environ.get("CUDA_VISIBLE_DEVICES"):
        return
    with contextlib.suppress(OSError):
        atomic_write(GPU_LOAD_FILE, lambda f: f.write(f"{percent:g}\n".encode()))


# ---- TensorBoard events -----------------------------------------------------------------------------------------
def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    return _varint(number << 3 | wire) + payload


def _bytes_field(number: int, data: bytes) -> bytes:
    return _field(number, 2, _varint(len(data)) + data)


def event_bytes(wall_time: float, step: int, *, file_version: str | None = None,
                scalars: dict[str, float] | None = None) -> bytes:
    body = _field(1, 1, struct.pack("<d", wall_time)) + _field(2, 0, _varint(step))
    if file_version is not None:
        body += _bytes_field(3, file_version.encode())
    if scalars:
        values = b"".join(_bytes_field(1, _bytes_field(1, tag.encode()) + _field(2, 5, struct.pack("<f", v)))
                          for tag, v in scalars.items())
        body += _bytes_field(5, values)
    return body


def record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", _masked_crc(length)) + data + struct.pack("<I", _masked_crc(data))


class EventWriter:
    """Appends scalars to a new ``events.out.tfevents.<time>.<host>`` file in ``logdir`` (one per process, as
    TensorBoard's writers do; TensorBoard reads every file of a directory in order)."""

    def __init__(self, logdir: str) -> None:
        os.makedirs(logdir, exist_ok=True)
        self.path = os.path.join(logdir, f"events.out.tfevents.{time.time():.6f}.{socket.gethostname()}.{os.getpid()}")
        self._append(event_bytes(time.time(), 0, file_version="brain.Event:2"))

    def scalars(self, step: int, values: dict[str, float]) -> None:
        self._append(event_bytes(time.time(), step, scalars=values))

    def _append(self, data: bytes) -> None:
        with open(self.path, "ab") as f:
            f.write(record(data))
