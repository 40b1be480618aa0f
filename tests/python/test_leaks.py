"""No memory kept per call: each kind of call is made 1,000 times, twice,
after a warm-up, and the bytes the allocator holds must not grow by 16 KiB
over both rounds (a leak of 16 bytes a call shows in each round; a cache
that settles shows once at most). The bytes are AddressSanitizer's count
where its runtime is loaded (the sanitizer build), else glibc's mallinfo2()
(in-use chunks, mmapped ones included). ctest runs this file with
PYTHONMALLOC=malloc, so Python objects a binding fails to release count too.

Under the sanitizer the count settles late: the module's calls add 42, 33,
7 and then 0-8 KB a thousand (the same on 1 and 2 threads, with autograd
or without, through a no-grad forward alone), where glibc's count shows
nothing after the first hundred; so the warm-up is 4,000 calls there.

LeakSanitizer's own check at exit cannot serve over an uninstrumented
CPython: it reports the interpreter's lifetime allocations, and a
suppression of the interpreter's frames would hide every allocation, attn's
included, since all are made under them."""
import ctypes

import numpy as np
import pytest

import attn

ROUNDS, CALLS, LIMIT = 2, 1000, 16 * 1024


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
                 "uordblks", "fordblks", "keepcost")]


def allocated_bytes_function():
    """The count, and the calls that warm it up."""
    process = ctypes.CDLL(None)
    try:
        asan = process.__sanitizer_get_current_allocated_bytes
        asan.restype = ctypes.c_size_t
        return asan, 4000
    except AttributeError:
        pass
    mallinfo2 = process.mallinfo2
    mallinfo2.restype = MallInfo2

    def glibc():
        m = mallinfo2()
        return m.uordblks + m.hblkhd
    return glibc, 100


allocated_bytes, WARM_UP = allocated_bytes_function()


def growth_per_round(call):
    for _ in range(WARM_UP):
        call()
    grown = []
    for _ in range(ROUNDS):
        before = allocated_bytes()
        for _ in range(CALLS):
            call()
        grown.append(allocated_bytes() - before)
    return grown


def numpy_round_trip():
    a = np.random.rand(4, 8).astype(np.float32)
    t = attn.Tensor(a)
    b = np.asarray(attn.ops.softmax(np.asarray(t)))
    assert b.shape == (4, 8)


mha = attn.nn.MultiHeadAttention(16, 16, 16, 16, 4, 0.1)
x = np.random.rand(2, 5, 16).astype(np.float32)


def module_forward_backward():
    q = attn.tensor(x, requires_grad=True)
    mha(q, x, x, [3, 5]).sum().backward()
    with attn.nn.keep_attention_weights():
        mha(x, x, x, [[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]])
    mha.zero_grad()


def state_dicts():
    mha.load_state_dict(mha.state_dict())
    with attn.no_grad():
        attn.ops.masked_softmax(np.random.rand(2, 2, 4).astype(np.float32), [0, 3])


def errors():
    with pytest.raises(ValueError):
        attn.ops.matmul(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))
    with pytest.raises(ValueError):
        attn.from_numpy(np.ones(3, np.float16))


@pytest.mark.parametrize("call", [numpy_round_trip, module_forward_backward, state_dicts, errors],
                         ids=lambda f: f.__name__)
def test_no_memory_kept_per_call(call):
    grown = growth_per_round(call)
    assert min(grown) < LIMIT, f"{call.__name__}: {grown} bytes more after {CALLS} calls"


def test_no_memory_kept_per_translation(models):
    tr = attn.Translator(models["spm"], threads=1)
    sources = ["I'm home.", "He's calm."]

    def translate():
        tr.translate(sources, beam_size=2, max_length=3)
        tr.translate(sources[:1], beam_size=1, max_length=3, return_attention=True, n_best=1)
        tr.score(sources, sources)

    grown = growth_per_round(translate)
    assert min(grown) < LIMIT, f"translate: {grown} bytes more after {CALLS} calls"


def test_a_leak_is_seen():
    kept = []
    grown = growth_per_round(lambda: kept.append(bytearray(1024)))
    assert min(grown) >= CALLS * 1024
