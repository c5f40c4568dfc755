"""A progress bar for long work (the benchmark's layers, stage auto's search): tqdm's, in a
notebook or a terminal, gone when the work ends; a silent stand-in where tqdm is missing, the
caller turned it off, or nobody watches (output into a file or a log)."""
from __future__ import annotations

import sys


class _Silent:
    def update(self, n=1): pass
    def set_description(self, d): pass
    def close(self): pass
    def write(self, s): print(s, flush=True)


def progress(total: int, enabled: bool = True, description: str = ""):
    """A bar of ``total`` steps (``update()`` after each, ``close()`` at the end)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover
        tqdm = None
    if tqdm is None or not enabled or not watched():
        return _Silent()
    return tqdm(total=total, leave=False, desc=description or None)


def watched() -> bool:
    """A terminal or a notebook shows the bar; a log would only fill with its redraws."""
    return sys.stderr.isatty() or "ipykernel" in sys.modules
