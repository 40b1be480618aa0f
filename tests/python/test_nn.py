"""attn.nn against d2l's PyTorch modules (tools/d2l_torch.py) with the same
weights (moved by state_dict / load_state_dict in one line): outputs, input
gradients and parameter gradients. float32, to 2e-5 absolute plus 1e-5
relative (sums of a few hundred float32 products; a block's parameter
gradients reach 100)."""
import numpy as np
import pytest

import attn
from torch_ref import needs_torch, to_torch, torch, torch_seeded  # noqa: F401

pytestmark = needs_torch
TOL = 2e-5


def close(a, b, tol=TOL):
    np.testing.assert_allclose(np.asarray(a), b.detach().numpy(), rtol=tol / 2, atol=tol)


def load_torch_weights(module, tmodule):
    """attn module <- the PyTorch module's weights, in one line."""
    module.load_state_dict(tmodule.state_dict())


def compare(module, tmodule, inputs, tinputs, call, tcall, tol=TOL, grads=True):
    """Same output; then the same gradients of every float input and parameter."""
    y, ty = call(module, *inputs), tcall(tmodule, *tinputs)
    close(y, ty, tol)
    if not grads:
        return
    g = np.random.rand(*ty.shape).astype(np.float32)
    y.backward(g)
    ty.backward(torch.tensor(g))
    for a, t in zip(inputs, tinputs):
        if isinstance(a, attn.Tensor) and a.requires_grad:
            close(a.grad, t.grad, tol)
    tparams = dict(tmodule.named_parameters())
    for name, p in module.named_parameters():
        close(p.grad, tparams[name].grad, tol)


def rand_inputs(*shapes):
    arrays = [np.random.randn(*s).astype(np.float32) for s in shapes]
    return ([attn.tensor(a, requires_grad=True) for a in arrays],
            [to_torch(a, True) for a in arrays])


def test_state_dict_names_and_shapes_are_d2l_s():
    import d2l_torch
    for bias in (False, True):
        m = attn.nn.MultiHeadAttention(16, 16, 16, 16, 4, 0.0, bias=bias)
        t = d2l_torch.MultiHeadAttention("0.17", 16, 4, 0.0, bias)
        sd, tsd = m.state_dict(), t.state_dict()
        assert list(sd) == list(tsd)
        assert all(sd[k].shape == tuple(tsd[k].shape) for k in sd)
        # The arrays are the parameters' memory: no copy.
        assert sd["W_q.weight"].__array_interface__["data"][0] == m.W_q.weight.data_ptr


def test_d2l_multihead_attention_weights_give_the_same_output():
    """A d2l PyTorch MultiHeadAttention's weights loaded into attn's."""
    import d2l_torch
    t = d2l_torch.MultiHeadAttention("0.17", 20, 5, 0.0).eval()
    m = attn.nn.MultiHeadAttention(20, 20, 20, 20, num_heads=5, dropout=0.0).eval()
    load_torch_weights(m, t)
    (X, Y), (tX, tY) = rand_inputs((2, 4, 20), (2, 6, 20))
    compare(m, t, [X, Y, [3, 2]], [tX, tY, torch.tensor([3, 2])],
            lambda m, x, y, lens: m(x, y, y, lens),
            lambda t, x, y, lens: t(x, y, y, lens))
    # ... and back: attn's weights into PyTorch, in one line.
    m2 = attn.nn.MultiHeadAttention(20, 20, 20, 20, 5, 0.0)
    t.load_state_dict({k: torch.from_numpy(v) for k, v in m2.state_dict().items()})
    x = np.random.randn(1, 3, 20).astype(np.float32)
    close(m2(x, x, x), t(to_torch(x), to_torch(x), to_torch(x), None))


def test_multihead_attention_with_bias_and_weights_kept():
    import d2l_torch
    t = d2l_torch.MultiHeadAttention("0.17", 12, 3, 0.0, bias=True)
    m = attn.nn.MultiHeadAttention(12, 12, 12, 12, 3, 0.0, bias=True)
    load_torch_weights(m, t)
    (X,), (tX,) = rand_inputs((2, 5, 12))
    lens = np.array([[1, 2, 3, 4, 5], [5, 4, 0, 2, 1]])
    with attn.nn.keep_attention_weights():
        compare(m, t, [X, lens], [tX, torch.tensor(lens)], lambda m, x, l: m(x, x, x, l),
                lambda t, x, l: t(x, x, x, l))
        assert m.attention_weights.shape == (6, 5, 5)
    m(X, X, X)
    assert m.attention_weights is None  # the fused kernel keeps no weights


def test_additive_attention():
    import d2l_torch
    t = d2l_torch.AdditiveAttention(2, 20, 8, 0.0)
    m = attn.nn.AdditiveAttention(key_size=2, query_size=20, num_hiddens=8, dropout=0.0)
    load_torch_weights(m, t)
    (q, k, v), (tq, tk, tv) = rand_inputs((2, 1, 20), (2, 10, 2), (2, 10, 4))
    compare(m, t, [q, k, v, [2, 6]], [tq, tk, tv, torch.tensor([2, 6])],
            lambda m, *a: m(*a), lambda t, *a: t(*a))
    close(m.attention_weights, t.attention_weights)


def test_dot_product_attention():
    import d2l_torch
    t = d2l_torch.DotProductAttention(0.0)
    m = attn.nn.DotProductAttention(dropout=0.0)
    (q, k, v), (tq, tk, tv) = rand_inputs((2, 3, 2), (2, 10, 2), (2, 10, 4))
    with attn.nn.keep_attention_weights():
        compare(m, t, [q, k, v, [2, 6]], [tq, tk, tv, torch.tensor([2, 6])],
                lambda m, *a: m(*a), lambda t, *a: t(*a))
        assert m.attention_weights.shape == (2, 3, 10)


def test_positional_encoding():
    import d2l_torch
    t = d2l_torch.PositionalEncoding(32, 0.0, 100).eval()
    m = attn.nn.PositionalEncoding(num_hiddens=32, dropout=0.0, max_len=100).eval()
    # d2l's float32 table, to an ulp (float32 sin and cos of another library).
    np.testing.assert_allclose(np.asarray(m.P), t.P.numpy(), rtol=0, atol=1.2e-7)
    (X,), (tX,) = rand_inputs((2, 7, 32))
    compare(m, t, [X], [tX], lambda m, x: m(x), lambda t, x: t(x))
    assert m.state_dict() == {}  # P is not a parameter
    with pytest.raises(ValueError):
        m(np.zeros((1, 101, 32), np.float32))


def test_layers_ffn_addnorm():
    import d2l_torch
    lin, tlin = attn.nn.Linear(5, 3), torch.nn.Linear(5, 3)
    load_torch_weights(lin, tlin)
    (x,), (tx,) = rand_inputs((2, 4, 5))
    compare(lin, tlin, [x], [tx], lambda m, x: m(x), lambda t, x: t(x))

    ln, tln = attn.nn.LayerNorm(5), torch.nn.LayerNorm(5)
    tln.weight.data.uniform_(0.5, 1.5)
    tln.bias.data.uniform_(-1, 1)
    load_torch_weights(ln, tln)
    (x,), (tx,) = rand_inputs((2, 4, 5))
    compare(ln, tln, [x], [tx], lambda m, x: m(x), lambda t, x: t(x))

    f, tf = attn.nn.PositionWiseFFN(8, 16, 8), d2l_torch.PositionWiseFFN("0.17", 8, 16)
    load_torch_weights(f, tf)
    (x,), (tx,) = rand_inputs((2, 3, 8))
    compare(f, tf, [x], [tx], lambda m, x: m(x), lambda t, x: t(x))

    a, ta = attn.nn.AddNorm([8], 0.0), d2l_torch.AddNorm(8, 0.0)
    (x, y), (tx, ty) = rand_inputs((2, 3, 8), (2, 3, 8))
    compare(a, ta, [x, y], [tx, ty], lambda m, x, y: m(x, y), lambda t, x, y: t(x, y))


def test_dropout_train_and_eval():
    d = attn.nn.Dropout(0.5)
    x = np.ones((100, 100), np.float32)
    y = np.asarray(d(x))
    assert set(np.unique(y)) == {0.0, 2.0}  # kept elements scaled by 1 / (1 - p)
    assert 0.4 < (y == 0).mean() < 0.6
    d.eval()
    assert not d.training
    np.testing.assert_array_equal(np.asarray(d(x)), x)
    assert d.train() is d and d.training


def test_encoder_block():
    import d2l_torch
    t = d2l_torch.EncoderBlock("0.17", 24, 48, 8, 0.0)
    m = attn.nn.EncoderBlock(24, 24, 24, 24, [24], 24, 48, 8, 0.0)
    assert list(m.state_dict()) == list(t.state_dict())
    load_torch_weights(m, t)
    (X,), (tX,) = rand_inputs((2, 100, 24))
    compare(m, t, [X, [3, 2]], [tX, torch.tensor([3, 2])], lambda m, x, l: m(x, l),
            lambda t, x, l: t(x, l))


def test_decoder_block():
    import d2l_torch
    t = d2l_torch.DecoderBlock("0.17", 24, 48, 8, 0.0, 0)
    d2l_torch.inference_mode(t)  # d2l's causal mask (training mode), no dropout
    m = attn.nn.DecoderBlock(24, 24, 24, 24, [24], 24, 48, 8, 0.0, 0)
    load_torch_weights(m, t)
    (X, enc), (tX, tenc) = rand_inputs((2, 7, 24), (2, 5, 24))
    lens = np.array([3, 5])

    def call(m, x, e):
        out, state = m(x, [e, lens, [None]])
        assert state[2][0] is x
        return out

    compare(m, t, [X, enc], [tX, tenc], call,
            lambda t, x, e: t(x, [e, torch.tensor(lens), [None]])[0])
    with pytest.raises(ValueError, match="holds earlier steps"):
        m(X, [enc, lens, [X]])


def d2l_nw_forward(w, queries, keys, values):
    """d2l 10.2's NWKernelRegression.forward."""
    queries = queries.repeat_interleave(keys.shape[1]).reshape((-1, keys.shape[1]))
    weights = torch.nn.functional.softmax(-((queries - keys) * w) ** 2 / 2, dim=1)
    return torch.bmm(weights.unsqueeze(1), values.unsqueeze(-1)).reshape(-1), weights


def test_nadaraya_watson():
    m = attn.nn.NWKernelRegression()
    w = torch.tensor(np.asarray(m.w).copy(), requires_grad=True)
    (q, k, v), (tq, tk, tv) = rand_inputs((6,), (6, 5), (6, 5))
    y = m(q, k, v)
    ty, tw = d2l_nw_forward(w, tq, tk, tv)
    close(y, ty)
    close(m.attention_weights, tw)
    y.sum().backward()
    ty.sum().backward()
    close(m.w.grad, w.grad)
    for a, t in [(q, tq), (k, tk), (v, tv)]:
        close(a.grad, t.grad)

    x_train = np.sort(np.random.rand(10).astype(np.float32) * 5)
    y_train = np.random.rand(10).astype(np.float32)
    x_test = np.arange(0, 5, 0.5, dtype=np.float32)
    y_hat, weights = attn.nn.nw_nonparametric(x_test, x_train, y_train)
    tw = torch.softmax(-(to_torch(x_test)[:, None] - to_torch(x_train)[None, :]) ** 2 / 2, 1)
    close(weights, tw)
    close(y_hat, tw @ to_torch(y_train))
    np.testing.assert_allclose(np.asarray(attn.nn.nw_average_pooling(y_train, 4)),
                               np.full(4, y_train.mean()), rtol=1e-6)


def test_bahdanau_encoder_decoder():
    import d2l_torch
    te = d2l_torch.Seq2SeqEncoder(10, 8, 16, 2)
    td = d2l_torch.Seq2SeqAttentionDecoder(10, 8, 16, 2)
    e = attn.nn.Seq2SeqEncoder(vocab_size=10, embed_size=8, num_hiddens=16, num_layers=2)
    d = attn.nn.Seq2SeqAttentionDecoder(vocab_size=10, embed_size=8, num_hiddens=16,
                                        num_layers=2)
    load_torch_weights(e, te)
    load_torch_weights(d, td)
    X = np.random.randint(0, 10, (4, 7))
    lens = np.array([7, 3, 5, 1])
    tX, tlens = torch.tensor(X), torch.tensor(lens)
    outputs, state = e(X)
    toutputs, tstate = te(tX)
    close(outputs, toutputs)
    close(state, tstate)
    s = d.init_state((outputs, state), lens)
    ts = td.init_state((toutputs, tstate), tlens)
    assert s[0].shape == (4, 7, 16) and len(s) == 3  # d2l 10.4's printed shapes
    with attn.nn.keep_attention_weights():
        y, s2 = d(X, s)
    ty, ts2 = td(tX, ts)
    assert y.shape == (4, 7, 10)
    close(y, ty)
    close(s2[1], ts2[1])
    assert d.attention_weights.shape == (4, 7, 7)
    g = np.random.rand(4, 7, 10).astype(np.float32)
    y.backward(g)
    ty.backward(torch.tensor(g))
    for mod, tmod in [(e, te), (d, td)]:
        tparams = dict(tmod.named_parameters())
        for name, p in mod.named_parameters():
            close(p.grad, tparams[name].grad)


def test_load_state_dict_errors():
    m = attn.nn.MultiHeadAttention(8, 8, 8, 8, 2, 0.0)
    sd = {k: np.array(v) for k, v in m.state_dict().items()}
    sd["W_q.weight"] = np.zeros((3, 3), np.float32)
    with pytest.raises(ValueError, match="W_q.weight"):
        m.load_state_dict(sd)
    del sd["W_q.weight"]
    with pytest.raises(ValueError, match="W_q.weight"):
        m.load_state_dict(sd)
    m.load_state_dict(sd, strict=False)


def test_train_and_eval_modes_and_optimizer():
    m = attn.nn.MultiHeadAttention(8, 8, 8, 8, 2, 0.5)
    assert m.training and m.attention.training
    assert m.eval() is m and not m.attention.training
    x = np.random.randn(1, 3, 8).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(m(x, x, x)), np.asarray(m(x, x, x)))
    before = np.array(m.W_q.weight)
    opt = attn.optim.SGD(m.parameters(), lr=0.1)
    m(x, x, x).sum().backward()
    grad = np.array(m.W_q.weight.grad)
    opt.step()
    np.testing.assert_allclose(np.asarray(m.W_q.weight), before - 0.1 * grad, rtol=1e-6)
    opt.zero_grad()
    assert m.W_q.weight.grad is None
