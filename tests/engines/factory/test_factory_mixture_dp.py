"""The DP mixture factory in the job: its ledger against dp-accounting, its release's words.

A tiny mixture run at ε = 3 (digits, 3 clients, Dirichlet α = 0.5, PCA-8,
at most 2 components) records one Gaussian release per (class, client) cell.
Each release is checked against dp-accounting alone (no privfed accountant):
a Gaussian mechanism of unit sensitivity and the recorded noise multiplier
(the whitened multiplier ``1/μ`` of the cell's plan) stays within the target,
and 3 % less noise misses it, so the cell is not grossly over-noised.  The
release (and through it the model card) names the mixture's mechanism, and
the Flower app's run config selects the mixture kind.  Everything is seeded:
no false-failure rate.
"""

from __future__ import annotations

import json
from pathlib import Path

import dp_accounting
import pytest
from dp_accounting.pld import PLDAccountant

from privfed.cli import main
from privfed.dp import Adjacency, GaussianRelease
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.job import run_factory_pipeline
from privfed.flower.factory_app import factory_config

TARGET = 3.0
DELTA = 1e-5


def _dp_accounting_epsilon(noise_multiplier: float) -> float:
    """ε at DELTA of one unit-sensitivity Gaussian release, from dp-accounting alone."""
    accountant = PLDAccountant()
    accountant.compose(dp_accounting.GaussianDpEvent(noise_multiplier=noise_multiplier))
    return float(accountant.get_epsilon(DELTA))


@pytest.mark.slow
def test_mixture_ledger_events_match_dp_accounting_and_the_release_names_them() -> None:
    config = FactoryPipelineConfig(
        factory="mixture",
        num_clients=3,
        scenario="dirichlet",
        dirichlet_alpha=0.5,
        latent_dim=8,
        mixture_components=2,
        epsilon=TARGET,
        delta=DELTA,
        noise_seed=0,
        synthetic_per_class=4,
        classifier_epochs=1,
        fedavg_rounds=0,
        centralized=False,
        audit=False,
    )
    report = run_factory_pipeline(config)
    assert report.ledger is not None
    releases = report.ledger.releases
    assert len(releases) == report.num_factories >= 10  # one release per cell
    for release in releases:
        # One whole-cell Gaussian release (no subsampling, no steps), replace-one.
        assert isinstance(release, GaussianRelease)
        assert release.adjacency is Adjacency.REPLACE_ONE
        eps = _dp_accounting_epsilon(release.noise_multiplier)
        assert eps <= TARGET + 1e-6  # within the target, independently of privfed
        assert _dp_accounting_epsilon(0.97 * release.noise_multiplier) > TARGET
    # Disjoint cells compose in parallel: the run's ε is one cell's.
    assert report.dp_epsilon is not None and report.dp_epsilon <= TARGET + 1e-9
    mechanism = report.release_dict()["dp"]["mechanism"]
    assert "mixture" in mechanism and "per-component count" in mechanism


@pytest.mark.slow
def test_the_model_card_states_the_mixture_kind_and_its_mechanism(tmp_path: Path) -> None:
    argv = ["run", "--engine", "factory", "--factory", "mixture", "--latent-dim", "8"]
    argv += ["--mixture-components", "2", "--epsilon", "3", "--samples-per-class", "4"]
    argv += ["--epochs", "1", "--fedavg-rounds", "0", "--no-baselines", "--no-audit", "--quiet"]
    assert main([*argv, "--output-dir", str(tmp_path)]) == 0
    card = json.loads((tmp_path / "model_card.json").read_text())
    text = json.dumps(card)
    assert card["sections"]["model"]["fields"]["factory"]["value"] == "mixture"
    assert "per-component count, clipped latent sum and second moment" in text
    release = json.loads((tmp_path / "release.json").read_text())
    assert release["dp"]["mechanism"] in text


def test_the_flower_run_config_selects_the_mixture_kind() -> None:
    config = factory_config({"factory": "mixture", "mixture-components": 4})
    assert config.factory == "mixture" and config.mixture_components == 4
