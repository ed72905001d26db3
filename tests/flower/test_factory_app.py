"""The factory job's Flower app: nodes ship verified factories, the server builds the matrix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from flwr.app import ConfigRecord

from privfed.errors import ArtifactIntegrityError, ProtocolAbort
from privfed.flower import _wire
from privfed.flower.apps import client_app
from privfed.flower.factory_app import (
    FACTORY_RESULT_FILE,
    factory_config,
    factory_main,
    receive_factories,
)

RUN = {
    "job": "factory",
    "num-clients": 3,
    "scenario": "dirichlet",
    "latent-dim": 8,
    "synthetic-per-class": 20,
    "classifier-epochs": 2,
    "unlearn-client": 1,
}


@pytest.mark.slow
def test_factories_travel_verified_and_a_client_is_unlearned(loopback: Any, tmp_path: Path) -> None:
    run = {**RUN, "output-dir": str(tmp_path / "out")}
    grid = loopback(client_app, 3, run_config=run)
    doc = factory_main(grid, run)
    assert doc == json.loads((tmp_path / "out" / FACTORY_RESULT_FILE).read_text())
    assert doc["clients"] == [0, 1, 2] and doc["refused"] == {}
    assert doc["num_factories"] >= 3
    certificate = doc["unlearning_certificate"]
    assert certificate["scope"] == "client" and certificate["target"] == 1
    assert 0.0 <= doc["accuracy_after_unlearning"] <= 1.0

    # A node's reply, replayed as if another node had sent it, is refused.
    replies = [m for m in grid.delivered if m.metadata.message_type.endswith("factory_fit")]
    record = _wire.config_record(replies[0].content)
    owner = replies[0].metadata.src_node_id - 1001
    config = factory_config(run)
    from privfed.engines.factory.job import public_codec

    codec = public_codec(config)
    assert receive_factories(record, client_id=owner, num_classes=10, codec=codec)
    with pytest.raises(ProtocolAbort, match="delivered by"):
        receive_factories(record, client_id=(owner + 1) % 3, num_classes=10, codec=codec)
    # A tampered weight file fails its checksum before any tensor is used.
    forged = dict(record)
    weights = bytearray(forged["0.weights"])  # type: ignore[arg-type]
    weights[-1] ^= 1
    forged["0.weights"] = bytes(weights)
    with pytest.raises(ArtifactIntegrityError):
        receive_factories(ConfigRecord(forged), client_id=owner, num_classes=10, codec=codec)
