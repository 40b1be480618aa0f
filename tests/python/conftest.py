"""Shared set-up of the Python module's tests (tests/python/).

ctest runs each test file with PYTHONPATH at the build tree's python/ (the
package attn as built) and ATTN_CLI, ATTN_EXAMPLES and ATTN_TEST_WORK set
(tests/python/CMakeLists.txt). By hand:

    PYTHONPATH=build/release/python ATTN_CLI=build/release/attn \\
        /usr/bin/python3 -m pytest tests/python
"""
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(SOURCE, "tools"))  # d2l_torch: d2l's PyTorch modules
sys.path.insert(0, HERE)  # torch_ref, make_models

import attn  # noqa: E402

CLI = os.environ.get("ATTN_CLI", os.path.join(SOURCE, "build", "release", "attn"))
WORK = os.environ.get("ATTN_TEST_WORK", os.path.join(SOURCE, "build", "release", "tests",
                                                     "python", "work"))


def run_cli(*args, stdin=None):
    """`attn ARGS...`: its stdout (the test fails on a non-zero exit)."""
    r = subprocess.run([CLI, *args], input=stdin, capture_output=True, text=True, check=False)
    assert r.returncode == 0, f"attn {' '.join(args)}: exit {r.returncode}: {r.stderr}"
    return r.stdout


@pytest.fixture(autouse=True)
def _seeded():
    attn.manual_seed(0)
    np.random.seed(0)
    yield


@pytest.fixture(scope="session")
def models():
    """Two small model directories trained by `attn train` (make_models.py):
    {"word": d2l's word model, "spm": a SentencePiece translator}."""
    import make_models
    return make_models.make(CLI, WORK)
