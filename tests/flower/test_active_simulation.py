"""The active mode in Flower's simulation engine (Ray), 5 virtual nodes, node-pinned policy.

One simulation, two rounds of the sum app with signed keys and the
ConsistencyCheck stage, each node's policy given in code
(:class:`~privfed.flower.PolicyFiles`: Ray's virtual nodes have no node
config of their own):

0. no fault: the exact ring sum of all five inputs;
1. node 4 (partition 4) raises at the ConsistencyCheck: it masked its input,
   so the sum is still all five, from the four signers.

Then a third, semi-honest round offered to the same nodes is refused by every
one of them (their policy pins the active mode).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from privfed.errors import ProtocolAbort
from privfed.flower import PolicyFiles, SecAggRound, SecAggRoundResult, run_simulation
from privfed.flower.client import JournalIn
from privfed.flower.policy import write_identity_key
from privfed.flower.secagg_app import expected_sum, sum_client_app, sum_server_app
from privfed.secagg import IdentityKey, IdentityRegistry, SecAggConfig, Stage

N = 5
LENGTH = 200


class _Rounds(SecAggRound):
    """Rounds 0 and 1 active; round 2 semi-honest (a weaker round the nodes must refuse)."""

    def __init__(self, registry: IdentityRegistry) -> None:
        super().__init__(
            threshold=4,
            vector_length=LENGTH,
            timeout=20.0,
            config_fields={"mode": "active", "identities": registry, "corrupted": 1},
        )

    def make_config(
        self, client_ids: Iterable[int], *, session_id: bytes | None = None, round_index: int = 0
    ) -> SecAggConfig:
        if round_index == 2:
            self.config_fields = {}
        return super().make_config(client_ids, session_id=session_id, round_index=round_index)


@pytest.mark.slow
def test_the_active_mode_over_the_simulation_engine(tmp_path: Path) -> None:
    keys = {cid: IdentityKey.generate() for cid in range(1, N + 1)}
    registry = IdentityRegistry.of(keys, assumed_corrupted=1)
    registry.save(tmp_path / "registry.json")
    for cid, key in keys.items():
        write_identity_key(tmp_path / f"node-{cid - 1}.key", key)  # by partition id
    outcomes: dict[int, SecAggRoundResult | ProtocolAbort] = {}
    partitions: dict[int, int] = {}

    def on_round(r: int, outcome: SecAggRoundResult | ProtocolAbort, pids: dict[int, int]) -> None:
        outcomes[r] = outcome
        partitions.update(pids)

    server = sum_server_app(rounds=3, on_round=on_round, workflow=_Rounds(registry), num_clients=N)
    client = sum_client_app(
        faults={(1, 4): (Stage.CONSISTENCY_CHECK, "raise")},
        journal=JournalIn(tmp_path / "journals"),
        policy=PolicyFiles(tmp_path, min_threshold=4, corrupted=1),
    )
    run_simulation(server, client, num_supernodes=N, num_cpus=2, client_cpus=1.0)

    assert sorted(outcomes) == [0, 1, 2]
    everyone = list(range(1, N + 1))
    for r in (0, 1):
        outcome = outcomes[r]
        assert isinstance(outcome, SecAggRoundResult), outcome
        assert outcome.config.active and list(outcome.survivors) == everyone
        expected = expected_sum([partitions[c] for c in everyone], r, LENGTH)
        np.testing.assert_array_equal(outcome.total, expected)
    one = outcomes[1]
    assert isinstance(one, SecAggRoundResult)
    assert one.dropped[Stage.CONSISTENCY_CHECK] == (5,)
    refused = outcomes[2]
    assert isinstance(refused, ProtocolAbort) and refused.stage == "ADVERTISE_KEYS"
