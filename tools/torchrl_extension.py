"""Build TorchRL's C++ extension ``torchrl._torchrl`` against the torch installed beside it.

TorchRL keeps the segment trees of ``PrioritizedSampler`` and ``PrioritizedSliceSampler`` in
that extension (``torchrl/data/replay_buffers/samplers/prioritized.py``). TorchRL 0.14.1 is
published as wheels only (PyPI holds no sdist of any TorchRL release); its Linux wheel's
``_torchrl`` was built against another torch and does not load with torch 2.13.0 (ImportError:
undefined symbol), but the wheel also ships the extension's sources (``torchrl/csrc``). This
script compiles those sources as TorchRL's own build does (its ``setup.py``: a
``CppExtension`` over ``csrc/*.cpp`` with ``-O3 -std=c++17``; CPU only) with
``torch.utils.cpp_extension`` and puts the module in place of the wheel's, as a TorchRL user
whose torch differs from the wheel's builds it.

The build (about five minutes on two cores) is cached under
``$XDG_CACHE_HOME/xpspec/torchrl-extension/<key>`` (``~/.cache`` by default), the key a hash of
the sources, the compile flags, the torch and TorchRL versions and the interpreter's tag, so a
later install of the same versions only copies the module. Needs a C++ compiler (``c++``) and
``ninja`` (the ``adapter-torchrl`` extra installs it). Run by the noxfile's TorchRL sessions:
``python tools/torchrl_extension.py``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from importlib import metadata
from pathlib import Path

__all__ = ["FLAGS", "build", "cache_key", "install", "main"]

FLAGS = ("-O3", "-std=c++17")
"""TorchRL's own compile flags for the extension (its setup.py, ``get_extensions``)."""
_CHECK = "import torchrl._torchrl as t; t.SumSegmentTreeFp32(4); t.MinSegmentTreeFp64(4)"
"""What must work once the module is in place: the segment trees the samplers build."""


def _package() -> Path:
    spec = importlib.util.find_spec("torchrl")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torchrl_extension: expected TorchRL installed, got no torchrl package")
    return Path(next(iter(spec.submodule_search_locations)))


def _sources(package: Path) -> list[Path]:
    sources = sorted((package / "csrc").glob("*.cpp"))
    if not sources:
        raise SystemExit(
            f"torchrl_extension: expected the extension's sources in {package / 'csrc'} "
            "(TorchRL's wheel ships them), got none"
        )
    return sources


def cache_key(package: Path) -> str:
    """The hash naming a build: the sources and headers, the flags, the torch and TorchRL
    versions and the interpreter's tag."""
    digest = hashlib.sha256()
    for part in (
        metadata.version("torch"),
        metadata.version("torchrl"),
        sys.implementation.cache_tag,
        sysconfig.get_platform(),
        *FLAGS,
    ):
        digest.update(part.encode() + b"\0")
    for path in sorted((package / "csrc").iterdir()):
        if path.suffix in (".cpp", ".h"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:20]


def build(package: Path, target: Path) -> float:
    """Compile the extension into ``target`` (a file); returns the build's seconds."""
    from torch.utils import cpp_extension

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="torchrl-extension-") as work:
        cpp_extension.load(
            name="_torchrl",
            sources=[str(p) for p in _sources(package)],
            extra_cflags=list(FLAGS),
            extra_include_paths=[str(package / "csrc")],
            build_directory=work,
        )
        built = Path(work) / "_torchrl.so"
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        shutil.copyfile(built, partial)
        os.replace(partial, target)
    return time.perf_counter() - start


def install(module: Path, package: Path) -> Path:
    """Put the built ``module`` where ``import torchrl._torchrl`` finds it (replacing the
    wheel's) and check that it loads in a new interpreter."""
    destination = package / f"_torchrl{sysconfig.get_config_var('EXT_SUFFIX')}"
    partial = destination.with_suffix(".partial")
    shutil.copyfile(module, partial)
    os.replace(partial, destination)
    check = subprocess.run(
        [sys.executable, "-c", _CHECK], capture_output=True, text=True, check=False
    )
    if check.returncode:
        raise SystemExit(
            f"torchrl_extension: expected {destination} to load, got {check.stderr.strip()}"
        )
    return destination


def main() -> int:
    package = _package()
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    module = cache_home / "xpspec" / "torchrl-extension" / cache_key(package) / "_torchrl.so"
    versions = f"TorchRL {metadata.version('torchrl')}, torch {metadata.version('torch')}"
    if module.is_file():
        print(f"torchrl_extension: {versions}: cached build {module}")
    else:
        seconds = build(package, module)
        print(f"torchrl_extension: {versions}: built {module} in {seconds:.0f} s")
    print(f"torchrl_extension: installed {install(module, package)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
