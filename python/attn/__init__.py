"""attn: d2l's attention mechanisms and the Transformer, from the tensor up.

The Python face of the attn C++ library (bindings only: every rule, default
and message is the library's):

    import numpy as np, attn
    X = np.random.rand(2, 2, 4).astype(np.float32)
    attn.ops.masked_softmax(X, [2, 3])          # d2l's valid-lengths rule
    mha = attn.nn.MultiHeadAttention(100, 100, 100, 100, num_heads=5, dropout=0.5)
    tr = attn.Translator("out/model")           # a model written by `attn train`
    tr.translate(["I'm home."])

Arrays go in and out without copies: attn.Tensor(a) and attn.from_numpy(a)
share a NumPy array's memory, np.asarray(t) shares a tensor's. Library
errors are ValueError (shapes, dtypes, values) or RuntimeError (files and
the rest), with the library's one-line message.
"""
import sys as _sys

from . import _core
from ._core import (  # noqa: F401
    Hypothesis,
    PairScore,
    Tensor,
    Translator,
    __version__,
    arange,
    evaluate,
    from_numpy,
    get_num_threads,
    hyperparameters,
    is_grad_enabled,
    manual_seed,
    no_grad,
    normal,
    ones,
    rand,
    randn,
    set_num_threads,
    tensor,
    train,
    version,
    zeros,
)

ops = _core.ops
nn = _core.nn
optim = _core.optim
nn.masked_softmax = ops.masked_softmax

# `import attn.ops` and `from attn.nn import MultiHeadAttention` find the
# compiled submodules.
for _name in ("ops", "nn", "optim"):
    _sys.modules[__name__ + "." + _name] = getattr(_core, _name)
del _name

__all__ = [
    "Hypothesis", "PairScore", "Tensor", "Translator", "__version__", "arange", "evaluate",
    "from_numpy", "get_num_threads", "hyperparameters", "is_grad_enabled", "manual_seed", "nn",
    "no_grad", "normal", "ones", "ops", "optim", "rand", "randn", "set_num_threads", "tensor",
    "train", "version", "zeros",
]
