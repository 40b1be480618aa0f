"""attn.ops against PyTorch (Debian's python3-torch) on the same inputs:
values and gradients. Tolerances: float64 to 1e-12 (absolute, on values of
order 1), float32 to 2e-6 (the order of float32 rounding over these sums)."""
import math

import numpy as np
import pytest

import attn
from torch_ref import needs_torch, to_torch, torch, torch_seeded  # noqa: F401

pytestmark = needs_torch
TOL = {np.float64: 1e-12, np.float32: 2e-6}


def close(a, b, dtype):
    np.testing.assert_allclose(np.asarray(a), b.detach().numpy(), rtol=0, atol=TOL[dtype])


def check_grads(attn_inputs, torch_inputs, dtype):
    for a, t in zip(attn_inputs, torch_inputs):
        close(a.grad, t.grad, dtype)


def both(*arrays):
    """(attn tensors, torch tensors) of the same arrays, requiring gradients."""
    return ([attn.tensor(a, requires_grad=True) for a in arrays],
            [to_torch(a, True) for a in arrays])


def backward_both(y, ty, dtype):
    g = np.random.rand(*ty.shape).astype(dtype)
    y.backward(g)
    ty.backward(torch.tensor(g))


def d2l_masked_softmax(X, valid_lens):
    """d2l's masked_softmax (10.3), on a copy (d2l writes -1e6 into X)."""
    import d2l_torch
    return d2l_torch.masked_softmax(X.clone(), valid_lens)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lens", [None, [2, 3], [[1, 3], [2, 4]], [0, 4], [[0, 0], [1, 0]]])
def test_masked_softmax(dtype, lens):
    X0 = np.random.rand(2, 2, 4).astype(dtype) * 4
    (X,), (tX,) = both(X0)
    valid = None if lens is None else np.array(lens, np.int64)
    y = attn.ops.masked_softmax(X, valid)
    ty = d2l_masked_softmax(tX, None if valid is None else torch.tensor(valid))
    close(y, ty, dtype)
    backward_both(y, ty, dtype)
    check_grads([X], [tX], dtype)
    if lens is not None and 0 in np.array(lens).ravel():  # a row of length 0: uniform, not NaN
        assert np.isfinite(np.asarray(y)).all()
        assert np.allclose(np.asarray(y)[np.array(lens) == 0], 0.25)


def test_masked_softmax_docstring_explains_the_rule():
    doc = attn.ops.masked_softmax.__doc__
    for words in ["valid_lens", "-1e6", "uniform", "(B, Q)"]:
        assert words in doc


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax(dtype, name):
    X0 = (np.random.rand(3, 5, 7).astype(dtype) - 0.5) * 10
    (X,), (tX,) = both(X0)
    y = getattr(attn.ops, name)(X)
    ty = getattr(torch, name)(tX, dim=-1)
    close(y, ty, dtype)
    backward_both(y, ty, dtype)
    check_grads([X], [tX], dtype)


def d2l_attention(q, k, v, valid_lens):
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
    return torch.bmm(d2l_masked_softmax(scores, valid_lens), v)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lens", [None, [3, 0, 7], [[1, 2, 3, 4, 5], [0, 7, 7, 2, 1],
                                                      [6, 6, 6, 6, 6]]])
@pytest.mark.parametrize("weights", [False, True])
def test_scaled_dot_product_attention_3d(dtype, lens, weights):
    q0, k0, v0 = (np.random.randn(3, n, d).astype(dtype) for n, d in [(5, 8), (7, 8), (7, 6)])
    (q, k, v), (tq, tk, tv) = both(q0, k0, v0)
    valid = None if lens is None else np.array(lens)
    if weights:
        y, w = attn.ops.scaled_dot_product_attention_weights(q, k, v, valid)
        assert w.shape == (3, 5, 7)
    else:
        y = attn.ops.scaled_dot_product_attention(q, k, v, valid)
    ty = d2l_attention(tq, tk, tv, None if valid is None else torch.tensor(valid))
    close(y, ty, dtype)
    backward_both(y, ty, dtype)
    check_grads([q, k, v], [tq, tk, tv], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scaled_dot_product_attention_heads_causal_and_scale(dtype):
    B, Q, K, H, D = 2, 6, 6, 3, 4
    q0, k0, v0 = (np.random.randn(B, n, H, D).astype(dtype) for n in (Q, K, K))
    (q, k, v), (tq, tk, tv) = both(q0, k0, v0)
    y = attn.ops.scaled_dot_product_attention(q, k, v, [4, 6], causal=True, scale=0.3)
    assert y.shape == (B, Q, H, D)
    # d2l: heads to the batch (transpose_qkv), lengths repeated per head, the
    # causal mask as dec_valid_lens = 1..T combined by the minimum.
    heads = lambda t: t.permute(0, 2, 1, 3).reshape(B * H, -1, D)  # noqa: E731
    lens = torch.minimum(torch.tensor([4, 6]).repeat_interleave(H)[:, None],
                         torch.arange(1, Q + 1)[None, :])
    scores = torch.bmm(heads(tq), heads(tk).transpose(1, 2)) * 0.3
    ty = torch.bmm(d2l_masked_softmax(scores, lens), heads(tv))
    ty = ty.reshape(B, H, Q, D).permute(0, 2, 1, 3)
    close(y, ty, dtype)
    backward_both(y, ty, dtype)
    check_grads([q, k, v], [tq, tk, tv], dtype)


def test_attention_dropout_in_training_only():
    q = np.random.randn(2, 4, 8).astype(np.float32)
    base = np.asarray(attn.ops.scaled_dot_product_attention(q, q, q))
    same = np.asarray(attn.ops.scaled_dot_product_attention(q, q, q, dropout=0.5))
    np.testing.assert_array_equal(base, same)  # training=False: no dropout
    dropped = np.asarray(attn.ops.scaled_dot_product_attention(q, q, q, dropout=0.5,
                                                               training=True))
    assert not np.allclose(base, dropped)
    with pytest.raises(ValueError, match="scale must be positive"):
        attn.ops.scaled_dot_product_attention(q, q, q, scale=-1.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_bmm_linear(dtype):
    a0, b0 = np.random.randn(2, 3, 4).astype(dtype), np.random.randn(4, 5).astype(dtype)
    (a, b), (ta, tb) = both(a0, b0)
    y, ty = attn.ops.matmul(a, b), torch.matmul(ta, tb)
    close(y, ty, dtype)
    backward_both(y, ty, dtype)
    check_grads([a, b], [ta, tb], dtype)

    c0 = np.random.randn(2, 4, 3).astype(dtype)
    (a, c), (ta, tc) = both(a0, c0)
    y, ty = attn.ops.bmm(a, c), torch.bmm(ta, tc)
    close(y, ty, dtype)
    backward_both(y, ty, dtype)
    check_grads([a, c], [ta, tc], dtype)

    w0, bias0 = np.random.randn(6, 4).astype(dtype), np.random.randn(6).astype(dtype)
    (x, w, bias), (tx, tw, tbias) = both(a0, w0, bias0)
    y, ty = attn.ops.linear(x, w, bias), torch.nn.functional.linear(tx, tw, tbias)
    close(y, ty, dtype)
    backward_both(y, ty, dtype)
    check_grads([x, w, bias], [tx, tw, tbias], dtype)


def test_transpose_qkv_and_output_are_d2l_s():
    import d2l_torch
    X0 = np.random.randn(2, 5, 12).astype(np.float32)
    mha = d2l_torch.MultiHeadAttention("0.17", 12, 3, 0.0)
    (X,), (tX,) = both(X0)
    y, ty = attn.ops.transpose_qkv(X, 3), mha.split(tX)
    close(y, ty, np.float32)
    back = attn.ops.transpose_output(y, 3)
    np.testing.assert_array_equal(np.asarray(back), X0)
    backward_both(back, ty.reshape(2, 3, 5, 4).permute(0, 2, 1, 3).reshape(2, 5, 12),
                  np.float32)
    check_grads([X], [tX], np.float32)
