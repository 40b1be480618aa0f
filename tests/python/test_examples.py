"""examples/python/ reproduce the printed outputs of d2l 10.2-10.6 through the
bindings: every line the C++ example prints (examples/*.cpp), but the lines
that name the figures it draws (the Python examples draw none), for the same
seed; 10.4 (no C++ example) prints d2l's shapes."""
import os
import subprocess
import sys

import pytest

from conftest import SOURCE

EXAMPLES = os.environ.get("ATTN_EXAMPLES",
                          os.path.join(SOURCE, "build", "release", "examples"))
PYTHON_EXAMPLES = os.path.join(SOURCE, "examples", "python")


def run_python(name, *args):
    r = subprocess.run([sys.executable, os.path.join(PYTHON_EXAMPLES, name + ".py"), *args],
                       capture_output=True, text=True, check=False, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    return r.stdout


def printed_lines(text):
    """The non-empty lines, but those naming a figure file."""
    return [line for line in text.splitlines() if line.strip() and ".png" not in line]


@pytest.mark.parametrize("name,seed", [("nadaraya_watson", "0"), ("nadaraya_watson", "7"),
                                       ("attention_scoring", "0"), ("attention_scoring", "7"),
                                       ("multihead_attention", "0"), ("positional_encoding", "0")])
def test_python_example_prints_what_the_cpp_example_prints(name, seed, tmp_path):
    cpp = subprocess.run([os.path.join(EXAMPLES, name), "--seed", seed, "--out", str(tmp_path)],
                         capture_output=True, text=True, check=False)
    assert cpp.returncode == 0, cpp.stderr
    expected = printed_lines(cpp.stdout)
    assert len(expected) >= 3
    assert printed_lines(run_python(name, "--seed", seed)) == expected


def test_bahdanau_example_prints_d2l_s_shapes():
    out = run_python("bahdanau_attention")
    assert "output.shape = [4, 7, 10]" in out
    assert "len(state) = 3, state[0].shape = [4, 7, 16]" in out
    assert "state[1].shape = [2, 4, 16]" in out
    assert "attention_weights.shape = [4, 7, 7]" in out
