"""Builds the Python module attn with the project's CMake build, for
`pip install --no-build-isolation .` (docs/python.md): CMake configures a
build of the library and the module alone (no program, tests or benchmarks)
for the interpreter that runs pip, and the package python/attn/ is installed
with the compiled attn/_core beside it. Nothing is downloaded: CMake finds
Debian's pybind11, oneDNN and the other libraries (scripts/install-deps.sh).

Environment: ATTN_CMAKE_ARGS (more -D settings, e.g. -DATTN_NATIVE=OFF for
a module that runs on any x86-64), ATTN_BUILD_JOBS (parallel jobs).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def version():
    text = (ROOT / "include" / "attn" / "version.h").read_text()
    parts = [re.search(rf"#define ATTN_VERSION_{p} (\d+)", text).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = Path(self.build_temp).resolve() / "cmake"
        build.mkdir(parents=True, exist_ok=True)
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={sys.executable}",
            "-DATTN_PYTHON=ON", "-DATTN_BUILD_APP=OFF", "-DATTN_BUILD_TESTS=OFF",
            "-DATTN_BUILD_BENCH=OFF", "-DATTN_BUILD_DOCS=OFF", "-DATTN_BUILD_SHARED=OFF",
            "-DATTN_INSTALL=OFF", "-DATTN_MPI=OFF",
            *shlex.split(os.environ.get("ATTN_CMAKE_ARGS", "")),
        ]
        subprocess.run(configure, check=True)
        jobs = os.environ.get("ATTN_BUILD_JOBS", str(os.cpu_count() or 2))
        subprocess.run(["cmake", "--build", str(build), "--target", "attn_python", "--parallel",
                        jobs], check=True)
        built = next((build / "python" / "attn").glob("_core*.so"))
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)


setup(
    version=version(),
    packages=["attn"],
    package_dir={"attn": "python/attn"},
    package_data={"attn": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("attn._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
