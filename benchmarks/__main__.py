"""``make bench``: run every benchmark section, side by side with what a user would pick instead, and write
BENCHMARKS.md with the machine and the date. ``python -m benchmarks kubesim_api training`` runs a subset and
only prints it; with ``--write`` it also replaces those sections in BENCHMARKS.md (each section names the
machine and date it ran on, so a file updated section by section still says where every figure comes from)."""

from __future__ import annotations

import datetime as dt
import importlib
import os
import platform
import re
import sys
import time
import traceback
from pathlib import Path

SECTIONS = [  # one per line: helpers add theirs without touching the others
    "kubesim_api",
    "kubesim_scale",
    "training",
    "shared_watch",
    "sedna",
    "dag_parse",
    "devinstances",
    "platform",
    "kueue",
    "rbac",
    "ui",
    "prod_profile",
    "e2e_watch",
    "soak",
    "metrics",
    "procrt",
    "loaded",
    "usage",
    "gang",
]
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


HEADER = ("# Skiff benchmarks\n\n"
          "Written by `make bench` (every section) or `python -m benchmarks SECTION... --write` (those sections);"
          " each section names the machine and the date it ran on. Each section compares Skiff with what a user"
          " would use instead, in the same run, on the same machine.\n")


def _marked(name: str, body: str) -> str:
    return f"<!-- section: {name} -->\n{body.rstrip()}\n<!-- /section: {name} -->\n"


def _merge(old: str, sections: dict[str, str]) -> str:
    """BENCHMARKS.md with ``sections`` replaced (or appended, in SECTIONS order), the others kept."""
    kept = {m.group(1): m.group(0) for m in
            re.finditer(r"<!-- section: (\w+) -->\n.*?<!-- /section: \1 -->\n", old, flags=re.S)}
    kept.update({name: _marked(name, body) for name, body in sections.items()})
    order = [n for n in SECTIONS if n in kept] + [n for n in kept if n not in SECTIONS]
    return HEADER + "\n" + "\n".join(kept[n] for n in order)


def parse(argv: list[str]) -> tuple[list[str], bool]:
    """``[SECTION...] [--write]``; ``--help`` prints the usage and the sections (argparse exits 0)."""
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m benchmarks", description="Run benchmark sections; with none, every one, written to "
        "BENCHMARKS.md (make bench). A subset only prints, unless --write replaces just those sections.",
        epilog="sections: " + ", ".join(SECTIONS))
    ap.add_argument("sections", nargs="*", metavar="SECTION", help="a section name (below)")
    ap.add_argument("--write", action="store_true", help="replace these sections in BENCHMARKS.md")
    args = ap.parse_args(argv)
    return args.sections or SECTIONS, args.write


def main(argv: list[str]) -> int:
    names, write = parse(argv)
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        print(f"[bench] unknown section(s) {unknown}; known: {SECTIONS}")
        return 2
    stamp = f"_Ran on {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {machine()}._"
    done: dict[str, str] = {}
    failed = []
    for name in names:
        print(f"[bench] {name} ...", flush=True)
        t0 = time.monotonic()
        try:
            section = importlib.import_module(f"benchmarks.{name}").run()
        except Exception:
            failed.append(name)
            section = f"## {name}\n\nFAILED:\n\n```\n{traceback.format_exc()}```\n"
        title, _, rest = section.strip().partition("\n")
        done[name] = f"{title}\n\n{stamp}\n{rest.rstrip()}\n\n_(section took {time.monotonic() - t0:.0f} s)_\n"
        print(done[name], flush=True)
    if names == SECTIONS or write:  # a plain subset run only prints
        old = OUT.read_text() if OUT.exists() and names != SECTIONS else ""
        OUT.write_text(_merge(old, done))
        print(f"[bench] wrote {OUT}")
    if failed:
        print(f"[bench] FAILED: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
