"""A real browser for console tests: Debian's Chromium driven by Playwright (its own
browser downloads are not used). Pages' screenshots go to the temp folder for a person
to look at; they are never compared or committed."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# Playwright's sync API runs an event loop in this thread; Django's ORM refuses to run
# beside one unless told that this (test-only) thread is safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium executable on PATH (Debian: apt-get install chromium)"
)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOTS = Path(tempfile.gettempdir())
TIMEOUT_MS = 30_000


@contextmanager
def open_pages(count: int) -> Iterator[list[Any]]:
    """A fresh browser with `count` pages (1440×1000), each in a context of its own — as
    many people, each with their own cookies — closed afterwards. Waits (actions,
    `expect`) give up after 30 s: generous deadlines, for a busy machine."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        contexts = [
            browser.new_context(viewport={"width": 1440, "height": 1000}) for _ in range(count)
        ]
        pages = [context.new_page() for context in contexts]
        for page in pages:
            page.set_default_timeout(TIMEOUT_MS)
        try:
            yield pages
        finally:
            for context in contexts:
                context.close()
            browser.close()


@contextmanager
def open_page() -> Iterator[Any]:
    """A fresh browser and page, closed afterwards."""
    with open_pages(1) as (page,):
        yield page


# The two widths every console page is checked at: a desktop, and a phone (touch).
PHONE, DESKTOP = 390, 1400
CONTEXTS: dict[int, dict[str, Any]] = {
    PHONE: {"viewport": {"width": PHONE, "height": 844}, "is_mobile": True, "has_touch": True},
    DESKTOP: {"viewport": {"width": DESKTOP, "height": 1000}},
}
# How wide the page is drawn: wider than the viewport means a sideways scroll.
WIDEST = "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"


@contextmanager
def chromium() -> Iterator[Any]:
    """One Chromium, in which each test opens its own contexts (people) with
    CONTEXTS[width]: the `browser` fixture (tests/conftest.py), one per test module."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
