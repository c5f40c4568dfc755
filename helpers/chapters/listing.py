"""A kernel listing or diff as a notebook shows it, and which edition is showing it.

``Source`` displays highlighted code; its text form is the code itself. In the student edition
(``EDITION["name"] == "student"``, set by notebook.start(edition="student")) the lines that hold
one of the ``secrets`` it is given (helpers/chapters/answers.py: every kernel exercise's answer,
kernel_exercises.secret_lines) are each replaced by one marker line, so that no listing above an
exercise gives its answer away.
"""
from __future__ import annotations

import html

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
