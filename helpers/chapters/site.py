"""`python -m helpers.chapters.site [OUT]` (or ./course site): the executed notebooks as an HTML book.

Builds notebooks/ (its _config.yml and _toc.yml) with Jupyter Book into OUT (default build/site)
without executing anything, with warnings as errors (-W, -n: a broken internal link or a page
missing from the table of contents fails the build). Returns the builder's exit status.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build(out: Path | None = None) -> int:
    out = Path(out or ROOT / "build" / "site")
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe), "build", str(ROOT / "notebooks"), "--path-output", str(out), "-W", "-n", "--keep-going"]
    return subprocess.run(cmd).returncode


if __name__ == "__main__":
    sys.exit(build(Path(sys.argv[1]) if len(sys.argv) > 1 else None))
