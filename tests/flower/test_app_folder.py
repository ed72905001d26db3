"""The example app folder's run configuration is one the apps accept."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from privfed.engines.latent.job import PipelineConfig
from privfed.flower.latent_app import pipeline_config

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "flower_app" / "pyproject.toml"


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


def _flwr_commands(text: str) -> list[str]:
    """The ``flwr run`` commands of a Markdown text (continuation lines joined)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line.strip() for line in joined.splitlines() if line.strip().startswith("flwr run")]


def _run_config_keys(command: str) -> set[str]:
    found = re.search(r"--run-config '([^']*)'", command)
    if found is None:
        return set()
    return {token.split("=", 1)[0] for token in shlex.split(found.group(1)) if "=" in token}


@pytest.mark.parametrize("doc", ["README.md", "examples/flower_app/README.md"])
def test_the_documented_flwr_commands_run_as_written(doc: str) -> None:
    """Each documented ``flwr run``: keys the app declares (else Flower's code 15), the
    federation's size equal to ``num-clients`` (else the server waits in vain), and the
    venv on PATH (else "Unable to launch flower-superlink")."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    commands = _flwr_commands(text)
    assert commands, doc
    declared = set(_run_config())
    for command in commands:
        assert _run_config_keys(command) <= declared, command
        nodes = re.search(r"num-supernodes=(\d+)", command)
        wanted = re.search(r"num-clients=(\d+)", command)
        size = int(nodes.group(1)) if nodes else 2  # a fresh Flower home has 2 nodes
        clients = int(wanted.group(1)) if wanted else int(_run_config()["num-clients"])  # type: ignore[call-overload]
        assert size == clients, command
    assert ". .venv/bin/activate" in text
    assert "pkill -f 'flower-superlink --insecure --simulation'" in text  # what flwr run leaves


def test_the_deprecated_node_count_is_not_what_the_docs_recommend() -> None:
    text = (ROOT / "examples/flower_app/README.md").read_text(encoding="utf-8")
    before, _, _ = text.partition("options.num-supernodes")
    assert "--federation-config 'num-supernodes=" in before
    assert "deprecated" in text[text.index("options.num-supernodes") - 400 :]
