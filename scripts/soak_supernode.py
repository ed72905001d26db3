"""The soak's ``flower-supernode``: Flower's SuperNode, looking for messages every 0.2 s.

Flower 1.42's SuperNode sleeps 3 s after a pull that found no message (and
0.5 s between two looks for its ClientApp's reply), hard-coded in
``flwr.supernode.start_client_internal``.  Each stage of a soak round then
starts up to 3 s late at its slowest node.  This runs Flower's own
``flower_supernode()`` (same arguments) with those waits cut to 0.2 s at most;
nothing else is changed.  ``scripts/soak.py --stock-flower`` runs the stock one.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import flwr.supernode.start_client_internal as _internal

_MAX_WAIT_S = 0.2


class _Clock:
    """``time`` as ``start_client_internal`` sees it: every ``sleep`` at most 0.2 s."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(min(seconds, _MAX_WAIT_S))


def main() -> None:
    _internal.time = _Clock()  # type: ignore[attr-defined,assignment]
    from flwr.supernode.cli import flower_supernode

    sys.argv[0] = "flower-supernode"
    flower_supernode()


if __name__ == "__main__":
    main()
