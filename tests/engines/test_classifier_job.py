"""The latent job's classifier settings: defaults, validation, the thread default."""

from __future__ import annotations

import pytest

from privfed.engines.latent import job
from privfed.engines.latent.config import PipelineConfig
from privfed.errors import ParameterError


def test_defaults_train_one_early_stopped_mlp_and_no_baselines() -> None:
    config = PipelineConfig()
    assert config.classifier == "mlp"
    assert config.classifier_patience == 3
    assert config.baselines is False
    assert config.num_threads is None
    recorded = config.to_dict()
    assert recorded["classifier"] == "mlp" and recorded["classifier_patience"] == 3


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("classifier", "resnet"),
        ("classifier_patience", 0),
        ("classifier_patience", 2.0),
        ("num_threads", 0),
        ("num_threads", True),
        ("classifier_epochs", 0),
    ],
)
def test_bad_classifier_settings_are_refused_by_name(name: str, value: object) -> None:
    with pytest.raises(ParameterError, match=name):
        PipelineConfig(**{name: value})  # type: ignore[arg-type]


def test_the_old_fixed_epoch_cnn_remains_configurable() -> None:
    config = PipelineConfig(classifier="cnn", classifier_patience=None, num_threads=1)
    assert (config.classifier, config.classifier_patience, config.num_threads) == ("cnn", None, 1)


@pytest.mark.parametrize(
    ("cores", "load", "expected"),
    [(2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 4.8, 1), (16, 3.2, 13), (1, 0.0, 1)],
)
def test_idle_cores_leaves_out_the_busy_ones(
    monkeypatch: pytest.MonkeyPatch, cores: int, load: float, expected: int
) -> None:
    monkeypatch.setattr("torch.get_num_threads", lambda: cores)
    monkeypatch.setattr("os.getloadavg", lambda: (load, load, load))
    assert job._idle_cores() == expected


def test_idle_cores_without_a_load_average_uses_every_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing() -> tuple[float, float, float]:
        raise OSError("no load average")

    monkeypatch.setattr("torch.get_num_threads", lambda: 4)
    monkeypatch.setattr("os.getloadavg", missing)
    assert job._idle_cores() == 4
