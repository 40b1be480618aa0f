# Type stubs of attn.optim (compiled in attn._core).
from typing import Sequence

from . import Tensor

class Optimizer:
    def step(self) -> None: ...
    def zero_grad(self) -> None: ...
    lr: float

class SGD(Optimizer):
    def __init__(self, params: Sequence[Tensor], lr: float) -> None: ...

class Adam(Optimizer):
    def __init__(self, params: Sequence[Tensor], lr: float, beta1: float = ...,
                 beta2: float = ..., eps: float = ...) -> None: ...
