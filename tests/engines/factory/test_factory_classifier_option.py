"""The factory job's ``classifier`` and ``mixture_components`` options, end to end.

The downstream classifier and the centralized baseline train the configured
architecture; the option is post-processing of the released factories, so the
factories, the ledger and the unlearning certificate do not depend on it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from privfed.cli import main
from privfed.engines import classifier as classifier_module
from privfed.engines.classifier import SmallCNN, SmallMLP
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.job import run_factory_pipeline, train_downstream
from privfed.errors import ParameterError
from privfed.flower.factory_app import factory_config

_SMALL: dict[str, Any] = {
    "factory": "mixture",
    "latent_dim": 8,
    "mixture_components": 2,
    "synthetic_per_class": 20,
    "classifier_epochs": 1,
    "fedavg_rounds": 1,
    "audit": False,
}


def test_a_classifier_outside_its_domain_is_refused() -> None:
    with pytest.raises(ParameterError) as info:
        FactoryPipelineConfig(classifier="resnet")  # type: ignore[arg-type]
    assert info.value.parameter == "classifier"
    assert FactoryPipelineConfig().classifier == "cnn"


@pytest.mark.parametrize(("kind", "model"), [("cnn", SmallCNN), ("mlp", SmallMLP)])
def test_train_downstream_builds_the_configured_architecture(kind: str, model: type) -> None:
    images = torch.rand(20, 1, 8, 8)
    labels = torch.arange(20) % 2
    config = FactoryPipelineConfig(classifier=kind, classifier_epochs=1)  # type: ignore[arg-type]
    assert isinstance(train_downstream(config, images, labels, 2), model)


@pytest.mark.slow
def test_downstream_and_centralized_train_the_same_architecture(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    original = classifier_module.train_classifier

    def recording(*args: Any, **kwargs: Any) -> torch.nn.Module:
        seen.append(kwargs.get("architecture", "cnn"))
        return original(*args, **kwargs)

    monkeypatch.setattr(classifier_module, "train_classifier", recording)
    report = run_factory_pipeline(FactoryPipelineConfig(**_SMALL, classifier="mlp"))
    assert seen == ["mlp", "mlp"]  # the synthetic-data classifier, then the centralized one
    assert report.config.to_dict()["classifier"] == "mlp"
    assert report.centralized_accuracy is not None


@pytest.mark.slow
def test_factories_ledger_and_unlearning_do_not_depend_on_the_classifier() -> None:
    base = FactoryPipelineConfig(**_SMALL, epsilon=3.0, noise_seed=5, centralized=False)
    cnn = run_factory_pipeline(base)
    mlp = run_factory_pipeline(replace(base, classifier="mlp"))
    assert cnn.ledger is not None and mlp.ledger is not None
    assert cnn.ledger.releases == mlp.ledger.releases
    assert cnn.dp_epsilon == mlp.dp_epsilon and cnn.dp_epsilon is not None
    assert cnn.dp_epsilon <= 3.0
    assert cnn.matrix.cells == mlp.matrix.cells and cnn.matrix.digest() == mlp.matrix.digest()
    for c, k in cnn.matrix.cells:
        sa = cnn.matrix.factory(c, k).state_tensors()  # type: ignore[union-attr]
        sb = mlp.matrix.factory(c, k).state_tensors()  # type: ignore[union-attr]
        assert all(torch.equal(sa[name], sb[name]) for name in sa)
    assert cnn.synthetic is not None and mlp.synthetic is not None
    assert torch.equal(cnn.synthetic.images, mlp.synthetic.images)
    removed_a = cnn.matrix.remove_client(0).to_dict()["removed_cells"]
    removed_b = mlp.matrix.remove_client(0).to_dict()["removed_cells"]
    assert removed_a == removed_b and removed_a
    assert cnn.matrix.digest() == mlp.matrix.digest()


def test_flower_run_config_names_the_options() -> None:
    config = factory_config({"factory-classifier": "mlp", "mixture-components": 3})
    assert config.classifier == "mlp" and config.mixture_components == 3
    with pytest.raises(ParameterError):
        factory_config({"factory-classifier": "svm"})


def test_the_cli_passes_the_options_and_the_card_states_them(tmp_path: Path) -> None:
    argv = ["run", "--engine", "factory", "--factory", "mixture", "--latent-dim", "8"]
    argv += ["--mixture-components", "2", "--classifier", "mlp", "--samples-per-class", "10"]
    argv += ["--epochs", "1", "--fedavg-rounds", "1", "--no-baselines", "--no-audit", "--quiet"]
    assert main([*argv, "--output-dir", str(tmp_path)]) == 0
    config = json.loads((tmp_path / "release.json").read_text())["public"]["config"]
    assert config["classifier"] == "mlp" and config["mixture_components"] == 2
    card = json.loads((tmp_path / "model_card.json").read_text())
    model = card["sections"]["model"]["fields"]
    assert model["factory"]["value"] == "mixture"
    assert model["classifier"]["value"] == "mlp"
    assert model["mixture_components"]["value"] == 2
    assert model["gaussian_basis"]["value"] == "public-pca"


@pytest.mark.parametrize(
    "argv",
    [
        ["--engine", "factory", "--mixture-components", "0"],
        ["--engine", "factory", "--classifier", "svm"],
        ["--classifier", "mlp"],  # a factory-only option on the latent engine
    ],
)
def test_bad_or_foreign_options_are_refused(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    try:
        code = main(["run", *argv, "--output-dir", str(out)])
    except SystemExit as exc:  # argparse's own refusal
        code = int(exc.code or 0)
    assert code != 0
    assert not out.exists()
    err = capsys.readouterr().err
    assert "--mixture-components" in err or "--classifier" in err


def test_zero_fedavg_rounds_skips_the_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--engine", "factory", "--samples-per-class", "10", "--epochs", "1"]
    argv += ["--fedavg-rounds", "0", "--no-baselines", "--no-audit", "--classifier", "mlp"]
    assert main([*argv, "--output-dir", str(tmp_path)]) == 0
    assert "accuracy, FedAvg" in capsys.readouterr().out
    evaluation = json.loads((tmp_path / "evaluation.json").read_text())
    assert evaluation["fedavg_accuracy"] is None
    assert evaluation["fedavg_bytes_per_client"] is None
    assert "fedavg" not in evaluation["seconds"]
    assert 0.0 <= evaluation["factory_accuracy"] <= 1.0
