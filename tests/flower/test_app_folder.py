"""The example app folder's run configuration is one the apps accept."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from privfed.engines.latent.config import PipelineConfig
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


def _app_config(command: str) -> dict[str, object]:
    """The run config that the app folder named by a ``flwr run`` command declares."""
    folder = shlex.split(command.split("#", 1)[0])[2]
    document = tomllib.loads((ROOT / folder / "pyproject.toml").read_text(encoding="utf-8"))
    config = document["tool"]["flwr"]["app"]["config"]
    assert isinstance(config, dict)
    return config


DOCS = [
    "README.md",
    "examples/flower_app/README.md",
    "examples/flower_secagg_training/README.md",
    "examples/flower_dp_training/README.md",
]


@pytest.mark.parametrize("doc", DOCS)
def test_the_documented_flwr_commands_run_as_written(doc: str) -> None:
    """Each documented ``flwr run``: keys its app declares (else Flower's code 15), for
    privfed's job app a federation as large as ``num-clients`` (else the server waits in
    vain), and the venv on PATH (else "Unable to launch flower-superlink")."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    commands = _flwr_commands(text)
    assert commands, doc
    for command in commands:
        declared = _app_config(command)
        assert _run_config_keys(command) <= set(declared), command
        if "num-clients" not in declared:  # the training examples sample from any federation
            continue
        nodes = re.search(r"num-supernodes=(\d+)", command)
        wanted = re.search(r"num-clients=(\d+)", command)
        size = int(nodes.group(1)) if nodes else 2  # a fresh Flower home has 2 nodes
        clients = int(wanted.group(1)) if wanted else int(declared["num-clients"])  # type: ignore[call-overload]
        assert size == clients, command
    assert ". .venv/bin/activate" in text


@pytest.mark.parametrize("doc", DOCS[:2])
def test_the_docs_say_how_to_stop_what_flwr_run_leaves_running(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    assert "pkill -f 'flower-superlink --insecure --simulation'" in text


def test_the_deprecated_node_count_is_not_what_the_docs_recommend() -> None:
    text = (ROOT / "examples/flower_app/README.md").read_text(encoding="utf-8")
    before, _, _ = text.partition("options.num-supernodes")
    assert "--federation-config 'num-supernodes=" in before
    assert "deprecated" in text[text.index("options.num-supernodes") - 400 :]


def test_the_app_declares_every_key_its_server_and_nodes_read() -> None:
    """Flower refuses an override of an undeclared key ("Invalid run configuration")."""
    read: set[str] = set()
    for module in ("apps", "latent_app", "server", "node_app", "latent_node", "client"):
        source = (ROOT / "src" / "privfed" / "flower" / f"{module}.py").read_text()
        read |= set(re.findall(r'\brun(?:_config)?\.get\("([a-z-]+)"', source))
    assert {"job", "wait-s", "join-grace-s", "secagg-registry", "journal-dir"} <= read
    assert read <= set(_run_config()), sorted(read - set(_run_config()))
