"""The factory job's Flower app: nodes ship verified factories, the server builds the matrix."""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flwr.app import ConfigRecord

from privfed.engines.job import RELEASE_FILENAMES
from privfed.errors import ArtifactIntegrityError, ParameterError, ProtocolAbort
from privfed.flower import _wire
from privfed.flower.apps import client_app
from privfed.flower.factory_app import (
    CONFIG_KEYS,
    FACTORY_RESULT_FILE,
    RUN_CONFIG_KEYS,
    SERVER_KEYS,
    factory_config,
    factory_main,
    receive_factories,
)

APP = Path(__file__).resolve().parents[2] / "examples" / "flower_app" / "pyproject.toml"

RUN = {
    "job": "factory",
    "num-clients": 3,
    "scenario": "dirichlet",
    "factory-latent-dim": 8,
    "synthetic-per-class": 20,
    "factory-classifier-epochs": 2,
    "unlearn-client": 1,
}
#: A small run: three Dirichlet clients, 20 synthetic images per class, one epoch.
SMALL = {
    "job": "factory",
    "num-clients": 3,
    "scenario": "dirichlet",
    "synthetic-per-class": 20,
    "factory-classifier-epochs": 1,
}


def _app_config() -> dict[str, Any]:
    config = tomllib.loads(APP.read_text(encoding="utf-8"))["tool"]["flwr"]["app"]["config"]
    assert isinstance(config, dict)
    return config


class _Recording(dict[str, Any]):
    """A run config that records every key read from it."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.read: set[str] = set()

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def items(self) -> Any:  # pragma: no cover -- reading everything defeats the record
        raise AssertionError("the job must read its keys one by one")

    def __iter__(self) -> Iterator[str]:  # pragma: no cover
        raise AssertionError("the job must read its keys one by one")


def test_the_app_folder_declares_every_key_the_factory_job_reads() -> None:
    """Flower refuses undeclared keys (``Invalid run configuration``), so every key is declared.

    With the factory job's own defaults: the app config builds the job
    ``privfed run --engine factory`` runs, and the factory-only keys leave the
    latent job as it was.
    """
    from privfed.engines.factory.config import FactoryPipelineConfig
    from privfed.flower.latent_app import pipeline_config

    declared = _app_config()
    assert sorted(RUN_CONFIG_KEYS - set(declared)) == []
    assert set(CONFIG_KEYS) | set(SERVER_KEYS) == RUN_CONFIG_KEYS
    recording = _Recording(declared)
    config = factory_config(recording)
    assert recording.read <= set(CONFIG_KEYS)  # factory_config reads no key outside its table
    default = FactoryPipelineConfig()
    for key, (name, _) in CONFIG_KEYS.items():
        assert getattr(config, name) == getattr(default, name), key
    assert declared["unlearn-client"] == SERVER_KEYS["unlearn-client"] == -1
    assert declared["release-only"] is SERVER_KEYS["release-only"] is False
    factory_only = set(CONFIG_KEYS) - {"dataset", "num-clients", "seed"} | {"unlearn-client"}
    latent = {k: v for k, v in declared.items() if k not in factory_only}
    assert pipeline_config(declared) == pipeline_config(latent)


def _files(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind",
    [{}, {"factory": "mixture", "mixture-components": 2}],
    ids=["gaussian", "mixture"],
)
def test_over_flower_the_factory_job_writes_what_privfed_run_writes(
    loopback: Any, tmp_path: Path, kind: dict[str, Any]
) -> None:
    """The same artefact set as the in-process job; the release is byte-identical."""
    from privfed.engines.factory.job import run_factory_pipeline

    run = _Recording({**SMALL, **kind, "output-dir": str(tmp_path / "flower")})
    doc = factory_main(loopback(client_app, 3, run_config=dict(run)), run)
    assert run.read <= set(_app_config())  # every key the server read is declared
    report = run_factory_pipeline(factory_config(run))
    report.write(tmp_path / "local")
    flower, local = tmp_path / "flower", tmp_path / "local"

    assert _files(flower) == _files(local) | {FACTORY_RESULT_FILE}
    # Deterministic for the seed: the release, the synthetic data and its picture.
    for name in ("synthetic.npz", "samples.png"):
        assert (flower / name).read_bytes() == (local / name).read_bytes(), name
    # release.json: equal but for the provenance (time, run id and command are the run's own).
    ours = json.loads((flower / "release.json").read_text())
    theirs = json.loads((local / "release.json").read_text())
    assert ours.pop("provenance") and theirs.pop("provenance")
    assert ours == theirs
    release = json.loads((flower / "release.json").read_text())
    assert release["dp"] == report.release_dict()["dp"]
    assert release["dp"]["guarantee"] is None
    assert factory_config(run).factory == kind.get("factory", "gaussian")
    assert release["public"]["config"]["factory"] == kind.get("factory", "gaussian")
    card = (flower / "model_card.md").read_text()
    assert f"| Factory kind | {kind.get('factory', 'gaussian')} | verified |" in card
    with np.load(flower / "synthetic.npz") as ours, np.load(local / "synthetic.npz") as theirs:
        assert ours["images"].shape == theirs["images"].shape == (200, 1, 8, 8)
        assert np.array_equal(ours["labels"], theirs["labels"])
    assert doc["matrix_digest"] == report.matrix.digest()

    # The evaluation: the same figures, less the baselines Flower does not run and the
    # counts of cells that shipped no factory (the server never sees them).
    ours_eval = json.loads((flower / "evaluation.json").read_text())
    theirs_eval = json.loads((local / "evaluation.json").read_text())
    assert ours_eval["fedavg_accuracy"] is None and ours_eval["fedavg_bytes_per_client"] is None
    minimum = factory_config(run).min_records_per_factory
    expected_counts = [
        [n if n >= minimum else 0 for n in row] for row in theirs_eval["class_counts"]
    ]
    assert ours_eval["class_counts"] == expected_counts
    same = ("factory_accuracy", "num_factories", "factory_bytes_per_client", "dp_epsilon", "audit")
    for key in (*same, "centralized_accuracy", "gaussian_basis", "engine", "notice"):
        assert ours_eval[key] == theirs_eval[key], key
    assert len(report.factory_seconds) == ours_eval["num_factories"]
    assert ours_eval["factory_seconds_max"] > 0


def _untouchable(grid: Any) -> Any:
    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a node was contacted")

    grid.get_node_ids = grid.send_and_receive = refuse
    return grid


@pytest.mark.parametrize("value", [3, 7, -2, 1.0, True, "1"])
def test_an_unlearn_client_outside_the_run_is_refused_before_any_node(
    loopback: Any, tmp_path: Path, value: object
) -> None:
    run = {**SMALL, "unlearn-client": value, "output-dir": str(tmp_path / "out")}
    with pytest.raises(ParameterError, match="unlearn-client") as caught:
        factory_main(_untouchable(loopback(client_app, 3, run_config=run)), run)
    assert "[0, 3)" in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_output_dir_and_release_only_are_checked_before_any_node(
    loopback: Any, tmp_path: Path
) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("an earlier run's")
    run = {**SMALL, "output-dir": str(taken), "overwrite": False}
    with pytest.raises(ParameterError, match="output_dir"):
        factory_main(_untouchable(loopback(client_app, 3, run_config=run)), run)
    run = {**SMALL, "output-dir": str(tmp_path / "new"), "release-only": True, "unlearn-client": 0}
    with pytest.raises(ParameterError, match="release-only"):
        factory_main(_untouchable(loopback(client_app, 3, run_config=run)), run)


def test_release_only_writes_the_release_alone(loopback: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    full = {**SMALL, "output-dir": str(out)}
    factory_main(loopback(client_app, 3, run_config=full), full)
    assert {"evaluation.json", FACTORY_RESULT_FILE} <= _files(out)
    again = {**full, "overwrite": True, "release-only": True}
    factory_main(loopback(client_app, 3, run_config=again), again)
    # No DP: no ledger; the earlier run's evaluation files are gone.
    assert _files(out) == set(RELEASE_FILENAMES) - {"ledger.json"}


@pytest.mark.slow
def test_factories_travel_verified_and_a_client_is_unlearned(loopback: Any, tmp_path: Path) -> None:
    from privfed.engines.factory.matrix import UnlearningCertificate

    run = {**RUN, "output-dir": str(tmp_path / "out")}
    grid = loopback(client_app, 3, run_config=run)
    doc = factory_main(grid, run)
    assert doc == json.loads((tmp_path / "out" / FACTORY_RESULT_FILE).read_text())
    assert doc["clients"] == [0, 1, 2] and doc["refused"] == {}
    assert doc["num_factories"] >= 3
    certificate = doc["unlearning_certificate"]
    assert certificate["scope"] == "client" and certificate["target"] == 1
    assert 0.0 <= doc["accuracy_after_unlearning"] <= 1.0
    text = UnlearningCertificate.from_dict(certificate).to_json()
    assert doc["unlearning_certificate_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    # The artefacts are those of the matrix after unlearning: client 1's column is empty.
    evaluation = json.loads((tmp_path / "out" / "evaluation.json").read_text())
    assert evaluation["num_factories"] == doc["num_factories"] - len(certificate["removed_cells"])
    assert all(row[1] == 0 for row in evaluation["class_counts"])
    assert evaluation["factory_accuracy"] == doc["accuracy_after_unlearning"]
    assert (tmp_path / "out" / "release.json").exists()

    # A node's reply, replayed as if another node had sent it, is refused.
    replies = [m for m in grid.delivered if m.metadata.message_type.endswith("factory_fit")]
    record = _wire.config_record(replies[0].content)
    owner = replies[0].metadata.src_node_id - 1001
    config = factory_config(run)
    from privfed.engines.factory.job import public_codec

    codec = public_codec(config)
    assert receive_factories(record, client_id=owner, num_classes=10, codec=codec)
    with pytest.raises(ProtocolAbort, match="delivered by"):
        receive_factories(record, client_id=(owner + 1) % 3, num_classes=10, codec=codec)
    # A tampered weight file fails its checksum before any tensor is used.
    forged = dict(record)
    weights = bytearray(forged["0.weights"])  # type: ignore[arg-type]
    weights[-1] ^= 1
    forged["0.weights"] = bytes(weights)
    with pytest.raises(ArtifactIntegrityError):
        receive_factories(ConfigRecord(forged), client_id=owner, num_classes=10, codec=codec)


@pytest.mark.parametrize(
    "manifest",
    [b"\xff\xfe", b"not json", b"[1, 2]", b'{"manifest": 3}', b"[" * 100_000, b"1" * 5_000],
    ids=["not-utf8", "not-json", "a-list", "inner-not-an-object", "too-deep", "huge-int"],
)
def test_a_malformed_manifest_is_refused_as_an_artifact_error(manifest: bytes) -> None:
    # What a node ships is untrusted: whatever its manifest bytes, the server refuses that
    # node with a typed error (which _collect_factories records) and never crashes the round.
    record = ConfigRecord(
        {"count": 1, "0.manifest": manifest, "0.weights": b"\x00" * 8, "0.seconds": 1.0}
    )
    with pytest.raises(ArtifactIntegrityError, match="manifest"):
        receive_factories(record, client_id=0, num_classes=10, codec=None)
