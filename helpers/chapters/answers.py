"""What the student edition must not show: every line of a teacher's answer.

Two kinds of answer exist. The solution regions of the teacher notebooks (between ``### BEGIN
SOLUTION`` and ``### END SOLUTION``; ``// ### BEGIN SOLUTION`` in a kernel string), and the
kernel lines that a kernel exercise's gap hides (``Gap`` in helpers/chapters/kernel_exercises.py:
the lines it replaces, plus the lines it conceals, such as a header comment that states the
answer). The same lines often stand in later stages' kernels too, so a listing of any kernel, and
a diff between two, can show an answer.

    notebook_secrets(nb)    # {normalized line: where it comes from} of a teacher notebook's solutions
    region_secrets(...)     # the same for any lines (a gap's: kernel_exercises.secret_lines, course-wide)
    hide(text, secrets)     # text with every line that holds one of ``secrets`` replaced by a marker
    found(text, secrets)    # the secrets that occur in text (what tests/test_editions.py asserts)

The rule for "a line": its code, comments and white space removed, compared as a substring of
each line of the edition with its white space removed (so reindenting, a diff's +/- column or an
HTML highlighter's spans do not hide a match). A line with fewer than three words or numbers (a
brace, ``else``, ``#pragma unroll``, ``return table``) or only a C loop's header (``for (int s = 0;
s < KW; s++) {``: the loop a gap opens, not its answer) is too common to be an answer and is not
a secret; neither is a gap's line that the gapped kernel shows anyway (the same code elsewhere in
the learner's view of that kernel). Whole-line comments of a solution count as its lines.
"""
from __future__ import annotations

import re

BEGIN, END = "BEGIN SOLUTION", "END SOLUTION"     # the markers of a solution region (nbgrader's)
WORD = re.compile(r"[A-Za-z_0-9]+")
MARKER = "/* ... hidden in the student edition: the answer to kernel exercise {names} ... */"


def code_of(line: str, language: str = "c") -> str:
    """A line's code without its comment and without any white space ('' for a blank line)."""
    if language == "c":
        line = re.sub(r"/\*.*?\*/", "", line)
        line = line.split("//", 1)[0]
    elif not line.lstrip().startswith("#"):
        line = re.sub(r"\s#\s.*$", "", line)
    return re.sub(r"\s+", "", line)


def key_of(line: str, language: str = "c") -> str:
    """What a line of an answer is matched by: its code, or for a whole-line comment the comment's
    text (without white space); '' when the line is too common to be an answer."""
    stripped = line.strip()
    comment = stripped.startswith("//") or (language == "python" and stripped.startswith("#")
                                            and not re.match(r"#\s*(pragma|include|define|if|endif|else)\b", stripped))
    text = re.sub(r"^(//|#)\s*", "", stripped) if comment else code_of(line, language)
    if ("BEGIN SOLUTION" in line or "END SOLUTION" in line or len(WORD.findall(text)) < 3
            or re.fullmatch(r"for\(.*\)\{?", text)):
        return ""
    return re.sub(r"\s+", "", text)


def region_secrets(lines, language: str, where: str, visible=()) -> dict:
    """{key: where} for the lines of one answer, less the trivial ones and those in ``visible``."""
    seen = {key_of(v, "c") for v in visible}
    out = {}
    for ln in lines:
        k = key_of(ln, language)
        if k and k not in seen:
            out[k] = where
    return out


def notebook_secrets(nb) -> dict:
    """{key: 'solution in cell i'} for every line of a teacher notebook's solution regions."""
    out = {}
    for i, cell in enumerate(nb.cells):
        inside, language, region = False, "python", []
        for line in cell.source.splitlines():
            if BEGIN in line:
                inside, region = True, []
                language = "c" if line.strip().startswith("//") else "python"
            elif END in line:
                inside = False
                out.update(region_secrets(region, "c" if cell.cell_type == "code" and language == "c" else
                                          "python" if cell.cell_type == "code" else "text", f"solution in cell {i}"))
            elif inside:
                region.append(line)
    return out


def found(text: str, secrets: dict) -> list[str]:
    """The secrets (keys) that occur in ``text``: each line of it, white space removed, searched."""
    lines = {re.sub(r"\s+", "", ln) for ln in text.splitlines()}
    lines.discard("")
    return [k for k in secrets if any(k in ln for ln in lines)]


def hide(text: str, secrets: dict, marker: str = MARKER) -> str:
    """``text`` (a kernel listing or a diff) with each line that holds an answer replaced by one
    marker line per run of such lines, indented as the first of them (a diff keeps its column);
    ``marker`` names the secrets' values where it says ``{names}``."""
    out, run, pending = [], [], []

    def flush():
        if run:
            first = run[0][0]
            diff = first[:1] if first[:1] in "+- " and re.match(r"^[+\- ]\s", first) else ""
            body = first[len(diff):]
            indent = body[: len(body) - len(body.lstrip())]
            names = ", ".join(dict.fromkeys(n for _, n in run))
            out.append(diff + indent + marker.format(names=names))
            run.clear()
    for line in text.splitlines():
        flat = re.sub(r"\s+", "", line)
        hit = next((n for k, n in secrets.items() if k in flat), None) if flat else None
        if hit is not None and not line.startswith(("+++", "---")):
            pending.clear()                       # a brace or a pragma between two hidden lines
            run.append((line, hit))
        elif run and flat and not key_of(line.lstrip("+- ")):
            pending.append(line)
        else:
            flush()
            out.extend(pending)
            pending.clear()
            out.append(line)
    flush()
    out.extend(pending)
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")
