"""The latent job on Flower's deployment engine: a SuperLink and three SuperNode processes.

``scripts/flower_deploy.py`` starts them on 127.0.0.1 (free ports) with
TLS (a throwaway CA and a certificate for 127.0.0.1 generated at start) and
SuperNode authentication (each node's key registered before it starts), and
stops every process (and descendant) it started, also when the test fails.
The run's secure-aggregation total must be bit-identical to
:func:`privfed.secagg.run_in_memory` on the same partitions' statistics, and
its ``release.json`` equal to what ``privfed run`` writes with the same noise
seed.  (Each SuperNode starts a ClientApp process per message and polls every
few seconds, so this takes a few minutes on two cores.)
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from flower_helpers import deploy_module as _deploy_module

ROOT = Path(__file__).resolve().parents[2]
NODES = 3
RUN = {
    "num-clients": NODES,
    "noise-seed": 7,
    "classifier-epochs": 2,
    "samples-per-class": 50,
    "baselines": False,
    "audit": False,
}


def _toml(run: dict[str, object]) -> str:
    return " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in run.items())


def _exact_digest(run: dict[str, object]) -> str:
    """Digest of the exact ring total of every partition (what no server may hold)."""
    from privfed.flower.latent_app import node_ring_vector, pipeline_config
    from privfed.secagg import run_in_memory

    pc = pipeline_config(run)
    vectors = [node_ring_vector(pc, pid) for pid in range(NODES)]
    total = run_in_memory(vectors, threshold=NODES // 2 + 1)
    np.testing.assert_array_equal(total, np.sum(vectors, axis=0, dtype=np.uint64))
    return hashlib.sha256(np.ascontiguousarray(total, dtype="<u8").tobytes()).hexdigest()


def _privfed_run(tmp_path: Path, name: str, *extra: str) -> Path:
    local = tmp_path / name
    argv = [
        sys.executable, "-m", "privfed", "run", "--clients", str(NODES), "--noise-seed", "7",
        "--epochs", "2", "--samples-per-class", "50", "--no-baselines", "--no-audit",
        "--output-dir", str(local), "--quiet", *extra,
    ]  # fmt: skip
    subprocess.run(argv, check=True, cwd=tmp_path, env={**os.environ}, timeout=300)
    return local


@pytest.mark.slow
def test_latent_job_across_supernode_processes(tmp_path: Path) -> None:
    """Central noise, then distributed Skellam with two noise seeds, on one deployment.

    * central: the aggregate equals the in-process protocol's exact sum and the
      release equals ``privfed run``'s with the same noise seed;
    * distributed (the path that once published an un-noised release): the
      server's total is not the exact one, two seeds give two totals and two
      releases, and with seed 7 the release and ledger equal ``privfed run
      --noise distributed-skellam --noise-seed 7``'s -- the nodes added exactly
      the noise the in-process job adds (whose variance the in-process and
      grid-double tests check against the plan), and so is the synthetic data.
    """
    deploy = _deploy_module()
    runs = {
        "central": {**RUN},
        "skellam-7": {**RUN, "noise": '"distributed-skellam"'},
        "skellam-123": {**RUN, "noise": '"distributed-skellam"', "noise-seed": 123},
    }
    info = deploy.DeploymentInfo()
    with deploy.deployment(NODES, workdir=tmp_path / "deploy", info=info) as (
        connection,
        env,
        procs,
    ):
        # TLS and node authentication on: every node is a registered key.
        assert info.credentials is not None and len(set(info.node_ids)) == NODES
        for name, run in runs.items():
            out = tmp_path / name
            config = f'job="latent" timeout=120.0 output-dir="{out}" {_toml(run)}'
            log = tmp_path / f"flwr-run-{name}.log"
            status = deploy.run_app(
                ROOT / "examples" / "flower_app", connection, env, config, timeout=480.0, log=log
            )
            text = log.read_text(errors="replace")
            assert status == 0 and "ServerApp raised" not in text, text[-3000:]
    assert all(p.poll() is not None for p in procs)  # every process was stopped

    exact = _exact_digest(RUN)
    evaluation = {
        name: json.loads((tmp_path / name / "flower_evaluation.json").read_text()) for name in runs
    }
    for doc in evaluation.values():
        assert doc["nodes"] == NODES and doc["survivors"] == [0, 1, 2]

    # Central: the server's total is the exact sum; the release is privfed run's.
    assert evaluation["central"]["aggregate_ring_sha256"] == exact
    local = _privfed_run(tmp_path, "local")
    for name in ("release.json", "ledger.json"):
        # Equal but for the provenance (its time, run id and command are the run's own).
        ours = json.loads((tmp_path / "central" / name).read_text())
        theirs = json.loads((local / name).read_text())
        assert ours.pop("provenance") and theirs.pop("provenance")
        assert ours == theirs, name

    # Distributed: noise in every total, a different one per seed, privfed run's release.
    seven, other = (evaluation[n]["aggregate_ring_sha256"] for n in ("skellam-7", "skellam-123"))
    exact_on_the_plans_grid = _exact_digest({**RUN, "noise": "distributed-skellam"})
    assert exact_on_the_plans_grid != exact  # the distributed plan has its own grid
    assert exact_on_the_plans_grid not in (seven, other) and seven != other
    noisy_local = _privfed_run(tmp_path, "local-skellam", "--noise", "distributed-skellam")
    releases = {
        name: json.loads((tmp_path / name / "release.json").read_text())
        for name in ("skellam-7", "skellam-123")
    }
    local_release = json.loads((noisy_local / "release.json").read_text())
    # Equal but for the provenance (time, run id and command are each run's own).
    assert local_release.pop("provenance") and releases["skellam-7"].pop("provenance")
    assert releases["skellam-7"] == local_release
    # release.json holds public facts only; the noisy statistics shape the synthetic data.
    synthetic = {
        name: np.load(tmp_path / name / "synthetic.npz")["images"]
        for name in ("skellam-7", "skellam-123")
    }
    np.testing.assert_array_equal(
        synthetic["skellam-7"], np.load(noisy_local / "synthetic.npz")["images"]
    )
    assert not np.array_equal(synthetic["skellam-7"], synthetic["skellam-123"])
    ledgers = [
        json.loads((d / "ledger.json").read_text()) for d in (tmp_path / "skellam-7", noisy_local)
    ]
    assert all(ledger.pop("provenance") for ledger in ledgers)
    assert ledgers[0] == ledgers[1]
    assert releases["skellam-7"]["dp"]["distributed"]["noise_model"] == "distributed-skellam"


@pytest.mark.slow
def test_dp_training_example_across_supernode_processes(tmp_path: Path) -> None:
    """The DP training example, distributed Skellam, on a deployment with TLS and node auth.

    The same ServerApp/ClientApp as the simulation and grid-double tests, across
    SuperNode processes: both rounds run, each is one release in the run's ledger, the
    ε spent stays within the budget, the release states who is trusted, and every round's
    planned noise is at least the central std.  (That the nodes' noise really is in the
    sum, with the plan's std, is measured by the grid-double test
    ``test_dp_training_flower.py``, which sees the plaintext updates.)
    """
    deploy = _deploy_module()
    out = tmp_path / "dp"
    config = (
        f'num-server-rounds=2 num-sampled-clients={NODES} num-shares={NODES} '
        f'reconstruction-threshold=2 epsilon=8.0 output-dir="{out}" '
        f'journal-dir="{tmp_path / "journals"}" timeout=120.0'
    )
    with deploy.deployment(NODES, workdir=tmp_path / "deploy") as (connection, env, procs):
        log = tmp_path / "flwr-run-dp.log"
        status = deploy.run_app(
            ROOT / "examples" / "flower_dp_training", connection, env, config,
            timeout=480.0, log=log,
        )  # fmt: skip
        text = log.read_text(errors="replace")
        assert status == 0 and "ServerApp raised" not in text, text[-3000:]
    assert all(p.poll() is not None for p in procs)  # every process was stopped
    ledger = json.loads((out / "ledger.json").read_text())
    assert len(ledger["releases"]) == 2
    document = json.loads((out / "dp_training.json").read_text())
    assert 0.0 < document["epsilon_spent"] <= 8.0
    assert "trusted" in document["plan"]["trust"]
    assert len(document["rounds"]) == 2
    assert all(r["noise_over_central"] >= 1.0 for r in document["rounds"])
