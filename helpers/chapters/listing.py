"""A kernel listing or diff as a notebook shows it, and which edition is showing it.

``Source`` displays highlighted code; its text form is the code itself. In the student edition
(``EDITION["name"] == "student"``, set by notebook.start(edition="student")) the lines that hold
one of the ``secrets`` it is given (helpers/chapters/answers.py: every kernel exercise's answer,
kernel_exercises.secret_lines) are each replaced by one marker line, so that no listing above an
exercise gives its answer away.
"""
from __future__ import annotations

import functools
import html
import re

from ..engine.kernels import COMMON, kernel_source
from .answers import hide

EDITION = {"name": "teacher"}    # set by notebook.start(); "student" hides the exercises' answers in listings


def _highlight(code: str, language: str = "c"):
    from IPython.display import HTML
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name
    except ImportError:  # pragma: no cover
        return HTML(f"<pre>{html.escape(code)}</pre>")
    fmt = HtmlFormatter(noclasses=True, style="default")
    return HTML(highlight(code, get_lexer_by_name(language), fmt))


class Source:
    """Displays highlighted in a notebook; its text form is the source itself. In the student
    edition the lines that hold one of ``secrets`` are hidden."""

    def __init__(self, text: str, language: str = "c", secrets: dict | None = None):
        if EDITION["name"] == "student" and secrets:
            text = hide(text, secrets)
        self.text, self.language = text, language

    def _repr_html_(self):
        return _highlight(self.text, self.language).data

    def _repr_mimebundle_(self, include=None, exclude=None):
        """Text and HTML, with the language in the output's metadata (the editions writer re-renders
        a stored listing from its text after hiding lines in it)."""
        return ({"text/plain": self.text, "text/html": self._repr_html_()},
                {"text/html": {"course_source": self.language}})

    def __repr__(self):
        return self.text


def inlined(text: str, headers: tuple, opencl: bool = False) -> str:
    """text with each `#include "h"` of ``headers`` replaced by h's code: without its opening
    comment block, its include guard and, where text's other headers bring course.h already
    (03_memoized_bounds.cl's dgrad.h), its include of course.h: the reader compares code, not a
    header's preamble; with course.h's words for both languages in OpenCL C where ``opencl``."""
    others = [m.group(1) for m in map(_INCLUDE.match, text.splitlines()) if m and m.group(1) not in headers]
    has = _included(others) & {"course.h"}
    for name in headers:
        body = kernel_source(f"common/{name}").splitlines()
        while body and (body[0].startswith("//") or not body[0].strip()):
            body.pop(0)
        guard = re.match(r"#\s*ifndef\s+(\w+_H)$", body[0]) if body else None
        if guard and body[1].split()[-1] == guard.group(1) and body[-1].strip() == "#endif":
            body = body[2:-1]
        body = [ln for ln in body if (m := _INCLUDE.match(ln)) is None or m.group(1) not in has]
        if opencl:
            body = [_opencl_spelling(ln) for ln in body]
        text = re.sub(rf'^#include "{re.escape(name)}".*$', lambda _: "\n".join(body).strip("\n"), text,
                      flags=re.M)
    return text


_INCLUDE = re.compile(r'^#include "([\w.]+)"')


def _included(names: list) -> set:
    """The headers of kernels/common that ``names`` are or include, directly or through one another."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name not in seen and (COMMON / name).is_file():
            seen.add(name)
            todo += [m.group(1) for m in map(_INCLUDE.match, kernel_source(f"common/{name}").splitlines()) if m]
    return seen


@functools.lru_cache(maxsize=None)
def _opencl_words() -> tuple:
    """(pattern, replacement) for each macro of course.h's OpenCL C branch: KERNEL_LS(LS) becomes
    `__kernel __attribute__((reqd_work_group_size(LS, 1, 1)))`, BARRIER() `barrier(CLK_LOCAL_MEM_FENCE)`."""
    text = kernel_source("common/course.h")
    branch = text.split("#else                                      // OpenCL C", 1)[1].split("#endif", 1)[0]
    words = []
    for name, params, body in re.findall(r"^#define (\w+)(?:\(([^)]*)\))? +(.*?)\s*$", branch, re.M):
        if f"#define {name}(" in branch:          # a macro with parameters: its arguments put in place
            names = [p.strip() for p in params.split(",") if p.strip()]
            def expand(m, names=names, body=body):
                args = [a.strip() for a in m.group(1).split(",")] if names else []
                return re.sub(r"\b(\w+)\b", lambda w: args[names.index(w.group(1))] if w.group(1) in names
                              else w.group(1), body)
            words.append((re.compile(rf"\b{name}\(([^()]*)\)"), expand))
        else:
            words.append((re.compile(rf"\b{name}\b"), lambda _, body=body: body))
    return tuple(words)


def _opencl_spelling(line: str) -> str:
    """A line of a header written for both languages, in OpenCL C (course.h's OpenCL branch)."""
    for pattern, replacement in _opencl_words():
        line = pattern.sub(replacement, line)
    return line
