"""The benchmark's command line: every mistake a newcomer makes gets one line that says what
is wrong and what is accepted (exit status 2), before any launch; --help lists what exists."""
import pytest

from helpers import bench


@pytest.mark.parametrize("argv, says", [
    (["--layers", "nope"], "unknown layer set 'nope'; choose from"),
    (["--op", "nope"], "unknown op 'nope'"),
    (["--stages", "nope"], "has no stage 'nope'; its stages are"),
    (["--device", "no-such-device"], "No OpenCL device matches"),
    (["--stages", "naive", "--defines", "WG=abc"], "JIT parameters are integers"),
    (["--stages", "naive", "--defines", "WG=0"], "WG must be >= 1"),
    (["--stages", "naive", "--defines", "WG=-64"], "WG must be >= 1"),
    (["--stages", "naive", "--defines", "WG"], "NAME=INTEGER"),
])
def test_mistakes_get_one_line(capsys, monkeypatch, argv, says):
    import pyopencl as cl
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", lambda *a, **k: pytest.fail("a kernel was launched"))
    assert bench.main(argv + ["--out", "-", "--no-vendor"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and says in err[0]


def test_help_lists_ops_layer_sets_and_stages(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--help"])
    text = capsys.readouterr().out
    for word in ("conv_dgrad:", "batchnorm_forward:", "resnet50", "naive_cuda [cuda]", "layer sets:"):
        assert word in text
