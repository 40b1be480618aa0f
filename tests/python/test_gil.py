"""Every call that computes releases the GIL: another Python thread runs while
it does. Told apart without a clock: with a switch interval of an hour the
interpreter only hands the GIL to another thread when the running one lets
it go, so the counter of a thread that yields at every turn (time.sleep(0))
moves during a call only if that call released the GIL. A call is tried up
to ATTEMPTS times (one is enough when the other thread is scheduled in
time; a call holding the GIL fails every one)."""
import sys
import threading
import time

import numpy as np
import pytest

import attn

ATTEMPTS = 200


def another_thread_ran_during(call):
    old = sys.getswitchinterval()
    sys.setswitchinterval(3600.0)
    state = {"stop": False, "count": 0}

    def spin():
        while not state["stop"]:
            state["count"] += 1
            time.sleep(0)

    t = threading.Thread(target=spin)
    t.start()
    try:
        while state["count"] == 0:
            time.sleep(0)
        for _ in range(ATTEMPTS):
            before = state["count"]
            call()
            if state["count"] != before:
                return True
        return False
    finally:
        state["stop"] = True
        t.join()
        sys.setswitchinterval(old)


def big(*shape):
    return np.random.randn(*shape).astype(np.float32)


def test_a_call_that_holds_the_gil_is_told_apart():
    # A pure-Python computation of the same length never lets the other thread in.
    assert not another_thread_ran_during(lambda: sum(range(20000)))


q, k, v = big(4, 256, 64), big(4, 256, 64), big(4, 256, 64)
mha = attn.nn.MultiHeadAttention(64, 64, 64, 64, 4, 0.0)
enc = attn.nn.EncoderBlock(64, 64, 64, 64, [64], 64, 128, 4, 0.0)


def backward():
    x = attn.tensor(q, requires_grad=True)
    y = attn.ops.scaled_dot_product_attention(x, k, v)
    y.backward(np.ones(y.shape, np.float32))


CALLS = {
    "ops.masked_softmax": lambda: attn.ops.masked_softmax(big(8, 256, 256), np.arange(8) * 30),
    "ops.scaled_dot_product_attention": lambda: attn.ops.scaled_dot_product_attention(q, k, v),
    "ops.matmul": lambda: attn.ops.matmul(q, k.transpose(0, 2, 1)),
    "Tensor.backward": backward,
    "Tensor arithmetic": lambda: (attn.Tensor(q) * 2.0 + attn.Tensor(k)).exp().sum(),
    "nn.MultiHeadAttention": lambda: mha(q, k, v, [10, 20, 30, 256]),
    "nn.EncoderBlock": lambda: enc(q, [10, 20, 30, 256]),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_ops_and_modules_release_the_gil(name):
    assert another_thread_ran_during(CALLS[name])


def test_translator_releases_the_gil(models):
    sources = [f"I'm home {i}." for i in range(20)]
    tr = attn.Translator(models["spm"])
    assert another_thread_ran_during(lambda: tr.translate(sources))
    assert another_thread_ran_during(lambda: tr.score(sources, sources))
    assert another_thread_ran_during(lambda: tr.evaluate(split="test", pairs="1-5"))
    assert another_thread_ran_during(lambda: attn.Translator(models["spm"]))


def test_calls_from_several_threads_at_once(models):
    """Threads sharing one Translator (calls take turns) and modules get the
    results a single thread gets."""
    sources = [f"He is {i} years old." for i in range(12)]
    tr = attn.Translator(models["spm"])
    want = tr.translate(sources)
    x = big(2, 16, 64)
    want_mha = np.asarray(mha(x, x, x)).copy()
    results, errors = [], []

    def work():
        try:
            for _ in range(3):
                results.append((tr.translate(sources), np.asarray(mha(x, x, x)).copy()))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 9
    for got, got_mha in results:
        assert got == want
        np.testing.assert_array_equal(got_mha, want_mha)
