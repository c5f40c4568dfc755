"""The repository speaks only of itself: no tracked file names a path of the machine it was made on
(a recorded log or command keeps `python3`, not the interpreter's location)."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:opt|work|home|root|Users|mnt|srv)/[\w.-]+")


def tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def test_no_tracked_file_names_a_machine_path():
    found = []
    for path in tracked_files():
        if path.suffix in (".png", ".jpg", ".whl") or not path.is_file():
            continue
        text = path.read_text(errors="ignore")
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in MACHINE_PATH.finditer(text)]
    assert not found, "machine paths in tracked files: " + "; ".join(found[:10])
