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


def calls_reference(answer_fn, names) -> str | None:
    """The name of a checker's own reference that the learner's function calls (directly or in a
    function it defines), or None: an answer that hands the work to the reference checks nothing."""
    def code_names(code):
        yield from code.co_names
        for const in code.co_consts:
            if hasattr(const, "co_names"):
                yield from code_names(const)
    used = set(code_names(answer_fn.__code__)) if hasattr(answer_fn, "__code__") else set()
    return next((n for n in names if n in used), None)


def reference_refused(name: str) -> bool:
    return _verdict(False, "", f"your function calls {name}, the course's own reference that this check "
                    f"compares against: write the computation yourself")
