"""The one logger of the Flower apps, ``privfed.flower``.

Every module of :mod:`privfed.flower` logs to it, so a deployment configures (or
a test captures) one name.  It is defined here once rather than by each module.
"""

from __future__ import annotations

import logging
from typing import Final

__all__ = ["LOG"]

#: The ``privfed.flower`` logger.
LOG: Final = logging.getLogger("privfed.flower")
