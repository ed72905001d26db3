"""A secure sum as a Flower app: every node adds a vector, the server learns the total.

The smallest complete use of :mod:`privfed.flower`: each node's input is a
pseudo-random ring vector derived from its ``partition-id`` and the round (so
the server -- and a test -- can recompute the exact expected sum), aggregated
with :class:`~privfed.flower.SecAggRound`.  Used by the tests, the
benchmark and as a template for one's own ``values`` callback.

Run config keys (all optional): ``num-clients`` (nodes to wait for, default:
all connected after ``wait-s``), ``threshold`` (default majority),
``vector-length`` (default 1000), ``timeout`` (stage timeout s, default 60),
``rounds`` (default 1), ``journal-dir``; ``secagg-mode`` (``"active"``:
signed keys and the ConsistencyCheck stage, with ``secagg-registry`` the
server's copy of the registry enrolling partition ``p`` as id ``p + 1``, and
``assumed-corrupted``; each node's own policy decides what it accepts, see
:mod:`privfed.flower.policy`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
from flwr.app import Context
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from privfed.errors import ProtocolAbort
from privfed.flower._log import LOG
from privfed.flower.client import JournalFn
from privfed.flower.faults import Fault
from privfed.flower.node_app import demo_values, make_client_app
from privfed.flower.policy import PolicyFn
from privfed.flower.server import (
    SecAggRound,
    SecAggRoundResult,
    hello,
    quiet_privfed_errors,
    run_active_fields,
    sum_round,
    wait_for_nodes,
)
from privfed.secagg import ClientIds

__all__ = [
    "demo_values",
    "expected_sum",
    "sum_client_app",
    "sum_server_app",
]


def expected_sum(
    partitions: Sequence[int], round_index: int, length: int
) -> npt.NDArray[np.uint64]:
    """The plaintext ring sum of :func:`demo_values` over ``partitions``."""
    total = np.zeros(length, dtype=np.uint64)
    for pid in partitions:
        total += demo_values(pid, round_index, length)
    return total


def sum_client_app(
    *,
    faults: Mapping[tuple[int, int], Fault] | None = None,
    fault_delay: float = 5.0,
    journal: JournalFn | None = None,
    policy: PolicyFn | None = None,
) -> ClientApp:
    """The demo ClientApp: privfed's one ClientApp (:mod:`privfed.flower.node_app`) with
    ``job = "sum"``, optionally with injected faults (:mod:`privfed.flower.faults`)
    and a policy in code (:class:`~privfed.flower.policy.PolicyFiles`)."""
    return make_client_app(
        {"job": "sum"}, journal=journal, faults=faults, fault_delay=fault_delay, policy=policy
    )


def sum_server_app(
    *,
    rounds: int | None = None,
    on_round: Callable[[int, SecAggRoundResult | ProtocolAbort, dict[int, int]], None]
    | None = None,
    workflow: SecAggRound | None = None,
    num_clients: int | None = None,
) -> ServerApp:
    """The demo ServerApp.

    Args:
        rounds: Rounds to run (default: run config ``rounds`` or 1).
        on_round: Called after each round with the round index, its result
            (or the :class:`~privfed.errors.ProtocolAbort` that ended it) and
            ``{client_id: partition_id}``.
        workflow: The workflow (default: from the run config).
        num_clients: Nodes to wait for (default: run config ``num-clients``).
    """
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        quiet_privfed_errors()
        cfg = context.run_config
        count = num_clients if num_clients is not None else int(cfg.get("num-clients", 2))
        wait = float(cfg.get("wait-s", 300.0))
        fields = run_active_fields(cfg, count)
        nodes = wait_for_nodes(grid, count, timeout=wait)
        flow = workflow or sum_round(cfg, len(nodes), fields)
        # The first message to a node may wait for its worker to start: a long timeout.
        partitions = hello(
            grid, nodes, timeout=wait, registry=fields.get("identities"), count=count
        )
        mapping = ClientIds.from_partitions(partitions.values()).of_nodes(partitions)
        by_client: dict[int, int] = {cid: partitions[node] for node, cid in mapping.items()}
        total_rounds = rounds if rounds is not None else int(cfg.get("rounds", 1))
        for r in range(total_rounds):
            outcome: SecAggRoundResult | ProtocolAbort
            try:
                outcome = flow.run(grid, mapping, round_index=r)
                expected = expected_sum(
                    [by_client[c] for c in outcome.survivors], r, flow.vector_length
                )
                exact = bool(np.array_equal(outcome.total, expected))
                LOG.info(
                    "round %d: %d survivors, sum %s",
                    r,
                    len(outcome.survivors),
                    "exact" if exact else "WRONG",
                )
            except ProtocolAbort as exc:
                outcome = exc
                LOG.info("round %d aborted: %s", r, exc)
            if on_round is not None:
                on_round(r, outcome, by_client)

    return app
