"""The latent job's active secure-aggregation mode (``secagg_mode="active"``).

Every round here is a real in-process secure-aggregation round over serialized
messages; the active one signs keys against a registry of fresh identity keys
and runs the ConsistencyCheck stage.  Nothing here is statistical: with the
same ``noise_seed`` both modes must release the very same numbers.
"""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import privfed.engines.latent.job as job
import privfed.secagg.runner as runner_module
from privfed.cli import main
from privfed.engines.latent.config import PipelineConfig
from privfed.engines.latent.job import run_pipeline
from privfed.engines.latent.report import PipelineResult
from privfed.errors import ParameterError
from privfed.secagg import SecurityMode

TINY: dict[str, Any] = {
    "num_clients": 6,
    "samples_per_class": 20,
    "classifier_epochs": 1,
    "latent_dim": 4,
    "dropout_rate": 0.34,
    "audit": False,
    "baselines": False,
    "noise_seed": 4,
}

_TINY_CLI: list[str] = runpy.run_path(str(Path(__file__).parents[2] / "cli" / "tiny_args.py"))[
    "TINY_CLI"
]


def _modes_seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[SecurityMode, int, int]]:
    """Record (mode, corrupted, identity keys) of every secure-aggregation round played."""
    seen: list[tuple[SecurityMode, int, int]] = []
    real = runner_module.run_protocol

    def spy(*args: Any, **kwargs: Any) -> Any:
        mode = SecurityMode(kwargs.get("mode", SecurityMode.SEMI_HONEST))
        keys = kwargs.get("identity_keys") or {}
        seen.append((mode, int(kwargs.get("corrupted", 0)), len(keys)))
        return real(*args, **kwargs)

    # Both the central and the distributed round call run_protocol by name.
    monkeypatch.setattr(job, "run_protocol", spy)
    monkeypatch.setattr("privfed.engines.latent.distributed_round.run_protocol", spy)
    return seen


def _same_release(a: PipelineResult, b: PipelineResult) -> None:
    assert a.aggregate == b.aggregate
    assert a.report.dropped_clients == b.report.dropped_clients
    for name in ("sums", "second_moments", "counts"):
        np.testing.assert_array_equal(getattr(a.release, name), getattr(b.release, name))
    np.testing.assert_array_equal(a.synthetic_latents, b.synthetic_latents)
    assert a.report.epsilon == b.report.epsilon and a.report.mu == b.report.mu


@pytest.mark.parametrize("noise", ["central", "distributed-gaussian"])
def test_active_round_releases_what_the_semi_honest_round_releases(
    noise: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _modes_seen(monkeypatch)
    semi = run_pipeline(PipelineConfig(noise=noise, assumed_corrupted=1, **TINY))
    active = run_pipeline(
        PipelineConfig(noise=noise, assumed_corrupted=1, secagg_mode="active", **TINY)
    )
    # The active run really played the active protocol, with n_C pinned and one key per client.
    assert seen == [(SecurityMode.SEMI_HONEST, 0, 0), (SecurityMode.ACTIVE, 1, 6)]
    _same_release(semi, active)
    semi_doc, active_doc = semi.report.release_dict(), active.report.release_dict()
    assert semi_doc["public"]["secagg_mode"] == "semi-honest"
    assert active_doc["public"]["secagg_mode"] == "active"
    assert active_doc["public"]["config"]["secagg_mode"] == "active"
    if noise == "central":
        assert active_doc["dp"]["trust"] == semi_doc["dp"]["trust"]
    else:
        semi_trust, active_trust = semi_doc["dp"]["trust"], active_doc["dp"]["trust"]
        assert "semi-honest mode" in semi_trust and "assumed to follow" in semi_trust
        assert "active mode" in active_trust and "not trusted to follow" in active_trust
        assert "n_C = 1" in active_trust
        assert active_doc["dp"]["distributed"]["secagg_mode"] == "active"


def test_violating_config_is_refused_naming_the_parameter() -> None:
    # n = 6, t = 4: 2t = 8 > 6 + n_C holds for n_C <= 1 only.
    PipelineConfig(num_clients=6, assumed_corrupted=1, secagg_mode="active")
    with pytest.raises(ParameterError, match="assumed_corrupted") as info:
        PipelineConfig(num_clients=6, assumed_corrupted=2, secagg_mode="active")
    assert "secagg_mode='active'" in str(info.value)
    # Odd n: 2t = n + 1, so only n_C = 0 is admissible.
    PipelineConfig(num_clients=7, secagg_mode="active")
    with pytest.raises(ParameterError, match="assumed_corrupted"):
        PipelineConfig(num_clients=7, assumed_corrupted=1, secagg_mode="active")
    # The semi-honest mode has no such rule.
    assert PipelineConfig(num_clients=6, assumed_corrupted=2).secagg_mode == "semi-honest"
    with pytest.raises(ParameterError, match="secagg_mode"):
        PipelineConfig(secagg_mode="malicious")


def test_external_aggregator_must_play_the_configured_mode() -> None:
    """An external round declares its mode; no release may claim one that was not run."""

    def never(*_: Any) -> Any:
        raise AssertionError("the aggregator must not be called")

    config = PipelineConfig(secagg_mode="active", **TINY)
    with pytest.raises(ParameterError, match="secagg_mode"):
        run_pipeline(config, aggregator=never)
    semi = PipelineConfig(**TINY)
    with pytest.raises(ParameterError, match="secagg_mode"):
        run_pipeline(semi, aggregator=never, aggregator_mode="active")


def test_cli_secagg_mode_active(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = [*_TINY_CLI, "--no-audit", "--secagg-mode", "active", "--output-dir", str(out)]
    assert main(argv) == 0
    release = json.loads((out / "release.json").read_text())
    assert release["public"]["secagg_mode"] == "active"
    card = json.loads((out / "model_card.json").read_text())
    assert "secagg_mode" in json.dumps(card) and "active model" in json.dumps(card)
    capsys.readouterr()
    # 4 clients, t = 3: 2t = 6 > 4 + n_C needs n_C <= 1; refused before any work.
    bad = [*argv[:-1], str(tmp_path / "bad"), "--assumed-corrupted", "2"]
    assert main(bad) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in lines[0]
    assert "--assumed-corrupted" in lines[0] and "active" in lines[0]
    assert not (tmp_path / "bad").exists()
