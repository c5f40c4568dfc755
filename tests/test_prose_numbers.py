"""Prose from data: every number quoted in a chapter's text (ratios such as x1.23 or 1.23x,
decimals, percentages) is printed by a code cell of the same section, above it, in the committed
notebook: the same number, or a printed one rounded to the digits quoted.

The rule, strict and still readable: a section starts at each markdown heading of level 1 to 3
(`#`, `##`, `###`); a number quoted in a markdown cell must appear in the output (printed text,
plain or markdown display) of a code cell that lies after the section's heading and before the
quoting cell. A number printed in an earlier section does not count, so a wrong figure cannot
pass because the same digits were printed somewhere else in the chapter; a number in the text
before a section's first code cell cannot pass at all, so say it after the cell that prints it.
A heading inside a markdown cell starts the new section for the text that follows it.

The cells print from results/, so a new recording that changes a number fails here until the
prose is updated; a number the text derives itself is listed in DERIVED with its reason.

Counts are numbers too: an integer with thousands separators (1,152), an integer with a unit of
measure (178 registers, 16 bytes, 7,168 work-items, 4 ms) and the parts of "N of M" (70 of the 98
warps) follow the same rule (``COUNT``). A chapter whose prose has not yet been read against its
outputs for counts is listed in COUNTS_PENDING (a strict expected failure)."""
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NUMBER = re.compile(r"(?<![\w./-])(?:x?\d+\.\d+x?|\d+(?:\.\d+)?\s?%)(?![\w.])")
COUNT = re.compile(r"(?<![\w./-])(?:\d{1,3}(?:,\d{3})+|\d+(?=\s?(?:ms|µs|GB/s|GFLOP/s|TFLOP/s|TB/s|registers|bytes|B|"
                   r"KiB|MiB|MB|warps|work-items|FLOP)\b)|\d+(?=\s+of\s+(?:the\s+)?\d))(?![\w.,]\d)")
HEADING = re.compile(r"^#{1,3}\s", re.M)   # a section: level 1 to 3
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
# Numbers that are inputs or arithmetic stated in the same sentence, not measurements.
DERIVED = {
    "00_devices_and_timing": {"4": "bytes per float, a definition"},
    "07_combining_input_depth": {"9.0": "Hopper's compute capability, a name, not a measurement",
                                 "1152": "144 weights times 8 channels, stated beside it",
                                 "255": "registers per work-item at most on NVIDIA GPUs, an input (CUDA guide)",
                                 "65536": "registers per Hopper SM, an input (CUDA guide)",
                                 "64": "warps per Hopper SM, an input (CUDA guide)",
                                 "32": "work-items per warp, an input"},
    "04_weight_vectorization": {"4.5": "9 requests over 2, stated beside it", "32": "8 floats of 4 bytes, stated beside it",
                                "36": "9 floats of 4 bytes, stated beside it",
                                "128": "a line size the picture offers, an input", "4": "bytes per float"},
    "09_local_memory": {"228": "KiB of shared memory per Hopper SM, a published limit (an input)"},
    "10b_bank_conflicts_evidence": {"65536": "the 32-bit registers of one NVIDIA SM (Volta to Hopper), a hardware constant"},
    "11_conv_as_gemm": {"55": "the chapter's target share of the FMA peak, an input (printed beside the measured one)"},
    "12_winograd": {"2.25": "36 multiplications over 16, derived in the chapter"},
    "12a_winograd_f4x4": {"65536": "the 32-bit registers of one NVIDIA compute unit (Volta to Hopper), a hardware "
                                   "constant (the cell below computes with it)"},
    "13_tensor_cores": {"16": "the bytes of an ldmatrix row and of a cp.async copy: the instructions' definitions",
                        "64": "a row of 32 16-bit values, stated beside it",
                        "80": "a padded row of 40 16-bit values, stated beside it",
                        "128": "the bytes one pass over the 32 banks serves (chapter 10)",
                        "10000": "the exercise check's number of products, an input"},
    "13b_hopper_wgmma_tma": {"16": "a warp's rows of a 64-row wgmma tile, and the bytes of a copy: the instructions' "
                                   "definitions", "1024": "8 rows of 128 bytes, the swizzle's period, stated beside it",
                             "128": "the bytes of one swizzled row, the hardware's swizzle width",
                             "32": "a k-step in bytes (8 TF32 or 16 16-bit values), stated beside it"},
    "13c_tensor_cores_evidence": {"4608": "512 channels x 9 taps, the reduction of res512@7, stated in the sentence",
                                  "2048": "SPLIT_MIN, the launcher's constant named in the sentence",
                                  "989": "the data sheet's sparse TF32 rate, quoted from it, not measured"},
    "14_batch_norm": {"0.1": "the momentum, an input", "0.01": "the noise scale of the example, an input",
                      "80": "the chapter's target share of the copy bandwidth, an input",
                      "16": "the bytes of a float4, a definition", "52": "13 floats of 4 bytes, stated beside it",
                      "9": "two float4s and an offset, a unit's registers, stated beside it",
                      "225": "25 units of 9 registers, stated in the sentence",
                      "255": "the registers an NVIDIA GPU gives a thread at most, a hardware limit"},
    "14b_batch_norm_evidence": {"65536": "the registers of one H200 compute unit, a hardware fact",
                                "2048": "the work-items one H200 compute unit holds, a hardware fact"},
}


COUNTS_PENDING: dict = {}   # notebook stem -> why its counts are not yet read against its outputs


def _core(quoted: str) -> str:
    return re.sub(r"^x|x$|\s?%$|,", "", quoted)


TOKEN = re.compile(r"\d{1,3}(?:,\d{3})+(?![\d])|\d+(?:\.\d+)?")


def _shown(core: str, printed: set) -> bool:
    """The quoted number is a printed number, or a printed one rounded to the quoted digits."""
    if core in printed:
        return True
    digits = len(core.split(".")[1]) if "." in core else 0
    return any("." in p and len(p.split(".")[1]) > digits and f"{float(p):.{digits}f}" == core for p in printed)


def _printed(cell) -> set:
    text = ""
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        text += out.get("text", "") + data.get("text/plain", "") + data.get("text/markdown", "")
    return {t.replace(",", "") for t in TOKEN.findall(text)}


def _parts(source: str) -> list[tuple[bool, str]]:
    """The markdown split at its headings: (starts a section, text), code fences kept out of the
    heading search (a `# comment` in a fenced block is no heading)."""
    masked = FENCE.sub(lambda m: re.sub(r"#", " ", m.group()), source)
    cuts = [m.start() for m in HEADING.finditer(masked)]
    bounds = [0] + cuts + [len(source)]
    return [(start in cuts, source[start:end]) for start, end in zip(bounds, bounds[1:]) if end > start]


def unprinted_numbers(nb, stem: str = "", counts: bool = False) -> list[str]:
    """The quoted numbers (and with ``counts``, the quoted counts) that no code cell of their section
    prints above them."""
    allowed = DERIVED.get(stem, {})
    printed, missing = set(), []
    for cell in nb.cells:
        if cell.cell_type == "code":
            printed |= _printed(cell)
        elif cell.cell_type == "markdown":
            for new_section, text in _parts(cell.source):
                if new_section:
                    printed = set()
                masked = FENCE.sub("", text)
                for quoted in NUMBER.findall(masked) + (COUNT.findall(masked) if counts else []):
                    core = _core(quoted)
                    if not _shown(core, printed) and core not in allowed:
                        missing.append(quoted)
    return missing


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_quoted_number_is_printed_in_its_section(path):
    missing = unprinted_numbers(nbformat.read(path, as_version=4), path.stem)
    assert not missing, (f"{path.name}: numbers in the prose that no cell of their section prints above them: "
                         f"{missing}; print them in a code cell of that section, above the text, or compute "
                         f"them into the text")


@pytest.mark.parametrize("path", [
    pytest.param(p, id=p.stem, marks=pytest.mark.xfail(reason=COUNTS_PENDING[p.stem], strict=True))
    if p.stem in COUNTS_PENDING else pytest.param(p, id=p.stem) for p in NOTEBOOKS])
def test_every_quoted_count_is_printed_in_its_section(path):
    missing = unprinted_numbers(nbformat.read(path, as_version=4), path.stem, counts=True)
    assert not missing, (f"{path.name}: numbers or counts in the prose that no cell of their section prints "
                         f"above them: {missing}")


def test_counts_with_units_and_separators_are_caught():
    nb = _notebook(("md", "## 1"), ("code", "registers 178, spills 1,716 B\n"),
                   ("md", "It uses 178 registers and spills 1,716 bytes; 70 of the 98 warps diverge; 3x3 kernel, "
                          "chapter 06, 16 output channels."))
    assert unprinted_numbers(nb, counts=True) == ["70", "98"]
    assert unprinted_numbers(nb) == []


def _notebook(*cells):
    """A synthetic notebook: ("md", text) or ("code", printed text)."""
    nb = nbformat.v4.new_notebook()
    for kind, text in cells:
        if kind == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(text))
        else:
            cell = nbformat.v4.new_code_cell("print(...)")
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
            nb.cells.append(cell)
    return nb


def test_a_number_printed_only_in_an_earlier_section_is_caught():
    nb = _notebook(("md", "## 1. Timing"), ("code", "naive 7.9 ms\n"), ("md", "The naive stage took 7.9 ms."),
                   ("md", "## 2. Memoized bounds"), ("code", "memoized 6.1 ms\n"),
                   ("md", "The memoized stage is 7.9% faster, and took 6.1 ms."))
    assert unprinted_numbers(nb) == ["7.9"]           # the old rule (anywhere above) passed it


def test_a_number_printed_in_its_section_passes_rounded_to_the_quoted_digits():
    nb = _notebook(("md", "## 2. Memoized bounds"), ("code", "memoized 6.1234 ms, x1.296 the naive\n"),
                   ("md", "It took 6.12 ms, x1.30 the naive; 30 % of the FMA peak is 0.3 of it."))
    assert unprinted_numbers(nb) == ["30 %", "0.3"]
    nb.cells[1].outputs[0].text += "30 % of peak, 0.30 of it\n"
    assert unprinted_numbers(nb) == []


def test_a_heading_inside_a_cell_starts_the_section_for_the_text_after_it():
    nb = _notebook(("md", "## 1"), ("code", "1.5 ms\n"), ("md", "It took 1.5 ms.\n\n## 2. Next\nAgain 1.5 ms."))
    assert unprinted_numbers(nb) == ["1.5"]
    nb = _notebook(("md", "## 1"), ("code", "1.5 ms\n"), ("md", "```\n# a comment, 1.5 ms\n```\nStill 1.5 ms."))
    assert unprinted_numbers(nb) == []


def test_level_4_headings_do_not_start_a_section():
    nb = _notebook(("md", "## 1"), ("code", "2.5 ms\n"), ("md", "#### Detail\nIt took 2.5 ms."))
    assert unprinted_numbers(nb) == []


def test_cpu_statements_say_when_the_spread_hides_a_difference():
    from helpers.chapters.pictures_direct import describe_step
    row = lambda n, t, q1, q3: {"layer": "a", "key": f"0{n}_s{n}", "number": n, "stage": f"s{n}",
                                "median_ms": t, "q1_ms": q1, "q3_ms": q3, "gflops": 1 / t, "x_first": 4 / t}
    run = {"device": {"name": "dev"}, "rows": [row(2, 4.0, 3.0, 5.0), row(3, 3.5, 3.2, 3.9)]}
    assert "within the spread" in describe_step(run, 3)[1]
    run["rows"][1] = row(3, 2.0, 1.9, 2.1)
    assert "2.00x faster" in describe_step(run, 3)[1]
