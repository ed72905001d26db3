"""The job contract: the release/evaluation split, the run directory, atomic writes, progress."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from release_scan import json_numbers, latent_private_numbers

from privfed.dp import Adjacency, PrivacyLedger
from privfed.engines import job as job_module
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.job import run_factory_pipeline
from privfed.engines.job import (
    RELEASE_FILENAMES,
    RunArtifacts,
    StageClock,
    check_device,
    check_output_dir,
    write_artifacts,
)
from privfed.engines.latent.config import PipelineConfig
from privfed.engines.latent.job import run_pipeline
from privfed.errors import ParameterError
from privfed.progress import ProgressEvent

TINY: dict[str, Any] = {
    "num_clients": 5,
    "samples_per_class": 23,
    "classifier_epochs": 1,
    "latent_dim": 5,
    "dropout_rate": 0.2,
    "noise_seed": 3,
    "baselines": False,
    "seed": 4,
}


#: Public facts a release may state: the operator's configuration and what follows from
#: it (codec dimension, grid, payload sizes, the protocol's threshold and scripted
#: dropouts, the public split's size).  Anything else must be a DP output.
_DECLARED_KEYS = (
    "config",
    "latent_dim",
    "clip_norm",
    "fractional_bits",
    "payload_values_per_class",
    "payload_values_per_client",
    "payload_bytes_per_client",
    "num_clients",
    "secagg_threshold",
    "dropped_clients",
)


def _release_numbers(run_dir: Path) -> tuple[set[float], set[float]]:
    """(numbers in the release files, numbers that are declared public facts)."""
    release = json.loads((run_dir / "release.json").read_text())
    ledger_file = run_dir / "ledger.json"
    ledger = json.loads(ledger_file.read_text()) if ledger_file.exists() else {}
    # DP outputs are noisy by construction (a noisy count may equal the exact one by chance).
    dp = {k: v for k, v in release["dp"].items() if k != "noisy_class_counts"}
    released = json_numbers({k: v for k, v in release.items() if k != "dp"}) | json_numbers(dp)
    released |= json_numbers(ledger)
    declared = json_numbers({k: v for k, v in release["public"].items() if k in _DECLARED_KEYS})
    # Class ids (ledger partition labels) and the ledger's own format fields.
    declared |= {float(c) for c in range(0, 11)} | {float(ledger.get("version", 0))}
    declared |= json_numbers([r.get("dimension") for r in ledger.get("releases", [])])
    with np.load(run_dir / "synthetic.npz") as synthetic:
        shapes = {float(n) for n in synthetic["images"].shape} | {float(synthetic["labels"].size)}
    return released | shapes, declared | shapes


def _assert_no_private_number(run_dir: Path, private: dict[str, list[int]]) -> None:
    released, declared = _release_numbers(run_dir)
    leaks = {
        name: sorted(v for v in values if float(v) not in declared and float(v) in released)
        for name, values in private.items()
    }
    assert not any(leaks.values()), f"private numbers in the release: {leaks}"


@pytest.fixture(scope="module", params=[Adjacency.REPLACE_ONE, Adjacency.ADD_REMOVE])
def latent_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    result = run_pipeline(PipelineConfig(adjacency=request.param, **TINY))
    out = tmp_path_factory.mktemp("run")
    result.write(out)
    return result, out


def test_latent_release_carries_no_private_number(latent_run: Any) -> None:
    result, out = latent_run
    private = latent_private_numbers(result)
    assert private["totals"] and private["client sizes"]  # the scan has something to find
    _assert_no_private_number(out, private)
    # ... while the evaluation, labelled as such, does carry them.
    evaluation = json.loads((out / "evaluation.json").read_text())
    assert evaluation["records_aggregated"] == result.report.records_aggregated
    assert "EVALUATION, NOT RELEASE" in evaluation["notice"]
    assert not (out / "report.json").exists()


def test_the_scan_catches_a_leak(latent_run: Any, tmp_path: Path) -> None:
    result, _ = latent_run
    leaky = dict(result.report.release_dict())
    leaky["public"] = {**leaky["public"], "records": result.report.records_aggregated}
    artifacts = result.artifacts()
    write_artifacts(
        tmp_path,
        RunArtifacts(
            release=leaky,
            ledger=artifacts.ledger,
            sample_images=artifacts.sample_images,
            sample_labels=artifacts.sample_labels,
        ),
    )
    with pytest.raises(AssertionError, match="private numbers"):
        _assert_no_private_number(tmp_path, latent_private_numbers(result))


def test_latent_release_numbers_trace_to_the_ledger(latent_run: Any) -> None:
    result, out = latent_run
    release = json.loads((out / "release.json").read_text())
    # The digest is of the ledger's canonical JSON (the file adds indentation and annotations).
    canonical = PrivacyLedger.from_json((out / "ledger.json").read_text()).to_json()
    assert release["dp"]["ledger_sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert release["dp"]["epsilon"] == result.ledger.guarantee().epsilon or np.isclose(
        release["dp"]["epsilon"], result.report.epsilon
    )
    counts = release["dp"].get("noisy_class_counts")
    if result.report.config["adjacency"] == "add-remove":
        # Counts are private under add/remove: only their noisy release is published.
        assert counts == [float(c) for c in result.release.counts]
        assert release["dp"]["noise_std_count"] > 0
    else:
        assert counts is None


@pytest.mark.slow
def test_factory_release_carries_no_private_number(tmp_path: Path) -> None:
    config = FactoryPipelineConfig(
        scenario="dirichlet",
        num_clients=4,
        synthetic_per_class=7,
        classifier_epochs=1,
        fedavg_rounds=1,
        centralized=False,
        audit=False,
        seed=2,
    )
    report = run_factory_pipeline(config)
    report.write(tmp_path)
    counts = [v for row in report.class_counts for v in row if v > 1]
    private = {
        "cell counts": counts,
        "client sizes": [sum(col) for col in zip(*report.class_counts, strict=True)],
        "factories": [report.num_factories],
        "bytes": [round(report.factory_bytes_per_client)],
    }
    _assert_no_private_number(tmp_path, private)
    release = json.loads((tmp_path / "release.json").read_text())
    assert release["dp"]["guarantee"] is None  # Gaussian factories are not DP, and it says so
    evaluation = json.loads((tmp_path / "evaluation.json").read_text())
    assert evaluation["class_counts"] == [list(r) for r in report.class_counts]


def test_release_only_writes_the_release_alone(latent_run: Any, tmp_path: Path) -> None:
    result, _ = latent_run
    paths = result.write(tmp_path, release_only=True)
    assert sorted(p.name for p in paths.values()) == sorted(RELEASE_FILENAMES)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(RELEASE_FILENAMES)
    # The release's files: the four DP/public artefacts and the model card, nothing else.
    assert sorted(RELEASE_FILENAMES) == [
        "ledger.json",
        "model_card.json",
        "model_card.md",
        "release.json",
        "samples.png",
        "synthetic.npz",
    ]
    card = json.loads((tmp_path / "model_card.json").read_text())
    assert card["contains_evaluation"] is False
    assert not any(
        f["status"] == "evaluation" for s in card["sections"].values() for f in s["fields"].values()
    )


_TEXT_NUMBER = re.compile(r"(?<![\w.\-])-?\d+\.\d+(?:e[-+]?\d+)?")


def _evaluation_only_numbers(full_dir: Path) -> set[float]:
    """Fractional numbers of a full run's evaluation that no release file states (3 d.p.)."""
    evaluation = json_numbers(json.loads((full_dir / "evaluation.json").read_text()))
    released = json_numbers(json.loads((full_dir / "release.json").read_text()))
    if (full_dir / "ledger.json").exists():
        released |= json_numbers(json.loads((full_dir / "ledger.json").read_text()))
    public = {round(v, 3) for v in released}
    return {round(v, 3) for v in evaluation if v != int(v)} - public


def _shipped_numbers(path: Path) -> set[float]:
    """The numbers a shipped file states (JSON values, numbers in text), to 3 d.p."""
    if path.suffix == ".json":
        document = json.loads(path.read_text())
        assert document.get("contains_evaluation", False) is False, path.name
        return {round(v, 3) for v in json_numbers(document)}
    if path.suffix == ".md":
        text = path.read_text(encoding="utf-8")
        assert "| evaluation |" not in text, path.name
        return {round(float(m), 3) for m in _TEXT_NUMBER.findall(text)}
    if path.suffix == ".npz":  # the synthetic release: its arrays, nothing else
        with np.load(path, allow_pickle=False) as data:
            assert set(data.files) == {"images", "labels"}, path.name
        return set()
    assert path.suffix == ".png", path.name  # the picture of the synthetic images
    return set()


def test_no_export_of_the_release_ships_an_evaluation_number(
    latent_run: Any, tmp_path: Path
) -> None:
    """The release files of a full run, and every file a release-only export writes."""
    result, full = latent_run
    evaluation = _evaluation_only_numbers(full)
    assert len(evaluation) >= 2  # accuracies, timings: the scan has something to find
    shipped = [full / name for name in RELEASE_FILENAMES]
    result.write(tmp_path, release_only=True)
    shipped += sorted(tmp_path.iterdir())
    for path in shipped:
        leaked = _shipped_numbers(path) & evaluation
        assert not leaked, f"evaluation numbers in shipped {path.name}: {sorted(leaked)}"
    assert (full / "evaluation_card.json").is_file()  # the full run's card of its evaluation
    # The full run's release card is the release-only run's card, byte for byte.
    for name in ("model_card.json", "model_card.md"):
        assert (full / name).read_bytes() == (tmp_path / name).read_bytes()


def test_output_dir_is_checked_before_anything_is_written(tmp_path: Path) -> None:
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(ParameterError, match=r"output_dir.*is a file"):
        check_output_dir(afile)
    with pytest.raises(ParameterError, match="lies under"):
        check_output_dir(afile / "sub")
    full = tmp_path / "full"
    full.mkdir()
    (full / "other.txt").write_text("keep me")
    with pytest.raises(ParameterError, match="overwrite=True"):
        check_output_dir(full)
    assert check_output_dir(full, overwrite=True) == full
    assert check_output_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    assert not (tmp_path / "new").exists()  # checking creates nothing


def test_overwrite_replaces_the_run_and_removes_stale_artefacts(
    latent_run: Any, tmp_path: Path
) -> None:
    result, _ = latent_run
    assert result.audit_inputs is not None
    result.write(tmp_path)
    (tmp_path / "report.json").write_text("{}")  # what an older privfed wrote
    (tmp_path / "notes.txt").write_text("the operator's own file")
    with pytest.raises(ParameterError, match="output_dir"):
        result.write(tmp_path)
    paths = result.write(tmp_path, overwrite=True, release_only=True)
    names = sorted(p.name for p in tmp_path.iterdir())
    # The earlier run's evaluation (real records' latents) is gone; other files are kept.
    assert names == sorted([*RELEASE_FILENAMES, "notes.txt"])
    assert set(paths) == {
        "release",
        "ledger",
        "samples",
        "synthetic",
        "model_card_json",
        "model_card_md",
    }


def test_a_failed_write_leaves_nothing_behind(
    latent_run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, _ = latent_run

    def broken(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(job_module, "save_sample_grid", broken)
    target = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        result.write(target)
    assert not target.exists()
    existing = tmp_path / "existing"
    existing.mkdir()
    with pytest.raises(KeyboardInterrupt):
        result.write(existing)
    assert list(existing.iterdir()) == []  # no temporary file, no partial artefact


def test_device_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_device("cpu") == "cpu"
    with pytest.raises(ParameterError, match="'cpu', 'cuda' or 'cuda:N'"):
        check_device("gpu")
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ParameterError, match="no CUDA device"):
        check_device("cuda")
    with pytest.raises(ParameterError, match="device"):
        run_pipeline(PipelineConfig(device="gpu", **TINY))


def test_stage_clock_reports_start_and_finish_with_seconds() -> None:
    events: list[ProgressEvent] = []
    clock = StageClock(events.append)
    clock.start("data", "loading")
    seconds = clock.finish("data", "done")
    clock.start("factories")
    for done in range(1, 4):
        clock.step("factories", done, 3)
    assert [(e.stage, e.done, e.total) for e in events] == [
        ("data", 0, 1),
        ("data", 1, 1),
        ("factories", 0, 1),
        ("factories", 1, 3),
        ("factories", 2, 3),
        ("factories", 3, 3),
    ]
    assert events[1].seconds == seconds == clock.seconds["data"] >= 0
    assert events[-1].seconds is not None and events[-2].seconds is None
    with pytest.raises(ValueError, match="done <= total"):
        ProgressEvent("x", 4, 3)
