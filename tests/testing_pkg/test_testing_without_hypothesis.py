"""privfed.testing when the ``testing`` extra (hypothesis) is not installed."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Each snippet runs in a fresh interpreter where ``import hypothesis`` fails.
_PRELUDE = (
    "import sys; sys.modules['hypothesis'] = None\n"
    "import privfed.testing as t\n"
    "from privfed.dp import Adjacency\n"
    "from privfed.errors import MissingDependencyError\n"
)


@pytest.mark.parametrize(
    "call",
    [
        "t.clipped_vectors(3, 1.0)",
        "t.labelled_datasets(dim=3, clip_norm=1.0, num_classes=2)",
        "t.adjacent_pairs(Adjacency.REPLACE_ONE, dim=3, clip_norm=1.0, num_classes=2)",
        # bound 0 for a sum: the structured search would fail first if it ran first
        "t.assert_sensitivity_bound(lambda d: d.features.sum(axis=0), 0.0, "
        "adjacency=Adjacency.REPLACE_ONE, dim=3, clip_norm=1.0, num_classes=1)",
    ],
)
def test_first_use_names_the_extra(call: str) -> None:
    code = (
        _PRELUDE
        + "try:\n"
        + f"    {call}\n"
        + "except MissingDependencyError as exc:\n"
        + "    print(exc)\n"
        + "else:\n"
        + "    sys.exit('no error')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    message = proc.stdout.strip()
    assert "pip install 'privfed[testing]'" in message
    assert "'hypothesis'" in message and "privfed.testing" in message


def test_bad_arguments_are_still_refused_first() -> None:
    """Argument checks run before the dependency check, as everywhere else."""
    code = (
        _PRELUDE
        + "from privfed.errors import ParameterError\n"
        + "try:\n"
        + "    t.clipped_vectors(0, 1.0)\n"
        + "except ParameterError as exc:\n"
        + "    print(type(exc).__name__)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ParameterError"
