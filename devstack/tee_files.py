"""The files a ``| tee FILE`` reader of the demo's output writes, found while it is alive, so that the lines said
after a Ctrl-C killed it (the terminal signals the whole pipeline: tee dies at once, the demo stops its stack for
seconds more) still reach them: ``make demo | tee log`` kept everything but the last line, "stopped every process
the demo started." (issue 36).

Linux only (``/proc``): the reader is the process holding the read end of the pipe on our stdout
(``/proc/<pid>/fd`` links to the same ``pipe:[inode]``, opened read-only per ``/proc/<pid>/fdinfo``'s ``flags``);
its files are its other descriptors open for writing on regular files. Nothing found (no pipe, another user's
reader, no ``/proc``): an empty list, and the demo says its last lines on the terminal only.
"""

from __future__ import annotations

import os
import stat


def _flags(pid: str, fd: str) -> int | None:
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}") as f:
            for line in f:
                if line.startswith("flags:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        return None
    return None


def reader_files(fd: int = 1) -> list[str]:
    """Regular files open for writing by the process that reads the pipe on our ``fd``."""
    try:
        pipe = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return []
    if not pipe.startswith("pipe:"):
        return []
    me = str(os.getpid())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        links = {}
        for n in fds:
            try:
                links[n] = os.readlink(f"/proc/{pid}/fd/{n}")
            except OSError:
                continue
        if not any(target == pipe and (_flags(pid, n) or 0) & os.O_ACCMODE == os.O_RDONLY
                   for n, target in links.items()):
            continue
        files = []
        for n, target in links.items():
            flags = _flags(pid, n)
            if flags is None or flags & os.O_ACCMODE == os.O_RDONLY or not target.startswith("/"):
                continue
            try:
                if stat.S_ISREG(os.stat(target).st_mode):
                    files.append(target)
            except OSError:
                continue
        return sorted(set(files))
    return []


def append(files: list[str], line: str) -> None:
    """Add ``line`` to each file; a file that cannot be written is skipped (never an error: the demo is stopping)."""
    for path in files:
        try:
            with open(path, "a") as f:
                f.write(line + "\n")
        except OSError:
            continue
