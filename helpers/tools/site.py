"""`python -m helpers.tools.site [OUT]` (or ./course site): the executed notebooks as an HTML book.

Builds notebooks/ (its _config.yml and _toc.yml) with Jupyter Book into OUT (default build/site)
without executing anything, with warnings as errors (-W, -n: a broken internal link or a page
missing from the table of contents fails the build). The pages land in OUT/_build/html. OUT must be
new, empty, or written by this command before (helpers/tools/folders.py). Returns the builder's exit status.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


COMMAND = "./course site"


def build(out: Path | None = None) -> int:
    """Build into ``out`` (a new or empty folder, or one this command wrote before: helpers/tools/folders.py);
    the pages land in ``out/_build/html``."""
    from .folders import claim, seal
    out = claim(out or ROOT / "build" / "site", COMMAND)      # refused before anything is written
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe), "build", str(ROOT / "notebooks"), "--path-output", str(out), "-W", "-n", "--keep-going"]
    rc = subprocess.run(cmd).returncode
    seal(out, COMMAND)
    if rc == 0:
        print(f"the site is in {out / '_build' / 'html'} (open index.html)")
    return rc


def main(argv=None) -> int:
    """The command line (helpers/tools/folders.py: command_line)."""
    from .folders import command_line
    return command_line(COMMAND, "build/site", build, argv)


if __name__ == "__main__":
    sys.exit(main())
