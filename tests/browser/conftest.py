"""Playwright against Debian's Chromium (browsers are never downloaded) and pytest-django's live server.

The whole directory is skipped, with the reason, where /usr/bin/chromium is missing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.ui.conftest import PASSWORD, infra  # noqa: F401  (the inventory fixture, shared with page tests)

CHROMIUM = Path(os.environ.get("TIDAL_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--no-first-run"]


def pytest_collection_modifyitems(config, items):
    if CHROMIUM.exists():
        return
    skip = pytest.mark.skip(reason=f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium per test module (its event loop must not outlive the browser tests).

    Playwright's sync API keeps an asyncio event loop running in this thread, and Django refuses ORM calls from a
    thread with a running loop unless DJANGO_ALLOW_ASYNC_UNSAFE is set; the tests' ORM calls are synchronous, so
    the flag is safe here. It is restored when the browser closes.
    """
    if not CHROMIUM.exists():
        pytest.skip(f"browser tests need Chromium at {CHROMIUM}")
    from playwright.sync_api import sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def browser_page(chromium, live_server):
    """A fresh browser context (no cookies) at desktop width, on the live server."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, base_url=live_server.url)
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


def wait_until(page, expression: str, timeout: float = 15_000) -> None:
    """Wait until the JavaScript `expression` is true in the page.

    Not page.wait_for_function: Playwright evaluates its predicate with eval(), which the pages'
    Content-Security-Policy refuses. The browser tests keep the policy on, so a page that breaks it fails them;
    page.evaluate goes through the DevTools protocol, which the policy does not govern."""
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout / 1000:.0f} s: {expression}")
        page.wait_for_timeout(50)


def sign_in(page, user) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", PASSWORD.format(user.username))
    page.click("button[type=submit]")
    page.wait_for_selector("header .logout")
