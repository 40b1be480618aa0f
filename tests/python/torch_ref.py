"""PyTorch (Debian's python3-torch), the reference of the op and module
tests: imported by those alone, so that the other test files start without it."""
import numpy as np
import pytest

try:
    import torch
    torch.set_num_threads(1)
except ImportError:  # Debian: python3-torch (scripts/install-deps.sh)
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (python3-torch) is not installed")


def to_torch(a, requires_grad=False):
    return torch.tensor(np.asarray(a), requires_grad=requires_grad)


@pytest.fixture(autouse=True)
def torch_seeded():
    if torch is not None:
        torch.manual_seed(0)
    yield
