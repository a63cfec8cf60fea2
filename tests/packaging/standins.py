"""Stand-in distributions: wheels with a name, a version and a few files, built without a
build backend, so a test can put a "torch 2.99.0" or an ``adapters`` on an offline index."""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

__all__ = ["write_wheel"]


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode('ascii')}"


def write_wheel(
    directory: Path, name: str, version: str, files: Mapping[str, str] | None = None
) -> Path:
    """Write ``{name}-{version}-py3-none-any.whl`` into ``directory``: a pure-Python wheel
    holding ``files`` (path in site-packages -> text), its METADATA, WHEEL and RECORD, and no
    requirements of its own. Returns the wheel's path."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise ValueError(f"stand-in name: expected a distribution name, got {name!r}")
    stem = re.sub(r"[-_.]+", "_", name).lower()
    info = f"{stem}-{version}.dist-info"
    contents = {path: text.encode("utf-8") for path, text in (files or {}).items()}
    contents[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        "Summary: a stand-in distribution written by a test\n"
    ).encode()
    contents[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: xpspec-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [f"{path},{_record_hash(data)},{len(data)}" for path, data in contents.items()]
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in contents.items():
            archive.writestr(path, data)
    return wheel
