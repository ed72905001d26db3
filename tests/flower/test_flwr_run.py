"""The README's own command: ``flwr run examples/flower_app`` in Flower's simulation engine.

Run as a user runs it -- the venv's ``bin`` on PATH (an activated venv), a
fresh Flower home, the federation size given with ``--federation-config`` --
with distributed Skellam noise and two noise seeds.  The app folder's
ClientApp once masked the exact statistics here while ``release.json``
claimed distributed DP; now the two seeds must give two different noisy
totals, neither the exact one, every survivor must have declared the plan's
noise, and the scripted dropout must be one log line, not a traceback.

``flwr run`` leaves a local SuperLink and SuperExec running (Flower's design);
the test stops every process whose environment names its Flower home.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from flower_helpers import flower_env, flower_home

ROOT = Path(__file__).resolve().parents[2]
NODES = 3
RUN = {
    "num-clients": NODES,
    "classifier-epochs": 1,
    "samples-per-class": 40,
    "audit": "false",
    "dropout-rate": 0.34,
    "noise": '"distributed-skellam"',
}


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_flwr_run_of_the_app_folder_adds_the_noise_its_release_claims(tmp_path: Path) -> None:
    from privfed.flower.latent_app import node_ring_vector, pipeline_config

    bin_dir = Path(sys.executable).parent
    digests, logs = {}, {}
    with flower_home(tmp_path) as home:
        env = flower_env(home)
        for seed in (7, 123):
            out = tmp_path / f"seed-{seed}"
            run = " ".join(f"{k}={v}" for k, v in RUN.items())
            argv = [
                str(bin_dir / "flwr"), "run", str(ROOT / "examples" / "flower_app"), "--stream",
                "--federation-config", f"num-supernodes={NODES}",
                "--run-config", f'{run} noise-seed={seed} output-dir="{out}"',
            ]  # fmt: skip
            done = subprocess.run(
                argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=400
            )
            logs[seed] = done.stdout + done.stderr
            assert done.returncode == 0, logs[seed][-3000:]
            assert "privfed latent job over Flower" in logs[seed], logs[seed][-3000:]
            evaluation = json.loads((out / "flower_evaluation.json").read_text())
            digests[seed] = evaluation["aggregate_ring_sha256"]
            release = json.loads((out / "release.json").read_text())
            assert release["dp"]["distributed"]["noise_model"] == "distributed-skellam"
            declared = evaluation["declarations"]
            assert sorted(declared) == [str(p) for p in evaluation["survivors"]]
            assert all(d["mechanism"] == "skellam" and d["seeded"] for d in declared.values())
            assert len(evaluation["survivors"]) == NODES - 1  # one scripted dropout ...
            assert "scripted dropout of partition" in logs[seed]
            assert "Traceback" not in logs[seed]  # ... logged as one line

    # The exact total on the run's own grid (the distributed plan's fractional bits).
    config = pipeline_config(
        {"num-clients": NODES, "samples-per-class": 40, "dropout-rate": 0.34}
        | {"noise": "distributed-skellam", "noise-seed": 7}
    )
    seven = json.loads((tmp_path / "seed-7" / "flower_evaluation.json").read_text())
    survivors = seven["survivors"]
    exact = np.sum([node_ring_vector(config, p) for p in survivors], axis=0, dtype=np.uint64)
    exact_digest = hashlib.sha256(np.ascontiguousarray(exact, dtype="<u8").tobytes()).hexdigest()
    assert exact_digest not in digests.values()
    assert digests[7] != digests[123]
