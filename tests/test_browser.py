"""A real browser: JupyterLab serves chapter 01, headless Chromium (the distribution's, driven by
Playwright) runs it, moves a slider of the interactive picture, and sees the picture change.

Needs Playwright (`pip install -e '.[browser]'`) and Chromium (`apt-get install chromium`). A
learner's `./course test` without them skips this test with that reason; with COURSE_CI=1
(.ci/run sets it, and installs both) a missing browser is a failure, not a skip.
"""
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("COURSE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def _need_browser():
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = "Playwright is not installed (pip install -e '.[browser]')"
    else:
        missing = None if CHROMIUM else "Chromium is not installed (apt-get install chromium)"
    if missing:
        if os.environ.get("COURSE_CI") == "1":
            pytest.fail(f"COURSE_CI=1 but {missing}")
        pytest.skip(f"{missing}; CI runs this test")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    _need_browser()
    port = _free_port()
    # Render every cell (JupyterLab 4 only renders the cells in view by default).
    settings = tmp_path / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    exe = Path(sys.executable).with_name("jupyter")
    proc = subprocess.Popen([str(exe), "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
                             "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={ROOT}",
                             f"--LabApp.user_settings_dir={tmp_path / 'settings'}",
                             f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not start within 60 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_chapter_01_slider_changes_the_picture(lab):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{lab}/lab/tree/notebooks/01_backprop_math.ipynb")
        page.wait_for_selector(".jp-Notebook", timeout=60_000)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_text("Run All Cells", exact=True).click()
        slider = page.locator(".widget-slider").filter(has_text="kernel").first
        slider.wait_for(timeout=300_000)   # generous: CI runs other notebooks beside it on 2 cores
        picture = page.locator(".jupyter-widgets-output-area img, .widget-output img").first
        picture.wait_for(timeout=120_000)
        before = picture.get_attribute("src")
        handle = slider.locator(".noUi-handle").first
        handle.scroll_into_view_if_needed()
        box = handle.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + 300, box["y"] + box["height"] / 2, steps=10)
        page.mouse.up()
        if slider.locator(".widget-readout").first.inner_text().strip() == "3":
            handle.focus()                     # the keyboard moves a slider too
            page.keyboard.press("ArrowRight")
        for _ in range(60):
            after = page.locator(".jupyter-widgets-output-area img, .widget-output img").first.get_attribute("src")
            if after and after != before:
                break
            time.sleep(0.5)
        readout = slider.locator(".widget-readout").first.inner_text()
        browser.close()
    assert readout.strip() != "3", "the slider did not move"
    assert after and after != before, "the picture did not change after the slider moved"
