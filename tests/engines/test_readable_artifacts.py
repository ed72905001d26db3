"""Artefacts a reviewer can read (issue #27, item 2).

Each test here failed on commit d0e78ae: ``ledger.json`` was one unindented
line without any word on its whitened form, no file recorded its provenance,
``delta`` printed as float drift, the card said "CPU threads: none" and tagged
missing declarations "declared", the accuracy had no spread and
``samples.png`` had no caption and grew without bound with the class count.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privfed.dp import Adjacency, PrivacyLedger
from privfed.dp.sensitivity import joint_mu_squared
from privfed.engines.job import save_sample_grid
from privfed.engines.latent.config import PipelineConfig
from privfed.engines.latent.job import run_pipeline
from privfed.engines.provenance import REDACTED, redact_command
from privfed.errors import ParameterError

TINY: dict[str, Any] = {
    "num_clients": 5,
    "samples_per_class": 23,
    "classifier_epochs": 1,
    "latent_dim": 5,
    "dropout_rate": 0.2,
    "noise_seed": 3,
    "baselines": False,
    "audit": False,
    "seed": 4,
}

MESSAGES: list[str] = []
JSON_FILES = (
    "release.json",
    "evaluation.json",
    "ledger.json",
    "model_card.json",
    "evaluation_card.json",
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path, Path]:
    MESSAGES.clear()
    result = run_pipeline(
        PipelineConfig(repeats=3, **TINY), progress=lambda e: MESSAGES.append(e.message)
    )
    full, shipped = tmp_path_factory.mktemp("full"), tmp_path_factory.mktemp("release")
    result.write(full)
    result.write(shipped, release_only=True)
    return result, full, shipped


def test_every_json_artefact_is_indented_and_loads(run: tuple[Any, Path, Path]) -> None:
    _, full, _ = run
    for name in JSON_FILES:
        text = (full / name).read_text()
        assert text.count("\n") > 10 and text.startswith("{\n  "), name
        json.loads(text)
    # The annotated ledger still loads with privfed's own reader, as the same ledger.
    ledger = PrivacyLedger.from_json((full / "ledger.json").read_text())
    assert ledger.guarantee().epsilon == pytest.approx(
        json.loads((full / "release.json").read_text())["dp"]["epsilon"]
    )


def test_the_ledger_explains_its_whitened_form_numerically(run: tuple[Any, Path, Path]) -> None:
    _, full, _ = run
    ledger = json.loads((full / "ledger.json").read_text())
    release = json.loads((full / "release.json").read_text())
    explanation, dp, public = ledger["explanation"], release["dp"], release["public"]
    assert explanation["form"] == "whitened"
    d = public["latent_dim"]
    # Recomputed from release.json alone: the whitened vector's exact sensitivity.
    mu = math.sqrt(
        joint_mu_squared(
            public["clip_norm"],
            dp["noise_std_sum"],
            dp["noise_std_second_moment"],
            Adjacency(dp["adjacency"]),
        )
    )
    for entry in ledger["releases"]:
        assert entry["dimension"] == d + d * d == explanation["dimension"]
        assert entry["noise_std"] == 1.0
        assert entry["l2_sensitivity"] / entry["noise_std"] == pytest.approx(mu, rel=1e-12)
        assert entry["l2_sensitivity"] == dp["mu"] == explanation["l2_sensitivity"]
    blocks = explanation["blocks"]
    assert blocks["sum"]["noise_std"] == dp["noise_std_sum"]
    assert blocks["second_moment"]["noise_std"] == dp["noise_std_second_moment"]
    assert blocks["sum"]["values"] + blocks["second_moment"]["values"] == explanation["dimension"]


def test_one_provenance_across_a_runs_files(run: tuple[Any, Path, Path]) -> None:
    _, full, shipped = run
    seen = []
    for directory, names in ((full, JSON_FILES), (shipped, ("release.json", "model_card.json"))):
        for name in names:
            seen.append(json.loads((directory / name).read_text())["provenance"])
    first = seen[0]
    assert all(p == first for p in seen)  # one run id, time and config in every file
    assert first["privfed_version"]
    assert first["created_utc"].endswith("Z") and first["command"] is None  # a Python run
    assert first["config"]["repeats"] == 3 and "noise_seed" not in first["config"]
    assert "Run " + first["run_id"] in (full / "model_card.md").read_text()


def test_the_noise_seed_never_reaches_a_file(run: tuple[Any, Path, Path]) -> None:
    assert redact_command(["run", "--noise-seed", "5", "--seed", "5"]) == [
        "run",
        "--noise-seed",
        REDACTED,
        "--seed",
        "5",
    ]
    assert redact_command(["run", "--noise-seed=5"]) == ["run", f"--noise-seed={REDACTED}"]


def test_old_ledgers_without_annotations_still_load(run: tuple[Any, Path, Path]) -> None:
    result, _, _ = run
    text = result.ledger.to_json()
    assert "provenance" not in text
    assert PrivacyLedger.from_json(text).mu == result.ledger.mu
    bad = json.loads(text) | {"surprise": 1}
    with pytest.raises(Exception, match="unknown fields"):
        PrivacyLedger.from_json(json.dumps(bad))


def test_delta_is_the_configured_round_value(run: tuple[Any, Path, Path]) -> None:
    _, full, _ = run
    text = (full / "release.json").read_text()
    assert '"delta": 1e-05' in text and "9.9999" not in text


def test_accuracy_spread_over_repeats(run: tuple[Any, Path, Path]) -> None:
    _, full, _ = run
    spread = json.loads((full / "evaluation.json").read_text())["accuracy_synthetic_repeats"]
    values = spread["values"]
    assert spread["repeats"] == len(values) == 3 and spread["seeds"] == [4, 5, 6]
    assert spread["mean"] == pytest.approx(np.mean(values))
    assert spread["std"] == pytest.approx(np.std(values, ddof=1))
    assert spread["min"] == min(values) and spread["max"] == max(values)
    with pytest.raises(ParameterError):
        PipelineConfig(repeats=0)


def test_model_card_states_threads_and_undeclared(run: tuple[Any, Path, Path]) -> None:
    _, full, _ = run
    card = (full / "model_card.md").read_text()
    threads = next(line for line in card.splitlines() if line.startswith("| CPU threads"))
    assert "| none |" not in threads and any(c.isdigit() for c in threads.split("|")[2])
    undeclared = next(line for line in card.splitlines() if line.startswith("| Owner"))
    assert "| declared |" not in undeclared and "not declared" in undeclared


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    return struct.unpack(">II", data[16:24])


def _png_title(path: Path) -> str:
    data, pos = path.read_bytes(), 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"tEXt":
            return data[pos + 8 : pos + 8 + length].split(b"\x00", 1)[1].decode("latin-1")
        pos += 12 + length
    return ""


def test_samples_png_is_captioned(run: tuple[Any, Path, Path]) -> None:
    _, full, _ = run
    title = _png_title(full / "samples.png")
    assert "eps=10" in title and "delta=1e-05" in title
    assert "engine=latent" in title and "codec=pca" in title


def test_samples_png_is_capped_at_many_classes(tmp_path: Path) -> None:
    classes, per = 1000, 2
    images = np.random.default_rng(0).random((classes * per, 1, 8, 8))
    labels = np.repeat(np.arange(classes), per)
    save_sample_grid(images, labels, tmp_path / "s.png", caption="eps=1 delta=1e-05")
    width, height = _png_size(tmp_path / "s.png")
    assert height < 1200 and width < 1200  # 1000 classes gave 298 x 34,002 px before


def test_the_audit_line_says_when_the_test_has_too_little_power() -> None:
    from privfed.engines.model_card.build import _audit_power

    # 100 records a side: an AUC interval about +-0.08 wide cannot see mu = 0.1.
    weak = _audit_power({"estimate": 0.51, "lower": 0.43, "upper": 0.59}, 0.1)
    assert weak is not None and weak["verdict"].startswith("too little power")
    assert weak["smallest_detectable_mu_approx"] > 0.1
    # A narrow interval can: the verdict says so.
    strong = _audit_power({"estimate": 0.50, "lower": 0.499, "upper": 0.501}, 2.0)
    assert strong is not None and strong["verdict"] == "could detect leakage at the claimed mu"


def test_messages_show_enum_values_not_reprs(run: tuple[Any, Path, Path]) -> None:
    text = "\n".join(MESSAGES)
    assert "replace-one" in text and "Adjacency." not in text
    assert "MASKED_INPUT" not in text and "masked-input" in text
