"""``make bench``: run every benchmark section, side by side with what a user would pick instead, and write
BENCHMARKS.md with the machine and the date. ``python -m benchmarks kubesim_api training`` runs a subset and only prints it."""

from __future__ import annotations

import datetime as dt
import importlib
import os
import platform
import sys
import time
import traceback
from pathlib import Path

SECTIONS = ["kubesim_api", "training", "sedna", "ui"]
OUT = Path(__file__).resolve().parents[1] / "BENCHMARKS.md"


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.node() or 'host'}: {os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}")


def main(argv: list[str]) -> int:
    names = argv or SECTIONS
    parts = [
        "# Skiff benchmarks\n",
        f"Run with `make bench` on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {machine()}.\n",
        "Each section compares Skiff with what a user would use instead, in the same run, on the same machine.\n",
    ]
    failed = []
    for name in names:
        print(f"[bench] {name} ...", flush=True)
        t0 = time.monotonic()
        try:
            section = importlib.import_module(f"benchmarks.{name}").run()
        except Exception:
            failed.append(name)
            section = f"## {name}\n\nFAILED:\n\n```\n{traceback.format_exc()}```\n"
        parts.append(section.rstrip() + f"\n\n_(section took {time.monotonic() - t0:.0f} s)_\n")
        print(section, flush=True)
    if names == SECTIONS:  # a subset only prints: BENCHMARKS.md always holds one complete run
        OUT.write_text("\n".join(parts))
        print(f"[bench] wrote {OUT}")
    if failed:
        print(f"[bench] FAILED: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
