"""Shared test configuration.

Hypothesis profiles: ``ci`` (selected when the ``CI`` environment variable is set)
is derandomized, so every CI run replays the same examples; ``dev`` explores
with fresh randomness.  Randomness in properties enters only through drawn seeds,
so a failing example shrinks and replays exactly.

Tests marked ``cuda`` are deselected unless ``--run-cuda`` is given (see below).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=50,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=50, print_blob=True)
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# -- CUDA-only tests -----------------------------------------------------------------
#
# Tests marked ``cuda`` exercise the ``device="cuda"`` code paths.  They are
# DESELECTED unless ``--run-cuda`` is given, so a CPU-only run neither runs nor
# counts them.  With ``--run-cuda`` on a machine without a usable CUDA device they
# FAIL (never skip), so a device run cannot pass without having run them.
# ``PRIVFED_TEST_DEVICE`` (default ``cuda``) names the device the tests use; set it
# to ``cpu`` only to check the tests' own logic on a machine without a GPU.

_CUDA_OPTION = "--run-cuda"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        _CUDA_OPTION,
        action="store_true",
        default=False,
        help="run the tests marked 'cuda' (deselected otherwise); they fail without a GPU",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption(_CUDA_OPTION):
        return
    selected, deselected = [], []
    for item in items:
        (deselected if item.get_closest_marker("cuda") else selected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


def _cuda_unavailable_reason() -> str | None:
    """Why the cuda-marked tests cannot run here, or ``None`` when they can."""
    device = os.environ.get("PRIVFED_TEST_DEVICE", "cuda")
    if not device.startswith("cuda"):
        return None  # PRIVFED_TEST_DEVICE=cpu: checking the test logic only
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a dev dependency
        return f"{_CUDA_OPTION} was given but torch cannot be imported ({exc})"
    if not torch.cuda.is_available():
        return (
            f"{_CUDA_OPTION} was given but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}): these tests "
            "need an NVIDIA GPU and a CUDA build of torch.  Set PRIVFED_TEST_DEVICE=cpu "
            "only to check the tests' logic without a GPU."
        )
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    # Raised here, in the call phase, the failure is reported as FAILED (not as a
    # setup error, and never as a skip).
    if item.get_closest_marker("cuda") and item.config.getoption(_CUDA_OPTION):
        reason = _cuda_unavailable_reason()
        if reason is not None:
            pytest.fail(reason, pytrace=False)
