"""What every exercise check shares: the verdict line, the decorator that reports an unanswered
exercise, and a direction-only comparison."""
from __future__ import annotations

import functools

from .closed import Closed, Refused

NOT_ANSWERED = ("Not answered yet: replace `raise NotImplementedError()` above with your code, "
                "then run this cell again.")


def _verdict(ok: bool, good: str, bad: str) -> bool:
    print(("Correct: " + good) if ok else ("Not yet: " + bad))
    return ok


def exercise(check=None, *, closes=()):
    """Decorator for a check: an unanswered exercise (NotImplementedError) prints NOT_ANSWERED.

    ``closes``: the course's references ("module:name" inside helpers, closed.resolve) that compute
    what the learner must derive. The check's first argument, the learner's function, is handed to
    the check as ``closed.Closed``: each call runs with those references closed, so an answer that
    reaches one, by any route, is refused by name (``reference_refused``)."""
    if check is None:
        return functools.partial(exercise, closes=closes)

    @functools.wraps(check)
    def wrapped(answer_fn, *args, **kwargs):
        try:
            return check(Closed(answer_fn, closes) if closes else answer_fn, *args, **kwargs)
        except NotImplementedError:
            print(NOT_ANSWERED)
            return False
        except Refused as err:
            return reference_refused(err.args[0])
    return wrapped


def _compare(got, want) -> str:
    """'too large' / 'too small' for numbers: a direction, not the answer."""
    return "too large" if got > want else "too small"


def named_mistake(answer_fn, cases, mistakes, same=None):
    """The message of the first of ``mistakes`` ((message, model) pairs) whose model gives the
    learner's answer on every case: a mistake is named by what the whole function does, not by one
    case where two mistakes happen to give the same number. None if no model matches."""
    import numpy as np
    same = same or (lambda a, b: bool(np.all(np.isclose(a, b, rtol=1e-9, atol=0))))
    for message, model in mistakes:
        if all(same(answer_fn(*c), model(*c)) for c in cases):
            return message
    return None


def reference_refused(name: str) -> bool:
    return _verdict(False, "", f"your function calls {name}, the course's own reference that this check "
                    f"compares against (it is closed while your function runs, however it is reached: by name, "
                    f"an alias, getattr or a helper): write the computation yourself")
