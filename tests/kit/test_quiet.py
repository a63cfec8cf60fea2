"""The seeded, quiet context of xpspec.kit.quiet."""

from __future__ import annotations

import logging
import random
import warnings

import numpy as np
import pytest
import torch

from xpspec.kit.quiet import quiet, seeded, seeded_quiet


def _draws() -> tuple[float, float, float]:
    return (float(torch.rand(())), float(np.random.rand()), random.random())


def test_seeded_generators_repeat_and_are_restored() -> None:
    torch.manual_seed(123)
    np.random.seed(123)
    random.seed(123)
    before = _draws()
    with seeded(7, ("torch", "numpy", "random")):
        first = _draws()
    with seeded(7, ("torch", "numpy", "random")):
        assert _draws() == first
    after = _draws()
    torch.manual_seed(123)
    np.random.seed(123)
    random.seed(123)
    assert _draws() == before
    assert _draws() == after  # the blocks left each generator where it was


def test_only_the_named_generators_are_seeded() -> None:
    np.random.seed(1)
    expected = np.random.rand()
    np.random.seed(1)
    with seeded(7, ("torch",)):
        torch.rand(())
    assert np.random.rand() == expected
    with pytest.raises(ValueError, match="expected names among"), seeded(7, ("jax",)):  # type: ignore[arg-type]
        pass


def test_quiet_silences_warnings_and_loggers_then_restores_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("xpspec-kit-test")
    logger.setLevel(logging.INFO)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet(["xpspec-kit-test"]):
            warnings.warn("hidden", UserWarning, stacklevel=1)
            logger.warning("hidden")
            assert logger.level == logging.ERROR
        warnings.warn("shown", UserWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["shown"]
    assert logger.level == logging.INFO
    assert "hidden" not in caplog.text
    with seeded_quiet(3, ("numpy",), ["xpspec-kit-test"]):
        value = np.random.rand()
        assert logger.level == logging.ERROR
    np.random.seed(3)
    assert np.random.rand() == value
