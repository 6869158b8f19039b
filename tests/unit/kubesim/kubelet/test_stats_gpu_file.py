"""kubesim's simulated GPU load is read from a file in the container's own /tmp (kubelet/stats.py): the container
owns that tree and kubesim reads as root, so a link the container made must never lead the read to a host file."""
from __future__ import annotations

import os

from kubesim.kubelet.stats import ANN_GPU, GPU_UTIL_FILE, gpu_util, read_in_root

REL = f"tmp/{GPU_UTIL_FILE}"


def _root(tmp_path):
    (tmp_path / "root" / "tmp").mkdir(parents=True)
    return tmp_path / "root"


def test_a_process_writes_its_load_and_the_file_wins_over_the_annotation(tmp_path):
    root = _root(tmp_path)
    (root / REL).write_text("90\n")
    assert gpu_util({ANN_GPU: "3"}, read_in_root(str(root), REL)) == 90
    assert gpu_util({ANN_GPU: "3"}, read_in_root(str(root), "tmp/absent")) == 3     # no file: the annotation
    for bad, expected in (("250", 100), ("-4", 0), ("nan", 3), ("inf", 3), ("ninety", 3)):
        (root / REL).write_text(bad)
        assert gpu_util({ANN_GPU: "3"}, read_in_root(str(root), REL)) == expected, bad


def test_a_symlink_anywhere_on_the_path_is_not_followed(tmp_path):
    host = tmp_path / "host-secret"
    host.mkdir()
    (host / GPU_UTIL_FILE).write_text("42")                 # a host file that parses as a number
    root = _root(tmp_path)
    os.symlink(host / GPU_UTIL_FILE, root / REL)            # the file itself a link
    assert read_in_root(str(root), REL) is None
    os.unlink(root / REL)
    os.rmdir(root / "tmp")
    os.symlink(host, root / "tmp")                          # /tmp made a link to a host directory
    assert read_in_root(str(root), REL) is None
    assert gpu_util({}, read_in_root(str(root), REL)) == 0


def test_a_fifo_is_not_waited_on_and_a_large_file_is_read_bounded(tmp_path):
    root = _root(tmp_path)
    os.mkfifo(root / REL)                                   # opening it for reading would block without a writer
    assert read_in_root(str(root), REL) is None
    os.unlink(root / REL)
    (root / REL).write_text("7" + " " * (1 << 20))
    assert len(read_in_root(str(root), REL)) == 64
