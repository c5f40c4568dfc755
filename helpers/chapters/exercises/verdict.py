"""What every exercise check shares: the verdict line, the decorator that reports an unanswered
exercise, and a direction-only comparison."""
from __future__ import annotations

import functools

NOT_ANSWERED = ("Not answered yet: replace `raise NotImplementedError()` above with your code, "
                "then run this cell again.")


def _verdict(ok: bool, good: str, bad: str) -> bool:
    print(("Correct: " + good) if ok else ("Not yet: " + bad))
    return ok


def exercise(check):
    """Decorator for a check: an unanswered exercise (NotImplementedError) prints NOT_ANSWERED."""
    @functools.wraps(check)
    def wrapped(*args, **kwargs):
        try:
            return check(*args, **kwargs)
        except NotImplementedError:
            print(NOT_ANSWERED)
            return False
    return wrapped


def _compare(got, want) -> str:
    """'too large' / 'too small' for numbers: a direction, not the answer."""
    return "too large" if got > want else "too small"
