"""Hypothesis strategies and assertions for property tests of differentially private code.

Use these to test *your own* queries against the sensitivity you claim for
them: :func:`assert_sensitivity_bound` runs a structured adversarial search
(boundary, antipodal and orthogonal records, a sweep over angles) followed by a
targeted Hypothesis search over adjacent datasets, and fails with the largest
change it found if that exceeds the claimed bound.

Randomness enters the strategies only through drawn integer seeds, so every
failing example shrinks and replays exactly.  Requires the ``testing`` extra
(``hypothesis``), which is imported when a strategy is first built or a search
first runs; importing this package loads nothing heavier than numpy.
"""

from __future__ import annotations

# The package is its strategies module: it re-exports that module's ``__all__``
# (the one list of these names) rather than listing them again.
from privfed.testing.strategies import *  # noqa: F403
from privfed.testing.strategies import __all__ as __all__
