"""Shared test configuration.

Hypothesis profiles: ``ci`` (selected when the ``CI`` environment variable is set)
is derandomized, so every CI run replays the same examples; ``dev`` explores
with fresh randomness.  Randomness in properties enters only through drawn seeds,
so a failing example shrinks and replays exactly.
"""

from __future__ import annotations

import os

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
