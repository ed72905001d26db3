"""The one-shot latent job in the active mode over Flower (in-process grid double; no Ray).

The server names its copy of the registry in the run config
(``secagg-registry``); each node's policy (identity key, registry, minimum
threshold, n_C) is its own node config.  With the public ``noise-seed`` the
Flower round delivers exactly the in-process job's noisy total, and the job
writes its release, which records the active mode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flower_helpers import active_node_config

from privfed.engines.latent.job import aggregate_with_noise, dropout_plan, run_spec
from privfed.engines.latent.stages import client_statistics, encode, fit_codec, load_data
from privfed.errors import ParameterError
from privfed.flower import _wire
from privfed.flower.client import JournalIn
from privfed.flower.latent_app import (
    _FlowerAggregator,
    active_fields,
    latent_client_app,
    latent_main,
    pipeline_config,
)
from privfed.flower.policy import write_identity_key
from privfed.secagg import IdentityKey, IdentityRegistry, Stage

RUN: dict[str, Any] = {
    "num-clients": 6,
    "samples-per-class": 40,
    "latent-dim": 6,
    "dropout-rate": 0.34,
    "audit": False,
    "baselines": False,
    "noise-seed": 4,
    "noise": "distributed-gaussian",
    "secagg-mode": "active",
    "assumed-corrupted": 1,
}


@pytest.fixture
def run(tmp_path: Path) -> dict[str, Any]:
    keys = {cid: IdentityKey.generate() for cid in range(1, 7)}
    IdentityRegistry.of(keys, assumed_corrupted=1).save(tmp_path / "registry.json")
    for cid, key in keys.items():
        write_identity_key(tmp_path / f"node-{cid}.key", key)
    return {**RUN, "secagg-registry": str(tmp_path / "registry.json")}


def _grid(loopback: Any, tmp_path: Path, run: dict[str, Any]) -> Any:
    grid = loopback(latent_client_app(journal=JournalIn(tmp_path / "j")), 6, run_config=run)
    for i, context in enumerate(grid.contexts.values()):
        context.node_config.update(active_node_config(tmp_path, i + 1))
    return grid


@pytest.mark.slow
def test_an_active_distributed_round_delivers_the_in_process_noisy_total(
    loopback: Any, tmp_path: Path, run: dict[str, Any]
) -> None:
    config = pipeline_config(run)
    data = load_data(config)
    codec = fit_codec(config, data.split.public)
    spec, plan = run_spec(config, codec, num_classes=data.num_classes)
    assert plan is not None and plan.secagg_mode == "active"
    dropouts = dropout_plan(config)
    grid = _grid(loopback, tmp_path, run)
    agg = _FlowerAggregator(
        grid,
        {1001 + i: i for i in range(6)},
        threshold=0,
        timeout=1.0,
        seeded=True,
        secagg_fields=active_fields(run, config),
    )
    delivered = agg.noisy(data, plan, dropouts)
    assert agg.round is not None and agg.round.config.active
    assert agg.round.config.corrupted == 1
    consist = [
        r
        for r in grid.delivered
        if r.metadata.message_type == _wire.MESSAGE_TYPES[Stage.CONSISTENCY_CHECK]
    ]
    assert consist and not any(r.has_error() and "policy" in r.error.reason for r in consist)
    latents = encode(codec, data.split.private.images, config.device)
    stats = [
        client_statistics(latents[i], data.split.private.labels[i], spec, config.device)
        for i in data.clients
    ]
    _, reference = aggregate_with_noise(stats, plan, dropouts, config.noise_seed)
    dist = delivered.distributed
    assert dist.survivors == reference.survivors and len(dist.survivors) == 5
    np.testing.assert_array_equal(dist.server_total, reference.server_total)
    np.testing.assert_array_equal(dist.noisy.sums, reference.noisy.sums)


@pytest.mark.slow
def test_a_node_whose_partition_is_not_its_registry_id_refuses(
    loopback: Any, tmp_path: Path, run: dict[str, Any]
) -> None:
    """Partition p is client p + 1: a node holding another id's key refuses the round."""
    run = {**run, "scripted-dropouts": False}
    config = pipeline_config(run)
    data = load_data(config)
    _, plan = run_spec(config, fit_codec(config, data.split.public), num_classes=data.num_classes)
    grid = _grid(loopback, tmp_path, run)
    grid.contexts[1001].node_config["privfed-identity-key"] = str(tmp_path / "node-6.key")
    grid.contexts[1006].node_config["privfed-identity-key"] = str(tmp_path / "node-1.key")
    agg = _FlowerAggregator(
        grid, {1001 + i: i for i in range(6)}, threshold=0, timeout=1.0, seeded=True,
        secagg_fields=active_fields(run, config),
    )  # fmt: skip
    delivered = agg.noisy(data, plan, {})
    assert delivered.distributed.survivors == (1, 2, 3, 4)  # partitions 0 and 5 refused
    errors = {
        int(r.metadata.src_node_id): r.error.reason
        for r in grid.delivered
        if r.has_error() and r.metadata.message_type == _wire.MESSAGE_TYPES[Stage.ADVERTISE_KEYS]
    }
    assert set(errors) == {1001, 1006}
    assert all("not this node's identity" in e for e in errors.values())


def test_the_server_checks_its_registry_before_waiting(tmp_path: Path) -> None:
    config = pipeline_config(RUN)
    with pytest.raises(ParameterError, match="secagg-registry"):
        active_fields(RUN, config)
    few = {c: IdentityKey.generate() for c in range(1, 5)}
    IdentityRegistry.of(few).save(tmp_path / "few.json")
    with pytest.raises(ParameterError, match=r"1\.\.6"):
        active_fields({**RUN, "secagg-registry": str(tmp_path / "few.json")}, config)
    strict = {c: IdentityKey.generate() for c in range(1, 7)}
    IdentityRegistry.of(strict, assumed_corrupted=2).save(tmp_path / "strict.json")
    with pytest.raises(ParameterError, match="assumed-corrupted"):
        active_fields({**RUN, "secagg-registry": str(tmp_path / "strict.json")}, config)
    semi = {**RUN, "secagg-mode": "semi-honest"}
    assert active_fields(semi, pipeline_config(semi)) == {}


@pytest.mark.slow
def test_the_active_latent_job_writes_its_release(
    loopback: Any, tmp_path: Path, run: dict[str, Any]
) -> None:
    """The whole job over the grid double: the in-process active job's release, mode recorded."""
    from privfed.engines.latent.job import run_pipeline

    run = {**run, "classifier-epochs": 1, "wait-s": 5.0, "output-dir": str(tmp_path / "flower")}
    flower = latent_main(_grid(loopback, tmp_path, run), run)
    local = run_pipeline(pipeline_config(run))
    np.testing.assert_array_equal(flower.release.sums, local.release.sums)
    np.testing.assert_array_equal(flower.release.counts, local.release.counts)
    assert flower.ledger.to_json() == local.ledger.to_json()
    release = json.loads((tmp_path / "flower" / "release.json").read_text())
    assert release["public"]["secagg_mode"] == "active"
    assert release["dp"]["distributed"]["secagg_mode"] == "active"
    evaluation = json.loads((tmp_path / "flower" / "flower_evaluation.json").read_text())
    assert "CONSISTENCY_CHECK" in evaluation["stage_seconds"]
