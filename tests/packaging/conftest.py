"""The wheel the packaging tests inspect and install: built once per test process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.packaging.envs import build_wheel


@pytest.fixture(scope="session")
def xpspec_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("xpspec-wheel"))
