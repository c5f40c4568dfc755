"""The rendered course: `./course site` builds the executed notebooks into an HTML book with
warnings as errors (a broken internal link fails), and its table of contents lists every chapter.

The build needs the `site` extra (Jupyter Book). Without it the build test is skipped with that
reason, unless COURSE_CI=1 (.ci/run sets it), where a skip would hide a broken site: it fails.
"""
import importlib.util
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NB = ROOT / "notebooks"


def test_toc_lists_every_chapter_and_page():
    toc = (NB / "_toc.yml").read_text()
    listed = set(re.findall(r"file:\s*(\S+)", toc))
    pages = {p.stem for p in NB.glob("*.ipynb")} | {p.stem for p in NB.glob("*.md")} - {"index"}
    assert pages <= listed, f"not in notebooks/_toc.yml: {sorted(pages - listed)}"


def test_site_builds_without_warnings(tmp_path):
    if importlib.util.find_spec("jupyter_book") is None:
        if os.environ.get("COURSE_CI") == "1":
            pytest.fail("COURSE_CI=1 but Jupyter Book is not installed: pip install -e '.[site]'")
        pytest.skip("Jupyter Book is not installed (pip install -e '.[site]'); CI builds the site")
    from helpers.tools.site import build
    assert build(tmp_path / "site") == 0, "the site build printed a warning or an error (run ./course site)"
    html = tmp_path / "site" / "_build" / "html"
    for nb in NB.glob("*.ipynb"):
        assert (html / f"{nb.stem}.html").exists(), nb.stem


def test_site_build_fails_on_a_broken_link(tmp_path):
    if importlib.util.find_spec("jupyter_book") is None:
        pytest.skip("Jupyter Book is not installed")
    import shutil
    import subprocess
    import sys
    book = tmp_path / "book"
    book.mkdir()
    shutil.copy(NB / "_config.yml", book)
    (book / "_toc.yml").write_text("format: jb-book\nroot: index\n")
    (book / "index.md").write_text("# A page\n\nA [link to nowhere](missing_chapter.ipynb).\n")
    exe = Path(sys.executable).with_name("jupyter-book")
    run = subprocess.run([str(exe), "build", str(book), "-W", "-n"], capture_output=True, text=True)
    assert run.returncode != 0
