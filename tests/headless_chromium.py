"""Debian's headless Chromium for the page tests, driven through Playwright's PyPI package (never a browser
download), with no network: `browser_context` opens one persistent context for a test module's fixture, and
`needs_chromium` skips a module where the binary is absent (CI installs it: .ci/run)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install -y chromium, as .ci/run does)")


@contextmanager
def browser_context(profile: Path, **options) -> Iterator:
    """A Playwright persistent context on the system Chromium (skips the test where Playwright is absent)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra) is not installed")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, headless=True,
                                                       args=FLAGS, **options)
        try:
            yield context
        finally:
            context.close()
