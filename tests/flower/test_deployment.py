"""The latent job on Flower's deployment engine: a SuperLink and three SuperNode processes.

``scripts/flower_deploy.py`` starts them on 127.0.0.1 (free ports,
``--insecure``) and stops every process (and descendant) it started, also
when the test fails.  The run's secure-aggregation total must be
bit-identical to :func:`privfed.secagg.run_in_memory` on the same
partitions' statistics, and its ``release.json`` equal to what
``privfed run`` writes with the same noise seed.  (Each SuperNode starts a
ClientApp process per message and polls every few seconds, so this takes a
minute or two on two cores.)
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

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


def _deploy_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "flower_deploy", ROOT / "scripts/flower_deploy.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _toml(run: dict[str, object]) -> str:
    return " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in run.items())


@pytest.mark.slow
def test_latent_job_across_supernode_processes(tmp_path: Path) -> None:
    deploy = _deploy_module()
    out = tmp_path / "flower"
    config = f'job="latent" timeout=120.0 output-dir="{out}" {_toml(RUN)}'
    with deploy.deployment(NODES, workdir=tmp_path / "deploy") as (connection, env, procs):
        status = deploy.run_app(
            ROOT / "examples" / "flower_app",
            connection,
            env,
            config,
            timeout=480.0,
            log=tmp_path / "flwr-run.log",
        )
        log = (tmp_path / "flwr-run.log").read_text(errors="replace")
        assert status == 0 and "ServerApp raised" not in log, log[-3000:]
    assert all(p.poll() is not None for p in procs)  # every process was stopped

    flower = json.loads((out / "flower_evaluation.json").read_text())
    assert flower["nodes"] == NODES and flower["survivors"] == [0, 1, 2]

    # The aggregate equals the in-process protocol's on the same partitions' statistics.
    from privfed.flower.latent_app import node_ring_vector, pipeline_config
    from privfed.secagg import run_in_memory

    pc = pipeline_config(RUN)
    vectors = [node_ring_vector(pc, pid) for pid in range(NODES)]
    total = run_in_memory(vectors, threshold=NODES // 2 + 1)
    np.testing.assert_array_equal(total, np.sum(vectors, axis=0, dtype=np.uint64))
    digest = hashlib.sha256(np.ascontiguousarray(total, dtype="<u8").tobytes()).hexdigest()
    assert flower["aggregate_ring_sha256"] == digest

    # The release equals `privfed run`'s with the same noise seed.
    local = tmp_path / "local"
    argv = [
        sys.executable, "-m", "privfed", "run", "--clients", str(NODES), "--noise-seed", "7",
        "--epochs", "2", "--samples-per-class", "50", "--no-baselines", "--no-audit",
        "--output-dir", str(local), "--quiet",
    ]  # fmt: skip
    subprocess.run(argv, check=True, cwd=tmp_path, env={**os.environ}, timeout=300)
    ours = json.loads((out / "release.json").read_text())
    theirs = json.loads((local / "release.json").read_text())
    assert ours == theirs
    assert (out / "ledger.json").read_text() == (local / "ledger.json").read_text()
