"""The CUDA tests' own logic, checked on every CI run.

``tests/test_cuda_paths.py`` runs only with ``--run-cuda`` (``scripts/device_check.sh``
on a lent GPU), so an API change could leave it broken until the day a GPU is lent:
three of its tests had drifted that way unseen.  Here the whole file runs on the CPU
(``PRIVFED_TEST_DEVICE=cpu``) in a subprocess; it checks the tests' logic, not a GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_cuda_tests_pass_as_a_cpu_dry_run(tmp_path: Path) -> None:
    env = dict(os.environ, PRIVFED_TEST_DEVICE="cpu", OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "pytest", "-q", "-n", "0", "--run-cuda", "-m", "cuda"]
    command += ["tests/test_cuda_paths.py", "-p", "no:cacheprovider", "--basetemp", str(tmp_path)]
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout and "failed" not in done.stdout, tail
