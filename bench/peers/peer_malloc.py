"""glibc malloc settings for the PyTorch peers (bench/peers/*.py)."""


def tune_malloc():
    """glibc's malloc returns every block of more than its mmap threshold to
    the system when it is freed and maps it anew (page faults, zeroed pages)
    at the next allocation; a decoder step allocates and frees tens of MB
    (the caches, the logits), which then costs more than the copies
    themselves. Keeping freed memory in the heap (what jemalloc or tcmalloc,
    which PyTorch's CPU tuning guides preload, also do) made the KV cache's
    reorders and appends several times cheaper here. Returns whether glibc
    took it."""
    import ctypes
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -2, -3, -4
    return bool(libc.mallopt(M_MMAP_THRESHOLD, 32 << 20) and   # glibc's largest
                libc.mallopt(M_MMAP_MAX, 0) and  # and blocks past it from the heap too
                libc.mallopt(M_TRIM_THRESHOLD, 1 << 30) and libc.mallopt(M_TOP_PAD, 64 << 20))
