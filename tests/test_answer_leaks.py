"""No exercise's answer in its own chapter or an earlier one of the student edition, in any spelling.

A check of ``./course student`` that shares nothing with the code deciding what the edition hides
(helpers/tools/editions.py and answers.py): it reads the answers from the teacher notebooks and
the kernel files itself (of the gaps it reads only their fields), builds the edition with the public
command, and searches the result.

What an answer is (``answers``):
- each line between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` in a code cell of a teacher
  notebook: Python, or OpenCL C where the marker is ``// ### BEGIN SOLUTION`` (a kernel string);
- each line of a kernel file that a kernel exercise's gap replaces (``Gap.first`` to ``Gap.last``
  in its stage's kernel file, read here from the file) and each line it conceals (``Gap.conceal``:
  a header comment that states the answer). A gap whose exercise asks for other lines than the
  kernel's own (``Gap.other_answer``) has its answer in the notebook's solution region instead.

An answer belongs to the notebook that holds it (a gap: the notebook that calls ``kernel_gap``).
The course order is notebooks/_toc.yml; index.md and GLOSSARY.md are linked from the chapters and
can be read at any point, so they count as earlier than every chapter. Later chapters may show an
earlier chapter's answers.

How a line is compared: both sides are cut into tokens (names, numbers, operators, string
literals), so white space counts nowhere; equal spellings are made one token (``and``/``&&``,
``or``/``||``, ``not``/``!``, ``//``/``/``, ``·``/``×``/``\\cdot``/``*``, ``−``/``-``, ``≤``/``<=``,
``≥``/``>=``, ``0.0f``/``0.0``/``0``). Every name that is not a keyword becomes a placeholder
numbered by its first appearance, so ``k < K && oh >= 0`` is ``$0 < $1 && $2 >= 0``: a pattern that
matches the same expression with any names, as long as equal names stay equal and different names
stay different. An answer line is searched whole (without its comment and a trailing ``;``, ``{``,
``:``), and so are its right-hand side (after a top-level ``=`` or ``return``) and each of its
parenthesized groups that holds ``&&`` or ``||`` (a bounds test that another kernel writes with one
more term). Other groups are not searched alone: an index such as ``(n * C + c) * HW + i`` is the
layout arithmetic that every kernel of the course shares, found in every chapter.

The text searched is each cell's source and each stored output (stream text, plain text, markdown,
and HTML as the text it shows) of the student notebooks, and the two Markdown pages, each as one
token stream (a formula broken over two lines is still found). A string literal is one token, so the
text inside each string of a cell's source is searched too (a ``hide=`` key spells the line it masks).

What is too common to be an answer (``MIN_WEIGHT``): a pattern needs at least three operators and
numbers (``+ - * / % < <= == != && || ? ** ...`` and numeric literals; brackets, commas, ``=`` and
``;`` do not count). With its names renamed, a shorter expression is a shape that every chapter
has: ``out = output_size(size, k, stride, padding)`` is any call of four arguments (it matched
"grad_output (N, K, OH, OW)"), ``const int oh = oh_s / STRIDE`` is chapter 01a's ``const int h =
hw / W``, ``first = g * (C // groups)`` is chapter 11's ``i*(TM/WM)``, and ``h + PAD - r`` is chapter
01's formula that every later chapter builds on. A C or Python loop header alone (``for (int s = 0;
s < KW; s++) {``) is the frame a gap opens, not its answer.

A sum is also searched with its terms in every order, and a product of names or numbers with its
factors in every order (``reorderings``): ``o·stride − pad + t·d`` is found as ``t * d - pad + stride *
o``. An apostrophe of prose (``chapter 11's``, ``dy'``) opens no string literal: a quote opens one only
where no letter or digit stands before it.

A comparison is also searched mirrored, alone and as an operand of ``&&`` or ``||`` (``mirrorings``:
``h >= 0 && h < IH`` as ``0 <= h && IH > h``).

What this does not see: the operands of ``&&`` reordered, a sum of more than four terms reordered,
an answer shorter than the threshold (chapter 10's ``gcd(stride, 32)``), an answer given as numbers a
cell prints, and the answers of solution regions in markdown cells (prose).

ALLOWED lists the few places where the lesson itself must state what an exercise then asks for,
each with its reason; an entry that no longer matches a finding fails, so the list cannot go stale.
"""
from __future__ import annotations

import dataclasses
import html
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
PAGES = ("index", "GLOSSARY")          # Markdown pages of the edition, readable from every chapter
MIN_WEIGHT = 3

TOKEN = re.compile(r"""(?P<str>(?<!\w)[rRbBfFuU]{0,2}(?:"[^"\n]*"|'[^'\n]*'))
    |(?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?[fF]?)
    |(?P<tex>\\[A-Za-z]+)
    |(?P<name>[A-Za-z_]\w*)
    |(?P<op><<=|>>=|\*\*|//|<<|>>|<=|>=|==|!=|&&|\|\||\+=|-=|\*=|/=|%=|->|\+\+|--
         |[-+*/%<>=!&|^~?:.,;()\[\]{}·×⋅−–≥≤≠])
    """, re.X)
SAME = {"and": "&&", "or": "||", "not": "!", "//": "/", "·": "*", "×": "*", "⋅": "*", r"\cdot": "*",
        r"\times": "*", "−": "-", "–": "-", "≥": ">=", r"\geq": ">=", r"\ge": ">=", "≤": "<=", r"\leq": "<=",
        r"\le": "<=", "≠": "!=", r"\neq": "!=", r"\ne": "!="}
KEYWORDS = frozenset("""const int float bool unsigned long double half char void uint size_t float2 float4 float8
    int2 int4 return if else for while do continue break true false sizeof struct static inline def lambda in is
    None True False import from with as yield pass del global nonlocal assert raise try except finally class
    elif""".split())
NOT_WEIGHED = frozenset("()[]{},;.:=")   # punctuation and assignment: an expression's frame, not its content
# a sum's terms and a product's factors are also searched in other orders (``reorderings``), up to this many
# spellings of one expression; not where the expression holds one of FRAME at its top level
REORDERINGS = 200
FRAME = frozenset("= == != < <= > >= && || ? : ; , += -= *= /= %= << >>".split() + ["return"])

# Where the lesson itself states what an exercise asks for: (answer's chapter, text of its answer line,
# the chapters that show it, or None for every chapter up to its own; why the lesson must show it there)
ALLOWED = (
    ("05_input_vectorization", "OW = W + 2 * pad - 2", ("05_input_vectorization",),
     "the exercise's prompt gives OW (`remember OW = W + 2·pad - 2`); the answer is the count built on it"),
    ("08_combining_width", "OW = (W + 2 * pad - 3) // stride + 1", ("08_combining_width",),
     "the exercise's prompt gives OW; the answer is which columns exist"),
    ("08_combining_width", "ow_s = x0 + pad - 2 + u", ("07_combining_input_depth", "08_combining_width"),
     "the exercise writes in Python the column table that chapters 07 and 08 teach in their kernels"),
    ("08_combining_width", "ok = ow_s >= 0 and ow_s % stride", ("07_combining_input_depth", "08_combining_width"),
     "the existence test is chapter 02's and 03's kernel exercise, repeated by every later direct kernel"),
    ("09_local_memory", "const int kk = i / (PH * PW)", ("09_local_memory",),
     "the weight copy beside the gap splits its index the same way, the model for the patch's split"),
    ("15_training", "conv = 2 * n * k * h * w * c * r * s", None,
     "a convolution's FLOP count, 2·N·K·OH·OW·C·R·S, is printed beside every timing from chapter 02 on"),
)


@dataclasses.dataclass(frozen=True)
class Token:
    kind: str      # "name", "num", "op", "str", or "word" (a keyword)
    value: str
    start: int     # where it stands in the text (to quote the match)
    end: int


STAR = Token("op", "*", 0, 0)


def tokens(text: str) -> list[Token]:
    """``text`` as tokens, white space dropped and equal spellings made one (see the docstring)."""
    out = []
    for m in TOKEN.finditer(text):
        kind, value = m.lastgroup, m.group()
        if kind == "num":
            value = repr(float(value.rstrip("fF")))
        elif kind == "str":
            value = '"' + value.lstrip("rRbBfFuU")[1:-1] + '"'
        elif value in SAME:
            kind, value = "op", SAME[value]
        elif kind == "tex":
            continue                                   # a LaTeX command that is no operator
        elif kind == "name" and value in KEYWORDS:
            kind = "word"
        out.append(Token(kind, value, m.start(), m.end()))
    return out


def positions(toks: list[Token]) -> dict[str, list[int]]:
    """Where each value other than a name stands in ``toks`` (where a pattern's search may start)."""
    out: dict[str, list[int]] = {}
    for i, t in enumerate(toks):
        if t.kind != "name":
            out.setdefault(t.value, []).append(i)
    return out


@dataclasses.dataclass(frozen=True)
class Pattern:
    """An expression with its names numbered by first appearance: ("$", k) for a name, (kind, value)
    for any other token."""
    items: tuple

    @classmethod
    def of(cls, toks: list[Token]) -> "Pattern":
        names: dict[str, int] = {}
        return cls(tuple(("$", names.setdefault(t.value, len(names))) if t.kind == "name" else (t.kind, t.value)
                         for t in toks))

    @property
    def weight(self) -> int:
        """Its operators and numbers: how much of it is more than names and punctuation."""
        return sum(1 for kind, v in self.items if kind in ("num", "op") and v not in NOT_WEIGHED)

    def find(self, toks: list[Token], at: dict[str, list[int]]) -> int | None:
        """The first position in ``toks`` where the pattern stands (names renamed one to one), or None.
        ``at``: ``positions(toks)``; the search tries only where the pattern's rarest value stands."""
        fixed = [(j, v) for j, (kind, v) in enumerate(self.items) if kind != "$"]
        if any(v not in at for _, v in fixed):
            return None
        j, v = min(fixed, key=lambda jv: len(at[jv[1]]))
        return next((p for p in (a - j for a in at[v])
                     if 0 <= p <= len(toks) - len(self.items) and self._stands_at(toks, p)), None)

    def _stands_at(self, toks: list[Token], p: int) -> bool:
        forward: dict[int, str] = {}
        backward: dict[str, int] = {}
        for (kind, v), t in zip(self.items, toks[p:p + len(self.items)]):
            if kind != "$":
                if (t.kind, t.value) != (kind, v):
                    return False
            elif t.kind != "name" or forward.setdefault(v, t.value) != t.value \
                    or backward.setdefault(t.value, v) != v:
                return False
        return True


@dataclasses.dataclass(frozen=True)
class Answer:
    chapter: str   # notebook stem
    where: str     # "cell 34" or "gap naive_checks"
    line: str
    language: str  # "python", "c", or "comment" (a concealed line: its comment is the answer)

    def patterns(self) -> list[Pattern]:
        """The line, its right-hand side and its logical groups, less those too common to be an answer."""
        if self.language == "comment":
            toks = tokens(self.line.strip().lstrip("/*# "))
        else:
            code = re.sub(r"/\*.*?\*/", "", self.line).split("//")[0] if self.language == "c" else \
                self.line.split("#")[0]
            toks = tokens(code)
        while toks and toks[-1].value in (";", "{", ":"):
            toks = toks[:-1]
        if not toks or toks[0].value == "for":
            return []                                  # a loop header: the frame, not the answer
        parts = [toks]
        depth, opened = 0, []
        for i, t in enumerate(toks):
            if t.value == "return" and i == 0 or t.value == "=" and depth == 0:
                parts.append(toks[i + 1:])
            if t.value in ("(", "[", "{"):
                depth += 1
                opened.append(i)
            elif t.value in (")", "]", "}") and opened:
                depth -= 1
                inner = toks[opened.pop() + 1:i]
                if any(u.value in ("&&", "||") for u in inner):
                    parts.append(inner)
        return list(dict.fromkeys(p for part in parts for spelled in (reorderings(part) + mirrorings(part))
                                  for p in [Pattern.of(spelled)] if p.weight >= MIN_WEIGHT))


def _split_top(toks: list[Token], ops: tuple) -> list[tuple[str, list[Token]]]:
    """``toks`` cut at the operators ``ops`` outside brackets: [(the operator before it, or "", the part)]."""
    out, depth, start, before = [], 0, 0, ""
    for i, t in enumerate(toks):
        if t.value in ("(", "[", "{"):
            depth += 1
        elif t.value in (")", "]", "}"):
            depth -= 1
        elif depth == 0 and t.value in ops and i > start:
            out.append((before, toks[start:i]))
            start, before = i + 1, t.value
    out.append((before, toks[start:]))
    return out


MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def mirrorings(toks: list[Token], limit: int = REORDERINGS) -> list[list[Token]]:
    """``toks`` with comparisons mirrored (``h >= 0 && h < IH`` is also ``0 <= h && IH > h`` and the
    two mixed): each operand of its top-level ``&&`` and ``||`` that is one comparison, its two sides
    swapped. The operands keep their order. ``[]`` where there is nothing to mirror."""
    if any(t.value in ("=", "?", ":", ";", ",", "return") for t in toks):
        return []                                      # a statement or a call: its groups are mirrored alone
    operands = _split_top(toks, ("&&", "||"))
    choices = []
    for joint, part in operands:
        sides = _split_top(part, tuple(MIRROR))
        if len(sides) == 2 and all(side for _, side in sides):
            (_, left), (op, right) = sides
            choices.append([(joint, part), (joint, right + [Token("op", MIRROR[op], 0, 0)] + left)])
        else:
            choices.append([(joint, part)])
    if all(len(c) == 1 for c in choices):
        return []
    out = []
    for chosen in itertools.islice(itertools.product(*choices), 1, limit + 1):      # the first: toks itself
        seq = []
        for joint, part in chosen:
            seq += ([Token("op", joint, 0, 0)] if joint else []) + part
        out.append(seq)
    return out


def reorderings(toks: list[Token], limit: int = REORDERINGS) -> list[list[Token]]:
    """``toks`` and the same sum written with its terms in another order, each product with its factors
    in another order (``o * stride - pad + t * d`` is also ``t * d - pad + stride * o``): the tokens of each
    spelling. Only where the expression holds no comparison, assignment, ``?:`` or comma anywhere (one
    arithmetic expression) and its sum has at most four terms; a product's factors move only where each
    is one name or number (``(n * K + g) * plane`` keeps its order: with its names renamed, a bracket
    times a name is the shape of many a formula, chapter 03's ``W·(KH·H + KW·V)`` among them); a leading
    minus goes with the term that follows it."""
    if not toks or any(t.value in FRAME for t in toks if t.kind == "op") or len(toks) > 24:
        return [toks]
    lead = toks[0].value if toks[0].value in ("+", "-") else ""
    terms = _split_top(toks[1:] if lead else toks, ("+", "-"))
    terms[0] = (lead or "+", terms[0][1])
    if len(terms) > 4 or any(not part for _, part in terms):
        return [toks]

    def factor_orders(part):
        factors = _split_top(part, ("*",))
        if len(factors) > 3 or any(len(f) != 1 for _, f in factors):
            return [part]
        out = []
        for order in itertools.permutations([f for _, f in factors]):
            out.append([t for i, f in enumerate(order) for t in ([STAR] if i else []) + f])
        return out

    spelled = [[(sign, f) for f in factor_orders(part)] for sign, part in terms]
    out = [toks]
    for order in itertools.permutations(range(len(terms))):
        for choice in itertools.product(*(spelled[i] for i in order)):
            seq = []
            for j, (sign, part) in enumerate(choice):
                if j or sign == "-":
                    seq.append(Token("op", sign, 0, 0))
                seq += part
            out.append(seq)
            if len(out) > limit:
                return out
    return out


def course_order() -> list[str]:
    """The chapters (notebook stems) in the order of notebooks/_toc.yml."""
    listed = re.findall(r"^\s*-?\s*(?:file|root):\s*(\S+)", (NOTEBOOKS / "_toc.yml").read_text(), re.M)
    return [s for s in listed if (NOTEBOOKS / f"{s}.ipynb").exists()]


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else value


def solution_answers() -> list[Answer]:
    """Every line of every solution region in a teacher notebook's code cells."""
    out = []
    for chapter in course_order():
        for i, cell in enumerate(_cells(NOTEBOOKS / f"{chapter}.ipynb")):
            if cell["cell_type"] != "code":
                continue
            language = None
            for line in _text(cell["source"]).splitlines():
                if "### BEGIN SOLUTION" in line:
                    language = "c" if line.strip().startswith("//") else "python"
                elif "### END SOLUTION" in line:
                    language = None
                elif language:
                    out.append(Answer(chapter, f"cell {i}", line, language))
    return out


def gap_answers() -> list[Answer]:
    """Every line a kernel exercise's gap replaces or conceals, read from its stage's kernel file, or
    from the header of kernels/common that holds the kernel for both languages (the gap's inline)."""
    from helpers.chapters.kernel_exercises import GAPS
    from helpers.stages import get_stage
    chapter_of = {name: chapter for chapter in course_order()
                  for name in re.findall(r'kernel_gap\(\\"(\w+)\\"\)', (NOTEBOOKS / f"{chapter}.ipynb").read_text())}
    out = []
    for name, gap in GAPS.items():
        files = [ROOT / "kernels" / get_stage(gap.op, gap.stage).kernel,
                 *(ROOT / "kernels" / "common" / h for h in gap.inline)]
        texts = [f.read_text().splitlines() for f in files]
        lines = next(t for t in texts if any(gap.first in ln for ln in t))
        first = next(i for i, ln in enumerate(lines) if gap.first in ln)
        last = next(i for i in range(first, len(lines)) if gap.last in lines[i])
        if not gap.other_answer:
            out += [Answer(chapter_of[name], f"gap {name}", ln, "c") for ln in lines[first:last + 1]]
        out += [Answer(chapter_of[name], f"gap {name} (concealed)", ln, "comment")
                for t in texts for ln in t if any(text in ln for text in gap.conceal)]
    return out


def answers() -> list[Answer]:
    return solution_answers() + gap_answers()


def texts(path: Path):
    """(where, text) for what a page of the edition shows: a notebook cell's source and each of its
    stored outputs (HTML as the text it shows), or a Markdown file whole."""
    if path.suffix == ".md":
        yield "page", path.read_text()
        return
    for i, cell in enumerate(_cells(path)):
        yield f"cell {i} source", _text(cell["source"])
        for m in TOKEN.finditer(_text(cell["source"])):     # a string is one token: search inside it too
            if m.lastgroup == "str":
                yield f"cell {i} source string", m.group().lstrip("rRbBfFuU")[1:-1]
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            for kind in ("text/plain", "text/markdown"):
                yield f"cell {i} output", _text(data.get(kind, ""))
            yield f"cell {i} output", _text(out.get("text", ""))
            if "text/html" in data:
                yield f"cell {i} output", html.unescape(re.sub(r"<[^>]+>", "", _text(data["text/html"])))


@dataclasses.dataclass(frozen=True)
class Leak:
    answer: Answer
    shown_in: str    # chapter (notebook stem or page)
    where: str       # "cell 12 source", "cell 12 output", "page"
    text: str        # what it shows

    def __str__(self):
        a = self.answer
        return (f"{a.chapter}'s answer ({a.where}) `{a.line.strip()}` is shown in {self.shown_in} "
                f"{self.where}: `{' '.join(self.text.split())}`")


def leaks(edition: Path, course: list[Answer]) -> list[Leak]:
    """Every place of the pages in ``edition`` where an answer stands in its own chapter or an earlier one."""
    rank = {chapter: i for i, chapter in enumerate(course_order())}
    found = {}
    for chapter, position in [*rank.items(), *((page, -1) for page in PAGES)]:
        path = edition / (f"{chapter}.ipynb" if chapter in rank else f"{chapter}.md")
        if not path.exists():
            continue
        mine = [(a, p) for a in course if rank[a.chapter] >= position for p in a.patterns()]
        for where, text in texts(path):
            toks = tokens(text)
            where_is = positions(toks)
            for answer, pattern in mine:
                at = pattern.find(toks, where_is)
                if at is not None:
                    shown = text[toks[at].start:toks[at + len(pattern.items) - 1].end]
                    found.setdefault((answer, chapter, where), Leak(answer, chapter, where, shown))
    return list(found.values())


def allowed(leak: Leak):
    """The entry of ALLOWED that covers ``leak``, or None."""
    return next((e for e in ALLOWED if e[0] == leak.answer.chapter and e[1] in leak.answer.line
                 and (e[2] is None or leak.shown_in in e[2])), None)


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> Path:
    """The student edition, written by its command into a new folder."""
    out = tmp_path_factory.mktemp("leaks") / "student"
    run = subprocess.run([sys.executable, "-m", "helpers.tools.editions", str(out)], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def course() -> list[Answer]:
    return answers()


def test_every_exercise_gives_answers_to_look_for(course):
    """The parser finds the course's answers: the solution regions of at least ten chapters, the
    lines of every kernel gap whose answer is the kernel's own, and enough of them long enough to
    search for."""
    from helpers.chapters.kernel_exercises import GAPS
    assert len({a.chapter for a in course}) >= 10
    own = {name for name, gap in GAPS.items() if not gap.other_answer}
    assert {a.where.split()[1] for a in course if a.where.startswith("gap")} == own
    searched = [a for a in course if a.patterns()]
    assert len(searched) >= len(course) / 3, f"only {len(searched)} of {len(course)} answer lines searched"


@pytest.mark.nbgrader
def test_no_answer_in_its_own_or_an_earlier_chapter_of_the_student_edition(edition, course):
    found = leaks(edition, course)
    left = [str(leak) for leak in found if allowed(leak) is None]
    assert not left, "answers shown no later than their exercise:\n" + "\n".join(left)
    used = {(allowed(leak), leak.shown_in) for leak in found}
    stale = [(e[0], e[1], shown) for e in ALLOWED for shown in (e[2] or (None,))
             if not any(entry == e and (shown is None or shown == s) for entry, s in used)]
    assert not stale, f"ALLOWED entries that match nothing any more (remove them): {stale}"


def _planted(edition: Path, tmp_path: Path, chapter: str, text: str) -> tuple[Path, int]:
    """A folder holding only ``chapter``'s student notebook, with a markdown cell of ``text`` appended,
    and that cell's index."""
    nb = json.loads((edition / f"{chapter}.ipynb").read_text())
    nb["cells"].append({"cell_type": "markdown", "id": "planted-leak", "metadata": {}, "source": [text]})
    (tmp_path / f"{chapter}.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return tmp_path, len(nb["cells"]) - 1


# chapter 09's bounds test as a sentence of prose might hold it: spaced otherwise, `ok` and `oh` renamed
PLANTED = "The copy keeps an element when `const  bool inside_dy=k<K&&row>=0 &&row< OH&& ow>=0&&ow<OW ;` holds."
PLANTED_ANSWER = "const bool ok = k < K && oh >= 0 && oh < OH && ow >= 0 && ow < OW;"


@pytest.mark.nbgrader
def test_a_planted_answer_in_an_earlier_chapter_is_found(edition, tmp_path, course):
    copy, cell = _planted(edition, tmp_path, "03_memoized_bounds", PLANTED)
    hits = [leak for leak in leaks(copy, course) if leak.where == f"cell {cell} source"]
    assert any(leak.answer.chapter == "09_local_memory" and leak.answer.line.strip() == PLANTED_ANSWER
               for leak in hits), [str(h) for h in hits]


@pytest.mark.nbgrader
def test_an_answer_shown_in_a_later_chapter_is_no_leak(edition, tmp_path, course):
    """Planted in chapter 10, chapter 09's answer is no leak (chapter 12's bounds test, which it also
    spells, is one: the planted cell lies before chapter 12)."""
    copy, cell = _planted(edition, tmp_path, "10_bank_conflicts", PLANTED)
    assert course_order().index("10_bank_conflicts") > course_order().index("09_local_memory")
    hits = [leak for leak in leaks(copy, course) if leak.where == f"cell {cell} source"]
    assert not [str(leak) for leak in hits if leak.answer.chapter == "09_local_memory"]
    assert {leak.answer.chapter for leak in hits} == {"12_winograd"}, [str(leak) for leak in hits]


def test_names_are_renamed_one_to_one():
    """Equal names must stay equal: `a + a` is not `a + b`; numbers and operators are kept as they are."""
    toks = tokens("x = m2 / count + eps; y = m2 / m2 + eps")
    anchors = positions(toks)
    assert Pattern.of(tokens("inv = s / n + e")).find(toks, anchors) == 0     # any names
    assert Pattern.of(tokens("v = s / s + e")).find(toks, anchors) == 8       # equal names stay equal
    assert Pattern.of(tokens("v = s / n + s")).find(toks, anchors) is None    # different ones stay different
    assert Pattern.of(tokens("v = s / n - e")).find(toks, anchors) is None    # operators are kept
    assert Pattern.of(tokens("o·stride − pad")).items == Pattern.of(tokens("o * stride - pad")).items
    assert Pattern.of(tokens("a >= 0 and b // 2")).items == Pattern.of(tokens("a>=0&&b/2")).items


@pytest.mark.nbgrader
def test_an_answer_with_its_terms_reordered_is_found(edition, tmp_path, course):
    """13b's box row ``i0 + (ph + pad - r) // stride``, its two terms swapped and its names changed,
    planted in chapter 13 (before 13b), is found."""
    copy, cell = _planted(edition, tmp_path, "13_tensor_cores", "The box starts at `(p + PAD − tap) / S + first`.")
    hits = [leak for leak in leaks(copy, course) if leak.where == f"cell {cell} source"]
    assert any(leak.answer.chapter == "13b_hopper_wgmma_tma" for leak in hits), [str(h) for h in hits]


@pytest.mark.nbgrader
def test_an_answer_between_two_apostrophes_of_prose_is_found(edition, tmp_path, course):
    """An apostrophe of prose (``02's``, ``copy's``) opens no string literal that would hide what
    stands between two of them on one line."""
    text = f"Chapter 02's check, then `{PLANTED_ANSWER}`: the copy's test."
    copy, cell = _planted(edition, tmp_path, "03_memoized_bounds", text)
    hits = [leak for leak in leaks(copy, course) if leak.where == f"cell {cell} source"]
    assert any(leak.answer.chapter == "09_local_memory" for leak in hits), [str(h) for h in hits]
    assert [t.kind for t in tokens("x = f'{a}' + 'b'; it's dy' of")][2:6] == ["str", "op", "str", "op"]


@pytest.mark.nbgrader
def test_an_answer_inside_a_string_literal_is_found(edition, tmp_path, course):
    """A string literal is one token; the text inside it is searched too (chapter 10 once masked chapter
    12's bounds test with ``hide={"oh >= 0 && oh < OH && ow >= 0 && ow < OW": ...}``, a key that spells it)."""
    text = f'show_diff(..., hide={{"{PLANTED_ANSWER}": "why"}})'
    copy, cell = _planted(edition, tmp_path, "03_memoized_bounds", text)
    hits = [leak for leak in leaks(copy, course) if leak.where == f"cell {cell} source string"]
    assert any(leak.answer.chapter == "09_local_memory" for leak in hits), [str(h) for h in hits]


def test_sums_and_products_are_searched_in_every_order():
    spell = lambda text: {" ".join(t.value for t in toks) for toks in reorderings(tokens(text))}
    assert "t * d - pad + stride * o" in spell("o * stride - pad + t * d")
    assert "- pad + o * stride + t * d" in spell("o * stride - pad + t * d")
    assert len(spell("o * stride - pad + t * d")) == 24                  # 3 terms in 6 orders, 2 x 2 factor orders
    assert spell("( ph + pad - r ) / stride + i0") == {"( ph + pad - r ) / stride + i0",
                                                       "i0 + ( ph + pad - r ) / stride"}
    assert spell("a / b * c") == {"a / b * c"} and spell("(n + g) * p") == {"( n + g ) * p"}
    assert spell("a < b + c") == {"a < b + c"}                          # a comparison: not one sum


@pytest.mark.nbgrader
def test_an_answer_with_its_comparisons_mirrored_is_found(edition, tmp_path, course):
    """Chapter 12's padding test ``h >= 0 && h < IH && x_ >= 0 && x_ < IW``, two comparisons mirrored and
    the names changed, planted in chapter 03, is found."""
    text = "Inside: `0 <= row && row < H && col >= 0 && W > col`?"
    copy, cell = _planted(edition, tmp_path, "03_memoized_bounds", text)
    hits = [leak for leak in leaks(copy, course) if leak.where == f"cell {cell} source"]
    assert any(leak.answer.chapter == "12_winograd" for leak in hits), [str(h) for h in hits]


def test_comparisons_are_searched_mirrored():
    spell = lambda text: {" ".join(t.value for t in toks) for toks in mirrorings(tokens(text))}
    assert spell("h >= 0 && h < IH") == {"h >= 0.0 && IH > h", "0.0 <= h && h < IH", "0.0 <= h && IH > h"}
    assert spell("oh_s / STRIDE < OH") == {"OH > oh_s / STRIDE"}
    assert spell("a + b") == set() and spell("ok = a < b") == set()
