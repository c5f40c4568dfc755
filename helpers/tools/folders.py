"""Folders that a command writes (`./course student OUT`, `./course site OUT`): nothing a user
made is ever deleted or overwritten.

A command may write into a folder that does not exist yet, an empty folder, or a folder it wrote
before. What it wrote is listed, with each file's checksum, in a manifest inside the folder
(``.course-output.json``); writing again removes only listed files that are unchanged since. A
folder with anything else in it, a listed file that was changed since (a learner's answers saved
into the student edition), or one of the course's own folders is refused before anything is
written, with a one-line error that says what to do.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ".course-output.json"
# the course's own folders: never an output folder, nor inside one of them
OWN = ("notebooks", "kernels", "helpers", "tests", "results", ".git", ".ci", ".venv")


class FolderError(ValueError):
    """A folder a command may not write into; the message says why and what to do."""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink())


def claim(out, command: str) -> Path:
    """Check ``out`` before anything is written and clear what ``command`` wrote there before.

    Returns the folder (created if new). Raises FolderError for a folder holding anything the
    command did not write, a written file changed since, a file in place of the folder, or a
    folder of the course itself (or one that contains the course)."""
    out = Path(out).expanduser()
    real = out.resolve()
    if real == ROOT or real in ROOT.parents:
        raise FolderError(f"{out} holds the course itself; {command} writes a folder of its own: choose a new "
                          f"folder such as build/{command.split()[-1]}")
    for name in OWN:
        own = (ROOT / name).resolve()
        if real == own or own in real.parents:
            raise FolderError(f"{out} is inside the course's {name}/ folder; {command} writes a folder of its own: "
                              f"choose a new folder such as build/{command.split()[-1]}")
    if out.exists() and not out.is_dir():
        raise FolderError(f"{out} is a file, not a folder; choose a new folder for {command}")
    if not out.exists():
        out.mkdir(parents=True)
        return out
    manifest = out / MANIFEST
    written = json.loads(manifest.read_text())["files"] if manifest.is_file() else {}
    others = [p for p in _files(out) if p != manifest and str(p.relative_to(out)) not in written]
    if others:
        shown = ", ".join(str(p.relative_to(out)) for p in others[:3]) + (" ..." if len(others) > 3 else "")
        raise FolderError(f"{out} holds files that {command} did not write ({shown}); nothing was changed. "
                          f"Choose a new or empty folder, or move those files away first")
    changed = [name for name, digest in written.items() if (out / name).is_file() and _digest(out / name) != digest]
    if changed:
        shown = ", ".join(changed[:3]) + (" ..." if len(changed) > 3 else "")
        raise FolderError(f"{out}: {shown} changed since {command} wrote {'it' if len(changed) == 1 else 'them'} "
                          f"(saved work?); nothing was changed. Move {'it' if len(changed) == 1 else 'them'} away "
                          f"or choose another folder")
    for name in written:
        (out / name).unlink(missing_ok=True)
    manifest.unlink(missing_ok=True)
    for d in sorted((p for p in out.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(d.iterdir()):
            d.rmdir()
    return out


def seal(out, command: str) -> None:
    """List every file now in ``out`` (all written by ``command`` after ``claim``) in its manifest."""
    out = Path(out)
    files = {str(p.relative_to(out)): _digest(p) for p in _files(out) if p.name != MANIFEST and p.is_file()}
    (out / MANIFEST).write_text(json.dumps({"written_by": command, "files": files}, indent=1, sort_keys=True) + "\n")


def command_line(command: str, default: str, write, argv=None) -> int:
    """``command [OUT]`` for a command that writes a folder: ``write(OUT or None) -> exit status``;
    a wrong argument or a refused folder is one line on stderr and exit status 2, nothing written."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0].startswith("-")):
        print(f"usage: {command} [OUT]   (OUT: a new or empty folder, default {default})", file=sys.stderr)
        return 2
    try:
        return write(Path(args[0]) if args else None)
    except FolderError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:            # a folder that cannot be made or written there (/proc/x, read-only)
        print(f"error: {command} {args[0] if args else default}: cannot write there ({err.strerror or err}); "
              f"choose another folder", file=sys.stderr)
        return 2
