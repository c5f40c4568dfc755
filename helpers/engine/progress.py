"""A progress bar for long work (the benchmark's layers, stage auto's search): tqdm's, in a
notebook or a terminal, gone when the work ends; a silent stand-in where tqdm is missing or
the caller turned it off."""
from __future__ import annotations


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
    if tqdm is None or not enabled:
        return _Silent()
    return tqdm(total=total, leave=False, desc=description or None)
