"""attn.Tensor: NumPy in and out without copies, dtypes, strides, autograd,
no_grad, repr, and the library's errors as Python exceptions."""
import gc
import weakref

import numpy as np
import pytest

import attn
from torch_ref import needs_torch, to_torch, torch, torch_seeded  # noqa: F401

DTYPES = [np.float32, np.float64, np.int32, np.int64]


def address(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_in_and_out_share_memory(dtype):
    a = np.arange(12, dtype=dtype).reshape(3, 4)
    t = attn.Tensor(a)
    assert t.data_ptr == address(a)
    assert t.shape == (3, 4) and t.strides == (4, 1) and t.dtype == np.dtype(dtype)
    b = np.asarray(t)
    assert address(b) == address(a) and b.dtype == dtype
    b[1, 2] = 42  # one memory: written through the round trip, seen by all three
    assert a[1, 2] == 42 and t.tolist()[1][2] == 42
    assert address(t.numpy()) == address(a)
    assert attn.from_numpy(a).data_ptr == address(a)


def test_strided_arrays_are_views_not_copies():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    v = a.transpose(2, 0, 1)[1:, :, ::2]
    t = attn.Tensor(v)
    assert t.data_ptr == address(v)
    assert t.shape == v.shape
    assert t.strides == tuple(s // 4 for s in v.strides)
    np.testing.assert_array_equal(np.asarray(t), v)
    np.testing.assert_array_equal(np.asarray(t.contiguous()), v)  # a copy, same values
    assert attn.Tensor(np.ones((0, 3), np.float32)).shape == (0, 3)
    assert attn.Tensor(np.array(2.5)).item() == 2.5


def test_a_view_keeps_its_source_alive():
    a = np.arange(1000, dtype=np.float32)
    t = attn.Tensor(a)
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is not None  # the tensor holds the array's buffer
    np.testing.assert_array_equal(np.asarray(t)[:3], [0, 1, 2])
    # ... and an array made from a tensor keeps the tensor (its memory) alive.
    s = attn.arange(0, 1000) * 2.0
    b = np.asarray(s)
    del s
    gc.collect()
    np.testing.assert_array_equal(b[:3], [0, 2, 4])
    b[0] = 7.0
    assert b[0] == 7.0
    del t
    gc.collect()
    assert ref() is None  # ... and lets it go with the last tensor


def test_op_results_are_arrays_without_copies():
    x = np.random.rand(2, 3, 4).astype(np.float32)
    y = attn.ops.softmax(x)
    assert isinstance(y, attn.Tensor)
    assert address(np.asarray(y)) == y.data_ptr


def test_refused_arrays():
    with pytest.raises(ValueError, match="not supported"):
        attn.Tensor(np.zeros(3, np.float16))
    with pytest.raises(ValueError, match="read-only"):
        a = np.zeros(3, np.float32)
        a.flags.writeable = False
        attn.from_numpy(a)
    with pytest.raises(ValueError, match="negative strides"):
        attn.from_numpy(np.zeros(4, np.float32)[::-1])
    # An op's argument is converted instead (here: a copy of the reversed view).
    np.testing.assert_allclose(np.asarray(attn.ops.softmax(np.zeros(4, np.float32)[::-1])),
                               np.full(4, 0.25))
    with pytest.raises(ValueError, match="dtype"):
        attn.zeros((2,), dtype=np.uint8)


def test_tensor_copies_and_dtypes():
    a = np.arange(4, dtype=np.int64)
    t = attn.tensor(a, dtype="float32")
    assert t.dtype == np.float32 and t.data_ptr != address(a)
    assert attn.tensor([[1, 2], [3, 4]]).dtype == np.int64
    assert attn.tensor([1.5]).dtype == np.float64
    assert attn.zeros((2, 3)).dtype == np.float32
    assert attn.ones((2,), dtype=np.float64).tolist() == [1.0, 1.0]
    assert attn.arange(3).tolist() == [0.0, 1.0, 2.0]
    assert attn.arange(1, 4, dtype="i64").tolist() == [1, 2, 3]
    assert t.to(np.float64).dtype == np.float64


def test_random_numbers_follow_the_seed():
    attn.manual_seed(3)
    a = np.asarray(attn.rand((5,))).copy()
    attn.manual_seed(3)
    assert np.array_equal(a, np.asarray(attn.rand((5,))))
    assert ((a >= 0) & (a < 1)).all()
    assert attn.randn((2, 3), dtype=np.float64).dtype == np.float64


def test_repr_shows_shape_and_dtype():
    t = attn.tensor(np.array([[1.0, 2.0]], np.float32), requires_grad=True)
    assert repr(t) == "tensor([[1., 2.]], shape=(1, 2), dtype=float32, requires_grad=True)"
    assert "shape=(3,), dtype=int64" in repr(attn.tensor(np.arange(3)))
    assert str(attn.tensor(np.arange(3))) == "tensor([0, 1, 2])"


@needs_torch
def test_backward_and_grad_equal_torch():
    x0 = np.random.rand(3, 4)
    w0 = np.random.rand(4, 2)
    x, w = attn.tensor(x0, requires_grad=True), attn.tensor(w0, requires_grad=True)
    y = ((x @ w).tanh() * 2.0 - x.sum(1, keepdim=True) / 3.0).exp().mean()
    y.backward()
    tx, tw = to_torch(x0, True), to_torch(w0, True)
    ty = ((tx @ tw).tanh() * 2.0 - tx.sum(1, keepdim=True) / 3.0).exp().mean()
    ty.backward()
    assert abs(y.item() - ty.item()) < 1e-12
    np.testing.assert_allclose(np.asarray(x.grad), tx.grad.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(w.grad), tw.grad.numpy(), rtol=0, atol=1e-12)
    assert x.is_leaf and not y.is_leaf and y.requires_grad
    x.zero_grad()
    assert x.grad is None


@needs_torch
@pytest.mark.parametrize("op", ["add", "sub", "mul", "truediv", "radd", "rsub", "rmul",
                                "rtruediv", "neg", "matmul", "relu", "reshape", "permute",
                                "transpose", "to", "clone", "detach", "exp", "log", "sqrt",
                                "abs", "sin", "cos", "tanh", "sigmoid", "pow", "sum", "mean"])
def test_tensor_methods_equal_torch(op):
    a0, b0 = np.random.rand(2, 3) + 0.5, np.random.rand(2, 3) + 0.5
    fns = {
        "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
        "truediv": lambda a, b: a / b, "radd": lambda a, b: 2.0 + a, "rsub": lambda a, b: 2.0 - a,
        "rmul": lambda a, b: 3 * a, "rtruediv": lambda a, b: 1.0 / a, "neg": lambda a, b: -a,
        "matmul": lambda a, b: a @ b.transpose(0, 1), "relu": lambda a, b: (a - 1.0).relu(),
        "reshape": lambda a, b: a.reshape(3, 2) * b.reshape((3, 2)),
        "permute": lambda a, b: a.permute(1, 0) * 2.0,
        "transpose": lambda a, b: a.transpose(0, 1) * 2.0,
        "to": lambda a, b: a.to(np.float32 if isinstance(a, attn.Tensor) else torch.float32),
        "clone": lambda a, b: a.clone() * b, "detach": lambda a, b: a.detach() * b,
        "exp": lambda a, b: a.exp(), "log": lambda a, b: a.log(), "sqrt": lambda a, b: a.sqrt(),
        "abs": lambda a, b: (a - 1.0).abs(), "sin": lambda a, b: a.sin(),
        "cos": lambda a, b: a.cos(), "tanh": lambda a, b: a.tanh(),
        "sigmoid": lambda a, b: a.sigmoid(), "pow": lambda a, b: a ** 0.8,
        "sum": lambda a, b: (a * b).sum((0, 1)), "mean": lambda a, b: (a * b).mean(1),
    }
    a, b = attn.tensor(a0, requires_grad=True), attn.tensor(b0, requires_grad=True)
    ta, tb = to_torch(a0, True), to_torch(b0, True)
    y, ty = fns[op](a, b), fns[op](ta, tb)
    np.testing.assert_allclose(np.asarray(y), ty.detach().numpy(), rtol=1e-6, atol=1e-7)
    if y.requires_grad:
        g = np.asarray(np.random.rand(*ty.shape))
        y.backward(g.astype(np.asarray(y).dtype))
        ty.backward(torch.tensor(g, dtype=ty.dtype))
        for t, tt in [(a, ta), (b, tb)]:
            if tt.grad is None:
                assert t.grad is None
            else:
                np.testing.assert_allclose(np.asarray(t.grad), tt.grad.numpy(), rtol=1e-6,
                                           atol=1e-7)


def test_no_grad():
    x = attn.tensor(np.ones(3), requires_grad=True)
    assert attn.is_grad_enabled()
    with attn.no_grad():
        assert not attn.is_grad_enabled()
        y = x * 2.0
        with attn.no_grad():
            pass
        assert not attn.is_grad_enabled()
    assert attn.is_grad_enabled()
    assert not y.requires_grad
    assert (x * 2.0).requires_grad


def test_errors_are_python_exceptions_with_the_library_message():
    with pytest.raises(ValueError, match=r"^matmul: inner dimensions differ"):
        attn.ops.matmul(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))
    with pytest.raises(ValueError, match=r"masked_softmax: expected scores of shape \(B, Q, K\)"):
        attn.ops.masked_softmax(np.ones((2, 3), np.float32), [1, 2])
    with pytest.raises(ValueError, match="expected a floating dtype"):
        attn.ops.softmax(np.ones(3, np.int64))
    with pytest.raises(ValueError, match="backward: a gradient must be given"):
        attn.tensor(np.ones(3), requires_grad=True).backward()
    with pytest.raises(ValueError, match="num_hiddens 30 is not divisible by num_heads 4"):
        attn.nn.MultiHeadAttention(30, 30, 30, 30, 4, 0.0)
    with pytest.raises(RuntimeError, match="does not exist"):
        attn.Translator("/nonexistent/model")
    with pytest.raises(ValueError, match="set_num_threads"):
        attn.set_num_threads(0)


def test_version():
    assert attn.__version__ == attn.version()
    assert attn.__version__.count(".") == 2
