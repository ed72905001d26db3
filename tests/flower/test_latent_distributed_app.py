"""Distributed DP through the Flower latent app (in-process grid double; no Ray).

The nodes add their noise shares before masking and the server decodes the
noisy total after subtracting the revealed excess layers.  With the same
public ``noise-seed`` every node derives its noise exactly as the in-process
job derives that client's noise, so the Flower round and the in-process round
must deliver *identical* noisy totals (an equality test: no false-failure
rate); the dropouts are the job's scripted ones, so the survivor sets match.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flower_helpers import walk_arrays

import privfed.flower.server as server_module
from privfed.engines.latent.distributed import exact_ring_vector, layers_supported
from privfed.engines.latent.job import aggregate_with_noise, dropout_plan, run_spec
from privfed.engines.latent.stages import client_statistics, encode, fit_codec, load_data
from privfed.errors import ParameterError, ProtocolAbort
from privfed.flower.client import JournalIn
from privfed.flower.latent_app import (
    _FlowerAggregator,
    check_round_config,
    latent_client_app,
    latent_main,
    pipeline_config,
)
from privfed.secagg import SecAggClient, SecAggConfig, SecAggServer
from privfed.secagg.protocol.state import (
    MemoryRevealJournal,
    export_client_state,
    restore_client_state,
)

# Six clients, t = 4, two scripted dropouts (one before its masked input, one after).
RUN: dict[str, Any] = {
    "num-clients": 6,
    "samples-per-class": 40,
    "latent-dim": 6,
    "dropout-rate": 0.34,
    "audit": False,
    "baselines": False,
    "noise-seed": 4,
}

needs_layers = pytest.mark.skipif(not layers_supported(), reason="no noise layers in secagg")





@pytest.mark.slow
@pytest.mark.parametrize(
    "model", [pytest.param("distributed-skellam", marks=needs_layers), "distributed-gaussian"]
)
def test_flower_round_delivers_the_in_process_noisy_total(
    model: str, loopback: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    servers: list[SecAggServer] = []

    class Recording(SecAggServer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            servers.append(self)

    monkeypatch.setattr(server_module, "SecAggServer", Recording)
    run = {**RUN, "noise": model}
    config = pipeline_config(run)
    data = load_data(config)
    codec = fit_codec(config, data.split.public)
    spec, plan = run_spec(config, codec, num_classes=data.num_classes)
    assert plan is not None
    assert plan.layers == (2 if model == "distributed-skellam" else 0)
    dropouts = dropout_plan(config)
    assert sum(len(v) for v in dropouts.values()) == 2

    grid = loopback(latent_client_app(journal=JournalIn(tmp_path)), 6, run_config=run)
    agg = _FlowerAggregator(
        grid, {1001 + i: i for i in range(6)}, threshold=0, timeout=1.0, seeded=True
    )
    delivered = agg.noisy(data, plan, dropouts)
    dist = delivered.distributed

    # The in-process job's round on the same public plan and seed.
    latents = encode(codec, data.split.private.images, config.device)
    stats = [
        client_statistics(latents[i], data.split.private.labels[i], spec, config.device)
        for i in data.clients
    ]
    _, reference = aggregate_with_noise(stats, plan, dropouts, config.noise_seed)
    assert dist.survivors == reference.survivors and len(dist.survivors) == 5
    assert {s: set(v) for s, v in delivered.dropouts.items()} == {
        s: set(v) for s, v in dropouts.items()
    }
    np.testing.assert_array_equal(dist.server_total, reference.server_total)
    np.testing.assert_array_equal(dist.noisy.sums, reference.noisy.sums)
    np.testing.assert_array_equal(dist.noisy.second_moments, reference.noisy.second_moments)
    assert dist.noisy.noise_std_sum == reference.noisy.noise_std_sum
    if plan.layers:  # the excess layers of the 5 survivors were revealed and removed
        assert agg.round is not None
        assert set(agg.round.revealed_noise_seeds) == {c + 1 for c in dist.survivors}

    # The Flower server never holds the survivors' noiseless total.
    exact = stats[dist.survivors[0]]
    for i in dist.survivors[1:]:
        exact = exact + stats[i]
    exact_ring = exact_ring_vector(exact)
    (server,) = servers
    seen: list[np.ndarray] = []
    walk_arrays(vars(server), seen)
    walk_arrays(agg.round, seen)
    same_shape = [a for a in seen if a.shape == exact_ring.shape]
    assert same_shape  # the walk reaches the unmasked total
    assert not any(np.array_equal(a.astype(np.uint64), exact_ring) for a in same_shape)
    noised = np.concatenate(plan.positions)
    differs = np.count_nonzero(dist.server_total[noised] != exact_ring[noised])
    assert differs >= 0.99 * noised.size


@pytest.mark.slow
def test_a_node_refuses_a_round_its_plan_is_not_calibrated_for() -> None:
    config = pipeline_config({**RUN, "noise": "distributed-gaussian"})
    data = load_data(config)
    codec = fit_codec(config, data.split.public)
    _, plan = run_spec(config, codec, num_classes=data.num_classes)
    assert plan is not None
    good = SecAggConfig(
        client_ids=tuple(range(1, 7)), threshold=plan.threshold,
        vector_length=plan.spec.num_values, session_id=bytes(32),
    )  # fmt: skip
    check_round_config(good, plan)
    low = SecAggConfig(
        client_ids=tuple(range(1, 7)), threshold=plan.threshold - 1,
        vector_length=plan.spec.num_values, session_id=bytes(32),
    )  # fmt: skip
    with pytest.raises(ProtocolAbort, match="threshold 3 \\(plan: 4\\)"):
        check_round_config(low, plan)


def test_the_app_refuses_a_threshold_the_noise_is_not_calibrated_for(loopback: Any) -> None:
    run = {**RUN, "noise": "distributed-gaussian", "threshold": 3, "wait-s": 0.1}
    with pytest.raises(ParameterError, match="threshold"):
        latent_main(loopback(latent_client_app(), 6, run_config=run), run)


@needs_layers
def test_the_state_codec_round_trips_the_noise_seeds() -> None:
    config = SecAggConfig(
        client_ids=(1, 2, 3, 4, 5), threshold=3, vector_length=4, noise_layers=2,
        session_id=bytes(32),
    )  # fmt: skip
    seeds = [bytes([7]) * 32, bytes([9]) * 32]
    client = SecAggClient(config, 2, noise_seeds=seeds)
    journal = MemoryRevealJournal()
    journal.start_session(config.session_id, config.round_index, 2)  # as a node does
    client.advertise_keys()
    again = restore_client_state(export_client_state(client), journal=journal)
    assert again._noise_seeds == tuple(seeds)
    assert again._noise_commitments == client._noise_commitments
    assert export_client_state(again) == export_client_state(client)


@needs_layers
def test_a_node_without_layer_seeds_refuses_a_layered_round(loopback: Any) -> None:
    from flwr.clientapp import ClientApp

    from privfed.flower import SecAggRound, add_secagg_handlers

    app = add_secagg_handlers(ClientApp(), lambda c, k: np.zeros(4, np.uint64))
    flow = SecAggRound(threshold=2, vector_length=4, timeout=1.0, config_fields={"noise_layers": 1})
    with pytest.raises(ProtocolAbort) as info:
        flow.run(loopback(app, 3), [1001, 1002, 1003])
    assert info.value.stage == "ADVERTISE_KEYS"


@pytest.mark.slow
@needs_layers
def test_the_app_writes_the_in_process_jobs_release(loopback: Any, tmp_path: Path) -> None:
    """The whole job over the grid double: same release, ledger and DP facts as ``privfed run``."""
    import json

    from privfed.engines.latent.job import run_pipeline

    run = {**RUN, "noise": "distributed-skellam", "classifier-epochs": 1, "wait-s": 5.0}
    run["output-dir"] = str(tmp_path / "flower")
    grid = loopback(latent_client_app(journal=JournalIn(tmp_path)), 6, run_config=run)
    flower = latent_main(grid, run)
    local = run_pipeline(pipeline_config(run))
    local.write(tmp_path / "local")
    for a, b in ((flower.release, local.release),):
        np.testing.assert_array_equal(a.sums, b.sums)
        np.testing.assert_array_equal(a.second_moments, b.second_moments)
        np.testing.assert_array_equal(a.counts, b.counts)
    assert flower.ledger.to_json() == local.ledger.to_json()
    assert flower.report.distributed == local.report.distributed
    assert flower.report.dropped_clients == local.report.dropped_clients
    mine, theirs = (
        json.loads((tmp_path / d / "release.json").read_text()) for d in ("flower", "local")
    )
    assert mine["dp"] == theirs["dp"]
    evaluation = json.loads((tmp_path / "flower" / "flower_evaluation.json").read_text())
    assert "already carries the clients' noise" in evaluation["kind"]


@pytest.mark.slow
@needs_layers
def test_fresh_layer_seeds_are_the_ones_shared_and_revealed(loopback: Any, tmp_path: Path) -> None:
    """Without a noise seed each node draws fresh layer seeds once per session.

    The node noises with the seeds it kept in its Context.state; the server
    rebuilds, from the Shamir shares, exactly those seeds for the layers the
    reveal rule releases (so it subtracts the noise the node added).
    """
    from privfed.flower.latent_node import _LAYER_SEEDS_KEY

    run = {**RUN, "noise": "distributed-skellam", "noise-seed": -1}
    config = pipeline_config(run)
    data = load_data(config)
    _, plan = run_spec(config, fit_codec(config, data.split.public), num_classes=data.num_classes)
    assert plan is not None and plan.layers == 2
    grid = loopback(latent_client_app(journal=JournalIn(tmp_path)), 6, run_config=run)
    agg = _FlowerAggregator(grid, {1001 + i: i for i in range(6)}, threshold=0, timeout=1.0)
    delivered = agg.noisy(data, plan, dropout_plan(config))
    assert agg.round is not None
    revealed = agg.round.revealed_noise_seeds
    # 5 survivors of 6: the reveal rule releases layer 2 of each survivor (j > n - u = 1).
    assert set(revealed) == {c + 1 for c in delivered.distributed.survivors}
    stored = {}
    for node, context in grid.contexts.items():
        record = context.state.config_records[_LAYER_SEEDS_KEY]
        stored[node - 1000] = list(record["seeds"])
    assert len({s for seeds in stored.values() for s in seeds}) == 12  # all fresh, distinct
    for cid, layers in revealed.items():
        assert set(layers) == {2}
        assert layers[2] == stored[cid][1]
