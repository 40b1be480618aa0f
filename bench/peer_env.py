"""The peers' environment at their best on this CPU, for the bench drivers.

PyTorch 1.13 on 2 cores is 4-5x faster with OMP_WAIT_POLICY=PASSIVE than with
its spinning default. Debian's OpenBLAS takes its Haswell kernels on CPUs it
does not know; on one with AVX-512 OPENBLAS_CORETYPE=SKYLAKEX gives it its
AVX-512 kernels. On a CPU without AVX-512 that core type stops the peer with
an illegal instruction, so there OpenBLAS keeps its own choice.

isa="avx2" runs the peer as on a CPU without AVX-512, to stand in for one on
a CPU that has it: OpenBLAS's Haswell kernels (OPENBLAS_CORETYPE=Haswell),
PyTorch's AVX2 kernels (ATEN_CPU_CAPABILITY=avx2) and oneDNN's
(ONEDNN_MAX_CPU_ISA=AVX2).
"""
import os


def has_avx512():
    """Whether this CPU has AVX-512 F (Linux's /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


AVX2_ONLY = {"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2",
             "ONEDNN_MAX_CPU_ISA": "AVX2"}


def peer_env(base=None, isa=None):
    """A copy of `base` (default: this process's environment) with the
    peer's best settings for this CPU (isa="avx2": for an AVX2-only one)."""
    env = dict(os.environ if base is None else base, OMP_WAIT_POLICY="PASSIVE")
    if isa == "avx2":
        env.update(AVX2_ONLY)
    elif has_avx512():
        env["OPENBLAS_CORETYPE"] = "SKYLAKEX"
    else:
        env.pop("OPENBLAS_CORETYPE", None)
    return env


def describe(env):
    """The peer's settings, for the printed figures."""
    if env.get("ATEN_CPU_CAPABILITY") == "avx2":
        return "OMP_WAIT_POLICY=PASSIVE, " + ", ".join(f"{k}={v}" for k, v in AVX2_ONLY.items())
    return "OMP_WAIT_POLICY=PASSIVE, " + (
        f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']}" if "OPENBLAS_CORETYPE" in env else
        "OpenBLAS choosing its core type (no AVX-512 here)")
