"""Headless Debian chromium through selenium, for the UI tests (tests/*/ui/) and the page-load benchmark.

Always /usr/bin/chromium with /usr/bin/chromedriver (``make browser`` installs both, and Debian's Noto CJK font):
selenium never downloads a driver. Without a CJK font headless chromium draws the zh-CN page as empty boxes.
"""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CJK_FONT = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")  # fonts-noto-cjk (the Makefile checks it too)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1600,1400")


def missing() -> list[str]:
    return [str(p) for p in (CHROMIUM, CHROMEDRIVER, CJK_FONT) if not p.exists()]


def chromium(workdir: Path):
    """A new headless chromium with its profile and chromedriver log in ``workdir``; the caller quits it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if missing():
        raise RuntimeError(f"{', '.join(missing())} missing: run `make browser` "
                           "(apt-get install chromium chromium-driver fonts-noto-cjk)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={workdir / 'chromium-profile'}"):
        opts.add_argument(flag)
    service = Service(executable_path=str(CHROMEDRIVER), log_output=str(workdir / "chromedriver.log"))
    return webdriver.Chrome(service=service, options=opts)
