"""The demo's output when nobody reads it any more (`make demo | tee log` and a Ctrl-C that killed tee): a line
written to the broken pipe must not raise, or the clean-up after it would never run."""

import os
import subprocess
import sys

from devstack.airflow_env import REPO

SCRIPT = """
import sys
from devstack.__main__ import say
say("first line, to a pipe nobody reads")
say("second line")
open(sys.argv[1], "w").write("went on")
"""


def test_say_survives_a_reader_that_is_gone(tmp_path):
    marker = tmp_path / "marker"
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line: every write is EPIPE
    try:
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(marker)], cwd=REPO, stdout=write_end,
                              stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert marker.read_text() == "went on"
    assert b"BrokenPipeError" not in done.stderr
