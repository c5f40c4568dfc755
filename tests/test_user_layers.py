"""A learner's own layers (helpers/ops/user_layers.py): `bench --layers FILE.json` and `--layer TEXT`,
each mistake named with its layer and key before any work."""
import json
import re

import pytest

from helpers import bench
from helpers.ops.user_layers import layer_from, parse_inline, user_layers


def test_a_file_of_layers_becomes_a_set_named_after_it(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps([{"n": 2, "c": 24, "h": 9, "w": 9, "k": 16},
                                {"name": "row", "n": 1, "c": 8, "h": 9, "w": 9, "k": 12, "kernel": [1, 7]},
                                {"n": 1, "c": 8, "size": [5, 6, 7], "k": 8, "stride": 2, "groups": 4}]))
    name, lays = user_layers(str(path), None)
    assert name == "mine" and [lay["name"] for lay in lays] == ["n2 c24 9x9 k16 3x3 s1", "row", "n1 c8 5x6x7 k8 3x3x3 s2 g4"]
    assert lays[1]["kernel"] == (1, 7) and lays[1]["padding"] == (0, 3)      # the size kept at stride 1
    assert lays[2]["size"] == (5, 6, 7) and lays[2]["padding"] == (1, 1, 1)


@pytest.mark.parametrize("entry, says", [
    ({"n": 2, "c": 4, "h": 9, "w": 9}, "missing k"),
    ({"n": 2, "c": 4, "k": 4}, "missing h and w (or size)"),
    ({"n": 2, "c": 4, "h": 9, "w": 9, "k": 4, "kernal": 3}, "unknown key kernal"),
    ({"n": 0, "c": 4, "h": 9, "w": 9, "k": 4}, "n must be >= 1"),
    ({"n": 2, "c": 4, "h": 9.5, "w": 9, "k": 4}, "h must be an integer"),
    ({"n": 2, "c": 4, "h": 9, "w": 9, "k": 4, "kernel": [1, 3, 3]}, "kernel has 3 entries"),
    ({"n": 2, "c": 4, "h": 9, "w": 9, "k": 4, "padding": -1}, "padding must be >= 0"),
])
def test_a_wrong_layer_is_named_with_its_key(entry, says):
    with pytest.raises(ValueError, match=re.escape(f"layer 2: {says}")):
        layer_from(entry, "layer 2")


def test_one_layer_inline():
    assert parse_inline("n=32,c=96,h=35,w=35,k=96,kernel=1x7,stride=1,padding=0x3") == \
        {"n": 32, "c": 96, "h": 35, "w": 35, "k": 96, "kernel": (1, 7), "stride": 1, "padding": (0, 3)}
    for text, says in (("n=32,c", "KEY=VALUE pairs"), ("n=32,kernel=three", "an integer, or one per axis")):
        with pytest.raises(ValueError, match=says):
            parse_inline(text)


@pytest.mark.parametrize("content, says", [
    ("not json", "not JSON"), ("[]", "a JSON list of one or more layers"),
    ('[{"n": 1, "c": 2, "h": 3, "w": 3, "k": 2, "name": "a"}, {"n": 1, "c": 2, "h": 3, "w": 3, "k": 2, "name": "a"}]',
     "two layers are named 'a'"),
])
def test_a_wrong_file_is_one_line_before_any_work(tmp_path, capsys, monkeypatch, content, says):
    import pyopencl as cl
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", lambda *a, **k: pytest.fail("a kernel was launched"))
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert bench.main(["--layers", str(path), "--out", "-", "--no-vendor"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_bench_runs_one_inline_layer_and_names_it_by_its_shape(tmp_path, capsys, monkeypatch):
    """--layer runs that layer; the run is written beside the learner (the current folder), named
    after the layer, never into results/."""
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in bench.RESULTS.iterdir())
    assert bench.main(["--layer", "n=1,c=8,h=7,w=9,k=4,kernel=3", "--stages", "naive", "--no-vendor",
                       "--repeats", "3"]) == 0
    out = capsys.readouterr().out
    assert "n1 c8 7x9 k4 3x3 s1 02_naive" in out
    written = list(tmp_path.glob("conv_dgrad_layer_*.json"))
    assert len(written) == 1 and json.loads(written[0].read_text())["layer_set"] == "layer"
    assert sorted(p.name for p in bench.RESULTS.iterdir()) == before
