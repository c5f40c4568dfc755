"""While a learner's answer runs, the course's own answers are closed.

A check compares the learner's function with the course's reference (``output_size``, the bank
model's ``passes``, the launcher's ``phase_taps``, the check's own model ...). An answer that hands
the work to one of them checks nothing, and a check that looks for the reference's *name* in the
answer is easy to get round: an alias defined outside the function, ``getattr`` with a joined
string, a copy of the function. So the check closes the references themselves while the answer
runs (``Closed``, used by ``exercise(closes=...)``):

- each reference function's code is swapped for code that refuses, so a module attribute, a name
  imported into the notebook, an alias, ``getattr`` and a reference kept in a closure all meet the
  same refusal (a class: each of its methods; an ``lru_cache``: its function, with its cache
  emptied, so that no earlier result comes back);
- the learner's globals and closure cells that hold something the swap cannot reach (a partial of
  a reference, a copy of one made from its code, a bound method) are bound to the same refusal;
- a refusal is remembered as well as raised: an answer that catches the error (a "token" call
  inside ``try``) is refused all the same.

The check's own stand-ins that the answer is handed (chapter 16's ``conv2d``) run with the
references open again (``Closed.opened``). The check computes what it expects outside the answer's
calls, so its own uses of the references are untouched.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import types


class Refused(Exception):
    """The answer reached one of the course's closed references; ``args[0]`` names it."""


_reached: list[str] = []          # the closed references called, in order, since answers began


def reached(name: str) -> Refused:
    """What a closed reference runs instead of its code: note the call and hand back the error."""
    _reached.append(name)
    return Refused(name)


@functools.lru_cache(maxsize=None)
def _refusing_code(name: str, free: int) -> types.CodeType:
    """Code that refuses, with ``free`` free variables (a function's code can only be swapped for
    code with as many as its closure holds). It runs with the closed function's globals, so it
    reaches this module by import."""
    cells = "".join(f"    _c{i} = None\n" for i in range(free))
    uses = "".join(f"        _c{i}\n" for i in range(free))
    text = (f"def _outer():\n{cells}    def closed(*args, **kwargs):\n{uses}"
            f"        raise __import__({__name__!r}, fromlist=['reached']).reached({name!r})\n"
            f"    return closed\n")
    space = {}
    exec(compile(text, f"<closed {name}>", "exec"), space)
    return space["_outer"]().__code__


def _stand_in(name: str):
    return types.FunctionType(_refusing_code(name, 0), {"__builtins__": __builtins__}, name)


def _functions(obj, seen=None):
    """The Python functions whose code runs when ``obj`` is called (or, for a class, any method)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, types.FunctionType):
        yield obj
    elif isinstance(obj, types.MethodType):
        yield from _functions(obj.__func__, seen)
    elif isinstance(obj, functools.partial):
        yield from _functions(obj.func, seen)
    elif isinstance(obj, (staticmethod, classmethod)):
        yield from _functions(obj.__func__, seen)
    elif isinstance(obj, property):
        for f in (obj.fget, obj.fset, obj.fdel):
            if f is not None:
                yield from _functions(f, seen)
    elif isinstance(obj, type):
        for value in vars(obj).values():
            yield from _functions(value, seen)
    elif hasattr(obj, "__wrapped__"):             # functools.lru_cache, functools.wraps
        yield from _functions(obj.__wrapped__, seen)


def resolve(reference: str):
    """"ops.reference:output_size" -> the object (a module path inside helpers, then a name)."""
    module, _, name = reference.partition(":")
    obj = importlib.import_module(f"{__package__.rsplit('.', 2)[0]}.{module}")
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


class Closed:
    """``answer`` (the learner's function), called with ``references`` closed: each call raises
    Refused (the first reference it reached) if it reached any, even where the answer caught the
    error. ``references``: "module:name" strings inside helpers (resolve)."""

    def __init__(self, answer, references=()):
        self.answer = answer
        self.names = {}                                 # each function swapped -> the name it refuses with
        caches = []
        for ref in references:
            obj = resolve(ref)
            name = ref.partition(":")[2]
            for fn in _functions(obj):
                self.names.setdefault(fn, name)
            caches += [o for o in (obj, getattr(obj, "__wrapped__", None)) if hasattr(o, "cache_clear")]
        self.caches = caches
        self.codes = {fn: (fn.__code__, _refusing_code(name, len(fn.__code__.co_freevars)))
                      for fn, name in self.names.items()}
        self.aliases = self._aliases()
        self.depth = 0

    def _reference_of(self, value):
        """The name a value of the learner's refuses with, where it leads to a reference that the
        code swap does not reach (a copy made from a reference's code, a partial or method of a
        copy), else None."""
        originals = {code: self.names[fn] for fn, (code, _) in self.codes.items()}
        for fn in _functions(value):
            if fn not in self.names and fn.__code__ in originals:
                return originals[fn.__code__]
        return None

    def _aliases(self):
        """(mapping or cell, key, stand-in) for the learner's globals and closure cells that hold
        a copy of a reference."""
        out = []
        names = getattr(self.answer, "__globals__", {})
        for key, value in list(names.items()):
            if callable(value) and (name := self._reference_of(value)):
                out.append((names, key, _stand_in(name)))
        for cell in getattr(self.answer, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:                           # an empty cell
                continue
            if callable(value) and (name := self._reference_of(value)):
                out.append((cell, None, _stand_in(name)))
        return out

    def _swap(self, closing: bool) -> None:
        for fn, (code, refusing) in self.codes.items():
            fn.__code__ = refusing if closing else code
        for cache in self.caches:
            cache.cache_clear()
        for i, (where, key, stand_in) in enumerate(self.aliases):
            if key is None:
                value = where.cell_contents
                where.cell_contents = stand_in
            else:
                value = where[key]
                where[key] = stand_in
            self.aliases[i] = (where, key, value)     # what was there, to put back next time

    @contextlib.contextmanager
    def closed(self):
        """The references closed for the block; Refused at its end if the block reached one."""
        mark = len(_reached)
        self.depth += 1
        if self.depth == 1:
            self._swap(True)
        try:
            yield
        finally:
            self.depth -= 1
            if self.depth == 0:
                self._swap(False)
            if len(_reached) > mark:
                name = _reached[mark]
                del _reached[mark:]
                raise Refused(name)

    @contextlib.contextmanager
    def opened(self):
        """The references open again for the block, inside ``closed``: the check's own stand-ins
        that the answer calls (they may use the references)."""
        if self.depth == 0:
            yield
            return
        self._swap(False)
        try:
            yield
        finally:
            self._swap(True)

    def __call__(self, *args, **kwargs):
        with self.closed():
            return self.answer(*args, **kwargs)
