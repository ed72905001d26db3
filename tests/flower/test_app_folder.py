"""The example app folder's run configuration is one the apps accept."""

from __future__ import annotations

import tomllib
from pathlib import Path

from privfed.engines.latent.job import PipelineConfig
from privfed.flower.latent_app import pipeline_config

APP = Path(__file__).resolve().parents[2] / "examples" / "flower_app" / "pyproject.toml"


def _run_config() -> dict[str, object]:
    document = tomllib.loads(APP.read_text(encoding="utf-8"))
    config = document["tool"]["flwr"]["app"]["config"]
    assert isinstance(config, dict) and config
    return config


def test_the_app_names_privfeds_server_and_client_apps() -> None:
    components = tomllib.loads(APP.read_text(encoding="utf-8"))["tool"]["flwr"]["app"]["components"]
    assert components == {
        "serverapp": "privfed.flower.apps:server_app",
        "clientapp": "privfed.flower.apps:client_app",
    }


def test_the_app_config_builds_the_latent_job_with_privfed_runs_training_defaults() -> None:
    """The keys the app shares with ``privfed run`` keep the job's defaults.

    So ``flwr run examples/flower_app`` trains the classifier as ``privfed run`` does
    (the release does not depend on it, the evaluation does).
    """
    config = pipeline_config(_run_config())
    default = PipelineConfig()
    for name in ("classifier", "classifier_epochs", "baselines", "epsilon", "delta", "noise"):
        assert getattr(config, name) == getattr(default, name), name
    assert config.num_clients == _run_config()["num-clients"]
