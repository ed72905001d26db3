"""The federated model card: filled from the run, every field traced, nothing private."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from release_scan import json_numbers, latent_private_numbers

from privfed.dp import Adjacency, PrivacyLedger
from privfed.engines.factory.config import FactoryPipelineConfig
from privfed.engines.factory.job import run_factory_pipeline
from privfed.engines.factory.matrix import UnlearningCertificate
from privfed.engines.factory.report import FactoryPipelineReport
from privfed.engines.job import RunArtifacts, write_artifacts
from privfed.engines.latent.config import PipelineConfig
from privfed.engines.latent.job import run_pipeline
from privfed.engines.latent.report import PipelineResult
from privfed.engines.model_card import (
    ModelCard,
    ModelCardDeclarations,
    build_model_card,
)
from privfed.errors import ArtifactIntegrityError, ParameterError, ParameterTypeError

LATENT_TINY: dict[str, Any] = {
    "num_clients": 5,
    "samples_per_class": 23,
    "classifier_epochs": 1,
    "latent_dim": 5,
    "dropout_rate": 0.2,
    "noise_seed": 3,
    "baselines": False,
    "seed": 4,
}

FACTORY_TINY = FactoryPipelineConfig(
    scenario="dirichlet",
    num_clients=4,
    synthetic_per_class=7,
    classifier_epochs=1,
    fedavg_rounds=1,
    centralized=False,
    seed=2,
)

DECLARED: dict[str, str] = {
    "model_name": "digits-synthetic-v1",
    "dataset_name": "sklearn digits (8x8 handwritten)",
    "intended_use": "benchmarking federated synthetic-data pipelines",
    "out_of_scope_uses": "any decision about a person",
    "limitations": "tiny configuration; accuracy is near chance",
    "contact": "privacy@example.org",
    "owner": "Example Lab",
}

#: The section each declaration appears in.
_DECLARED_SECTION = {
    "model_name": "model",
    "owner": "model",
    "contact": "model",
    "dataset_name": "data",
    "intended_use": "use",
    "out_of_scope_uses": "use",
    "limitations": "use",
}

SECTIONS_FULL = (
    "model",
    "federation",
    "privacy",
    "data",
    "utility",
    "compute",
    "use",
    "unlearning",
)


# -- scanning helpers -------------------------------------------------------------------


_HEX = re.compile(r"\b[0-9a-f]{64}\b")
# A number not inside a word ("SHA-256", "ledger_sha256", "Top-1" are names).
_NUMBER = re.compile(r"(?<![\w.\-])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
#: The release's noisy counts: a DP output may equal an exact count by chance.
_NOISY_LABEL = "Noisy class counts"


def _card_numbers(run_dir: Path) -> set[float]:
    """Numbers in model_card.json (its field values) and model_card.md, noisy counts aside."""
    card = json.loads((run_dir / f"{_stem(run_dir)}.json").read_text())
    values: list[Any] = [
        f["value"]
        for key, section in card["sections"].items()
        for name, f in section["fields"].items()
        if (key, name) != ("data", "class_counts") or not isinstance(f["value"], list)
    ]
    found = json_numbers(values) | _text_numbers(" ".join(_strings(values)))
    markdown = (run_dir / f"{_stem(run_dir)}.md").read_text(encoding="utf-8")
    lines = [line for line in markdown.splitlines() if not line.startswith(f"| {_NOISY_LABEL}")]
    return found | _text_numbers("\n".join(lines))


def _strings(data: Any) -> list[str]:
    """Every string in a JSON document."""
    if isinstance(data, dict):
        return [s for value in data.values() for s in _strings(value)]
    if isinstance(data, list):
        return [s for value in data for s in _strings(value)]
    return [data] if isinstance(data, str) else []


def _text_numbers(text: str) -> set[float]:
    """Numbers written in prose (digests aside)."""
    return {float(m) for m in _NUMBER.findall(_HEX.sub("", text))}


def _release_numbers(run_dir: Path) -> set[float]:
    """Numbers the release files already publish, and class ids."""
    release = json.loads((run_dir / "release.json").read_text())
    ledger_file = run_dir / "ledger.json"
    found = json_numbers(release) | {float(c) for c in range(0, 11)}
    # The provenance's strings (time, run id, command) are published in the release too.
    found |= _text_numbers(" ".join(_strings(release.get("provenance") or {})))
    if ledger_file.exists():
        found |= json_numbers(json.loads(ledger_file.read_text()))
    with np.load(run_dir / "synthetic.npz") as synthetic:
        found |= {float(n) for n in synthetic["images"].shape} | {float(synthetic["labels"].size)}
    return found


def _assert_card_has_no_private_number(run_dir: Path, private: dict[str, list[int]]) -> None:
    shown, published = _card_numbers(run_dir), _release_numbers(run_dir)
    leaks = {
        name: sorted(v for v in values if float(v) in shown and float(v) not in published)
        for name, values in private.items()
    }
    assert not any(leaks.values()), f"private numbers in the model card: {leaks}"


def _factory_private(report: FactoryPipelineReport) -> dict[str, list[int]]:
    return {
        "cell counts": [v for row in report.class_counts for v in row if v > 1],
        "client sizes": [sum(col) for col in zip(*report.class_counts, strict=True)],
        "factories": [report.num_factories],
    }


# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module", params=[Adjacency.REPLACE_ONE, Adjacency.ADD_REMOVE])
def latent_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[PipelineResult, Path, Path]:
    """A tiny latent run written in full (with declarations) and release-only."""
    result = run_pipeline(PipelineConfig(adjacency=request.param, **LATENT_TINY))
    full, release = tmp_path_factory.mktemp("full"), tmp_path_factory.mktemp("release")
    result.write(full, declarations=ModelCardDeclarations.from_dict(DECLARED))
    result.write(release, release_only=True)
    return result, full, release


@pytest.fixture(scope="module")
def factory_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[FactoryPipelineReport, Path, Path]:
    report = run_factory_pipeline(FACTORY_TINY)
    full, release = tmp_path_factory.mktemp("ffull"), tmp_path_factory.mktemp("frelease")
    report.write(full)
    report.write(release, release_only=True)
    return report, full, release


def _stem(run_dir: Path) -> str:
    """The card holding what the run computed: a full run's evaluation card, else the card."""
    return "evaluation_card" if (run_dir / "evaluation_card.json").exists() else "model_card"


def _load(run_dir: Path) -> dict[str, Any]:
    card: dict[str, Any] = json.loads((run_dir / f"{_stem(run_dir)}.json").read_text())
    return card


def _fields(card: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (section, name): f
        for section, body in card["sections"].items()
        for name, f in body["fields"].items()
    }


def _lookup(document: Any, path: str) -> Any:
    for part in path.split("."):
        assert isinstance(document, dict) and part in document, path
        document = document[part]
    return document


#: A source naming one value of one document, ``file.json:dotted.path``.
_PLAIN_SOURCE = re.compile(r"^(release|evaluation)\.json:([\w.\-]+)$")


def _check_traced_fields(run_dir: Path, declarations: dict[str, str] | None = None) -> int:
    """Every field whose source names one value equals that value; returns how many."""
    card = _load(run_dir)
    documents = {"release": json.loads((run_dir / "release.json").read_text())}
    if (run_dir / "evaluation.json").exists():
        documents["evaluation"] = json.loads((run_dir / "evaluation.json").read_text())
    checked = 0
    for (section, name), f in _fields(card).items():
        assert set(f) == {"value", "status", "source"}, (section, name)
        assert f["status"] in ("verified", "declared", "not declared", "evaluation")
        # A declaration left empty says so in the JSON too (value null).
        assert (f["status"] == "not declared") == (
            f["source"].startswith("model-card config:") and f["value"] is None
        )
        if f["status"] in ("declared", "not declared"):
            assert f["source"].startswith(f"model-card config: {name}")
            assert f["value"] == (declarations or {}).get(name)
            checked += 1
            continue
        match = _PLAIN_SOURCE.match(f["source"])
        if match is None:
            continue
        document, path = match.groups()
        assert (f["status"] == "evaluation") == (document == "evaluation"), (section, name)
        raw = _lookup(documents[document], path)
        # Either the value itself, or a sentence that states it (adjacency, counts).
        assert f["value"] == raw or (isinstance(raw, str) and raw in str(f["value"])), (
            section,
            name,
            f["value"],
            raw,
        )
        checked += 1
    return checked


# -- the latent engine ----------------------------------------------------------------------


def test_latent_card_fields_trace_to_the_run(latent_run: Any) -> None:
    result, full, release_dir = latent_run
    assert _check_traced_fields(full, DECLARED) >= 35
    assert _check_traced_fields(release_dir) >= 25
    card = _fields(_load(full))
    release = json.loads((full / "release.json").read_text())
    evaluation = json.loads((full / "evaluation.json").read_text())
    # The digest is of the ledger's canonical JSON (the file adds indentation and annotations).
    canonical = PrivacyLedger.from_json((full / "ledger.json").read_text()).to_json()
    ledger_bytes = canonical.encode()
    digest = card[("privacy", "ledger_sha256")]
    assert digest["value"] == hashlib.sha256(ledger_bytes).hexdigest()
    assert digest["value"] == release["dp"]["ledger_sha256"] and digest["status"] == "verified"
    assert card[("privacy", "ledger_releases")]["value"] == len(
        json.loads(ledger_bytes)["releases"]
    )
    assert card[("privacy", "epsilon")]["value"] == result.report.epsilon
    assert card[("privacy", "delta")]["value"] == result.report.delta
    assert card[("federation", "secagg_threshold")]["value"] == result.report.secagg_threshold
    assert card[("federation", "rounds")]["value"] == 1
    assert card[("federation", "noise_model")]["value"] == (
        "central (server adds noise once after unmasking)"
    )
    assert "semi-honest" in card[("federation", "aggregation")]["value"]
    assert card[("federation", "partition")]["value"] == "dirichlet"  # the scheme's name only
    with np.load(full / "synthetic.npz") as synthetic:
        assert card[("data", "classes")]["value"] == np.unique(synthetic["labels"]).size
    # The audit's bound beside the claim, marked evaluation.
    attacks = evaluation["audit"]["attacks"]
    bound = card[("privacy", "audit_epsilon_lower_bound")]
    assert bound["status"] == "evaluation"
    assert bound["value"] == max(a["epsilon_lower_bound"] for a in attacks.values())
    assert card[("privacy", "audit_mu_lower_bound")]["value"] == max(
        a["mu_lower_bound"] for a in attacks.values()
    )
    assert card[("privacy", "audit_claim")]["value"] == {
        "epsilon": evaluation["audit"]["claimed"]["game_epsilon"],
        "mu": evaluation["audit"]["claimed"]["game_mu"],
    }
    assert card[("privacy", "audit_exceeds_claim")]["value"] is any(
        a["exceeds_claim"] for a in attacks.values()
    )
    assert card[("utility", "accuracy_synthetic")]["value"] == result.report.accuracy_synthetic
    assert card[("utility", "per_class")]["value"].startswith("overall only")
    assert card[("compute", "seconds")]["value"] == evaluation["seconds"]
    assert card[("compute", "seconds_total")]["value"] == pytest.approx(
        sum(evaluation["seconds"].values()), abs=1e-4
    )
    assert card[("compute", "payload_bytes_per_client")]["value"] == (
        result.report.payload_bytes_per_client
    )
    assert "new privacy cost" in card[("unlearning", "unlearning")]["value"]


def test_latent_class_counts_follow_the_adjacency(latent_run: Any) -> None:
    result, full, release_dir = latent_run
    for run_dir in (full, release_dir):
        counts = _fields(_load(run_dir))[("data", "class_counts")]
        assert counts["status"] == "verified"
        if result.report.config["adjacency"] == "add-remove":
            assert counts["value"] == [float(c) for c in result.release.counts]
            assert counts["source"] == "release.json:dp.noisy_class_counts"
        else:
            assert "public by assumption" in counts["value"]
            assert "not published" in counts["value"]
            assert not any(str(int(c)) in counts["value"] for c in result.aggregate.counts if c > 9)


def test_latent_card_carries_no_private_number(latent_run: Any) -> None:
    result, full, release_dir = latent_run
    private = latent_private_numbers(result, empty_class_flags=False)
    assert private["totals"] and private["client sizes"]  # the scan has something to find
    _assert_card_has_no_private_number(full, private)
    _assert_card_has_no_private_number(release_dir, private)


def test_the_scan_catches_a_leak_in_either_file(latent_run: Any, tmp_path: Path) -> None:
    result, _, release_dir = latent_run
    for path in release_dir.iterdir():
        shutil.copy(path, tmp_path / path.name)
    private = latent_private_numbers(result, empty_class_flags=False)
    _assert_card_has_no_private_number(tmp_path, private)  # the copy is clean
    total = result.report.records_aggregated
    leaky = build_model_card(
        result.artifacts(release_only=True),
        ModelCardDeclarations(limitations=f"trained on {total} records"),
    )
    clean_json = (release_dir / "model_card.json").read_text(encoding="utf-8")
    clean_md = (release_dir / "model_card.md").read_text(encoding="utf-8")
    for card_json, card_md in ((leaky.to_json(), clean_md), (clean_json, leaky.to_markdown())):
        (tmp_path / "model_card.json").write_text(card_json, encoding="utf-8")
        (tmp_path / "model_card.md").write_text(card_md, encoding="utf-8")
        with pytest.raises(AssertionError, match="private numbers in the model card"):
            _assert_card_has_no_private_number(tmp_path, private)


def test_release_only_card_holds_release_facts_only(latent_run: Any) -> None:
    _, _, release_dir = latent_run
    card = _load(release_dir)
    assert card["contains_evaluation"] is False
    assert "MODEL CARD OF THE RELEASE" in card["notice"]
    assert "utility" not in card["sections"]
    assert {f["status"] for f in _fields(card).values()} <= {"verified", "declared", "not declared"}
    omitted = {o["what"]: o["reason"] for o in card["omitted"]}
    assert {"utility (held-out real data)", "privacy: empirical audit"} <= set(omitted)
    assert any(what.startswith("compute:") for what in omitted)
    assert all("release-only run" in reason for reason in omitted.values())
    # Every number in it is one the release files already publish (the release itself
    # is scanned for private numbers in tests/engines/test_job.py).
    values = [f["value"] for f in _fields(card).values()]
    assert json_numbers(values) <= _release_numbers(release_dir)
    markdown = (release_dir / "model_card.md").read_text(encoding="utf-8")
    assert "evaluation |" not in markdown  # no row has status evaluation
    assert "release-only run" in markdown


def test_full_card_says_it_holds_evaluation_fields(latent_run: Any) -> None:
    _, full, _ = latent_run
    card = _load(full)
    assert card["contains_evaluation"] is True
    assert "EVALUATION FIELDS" in card["notice"]
    assert card["omitted"] == []
    assert tuple(card["sections"]) == SECTIONS_FULL
    statuses = {f["status"] for f in _fields(card).values()}
    assert statuses == {"verified", "declared", "evaluation"}
    for name, value in DECLARED.items():
        f = card["sections"][_DECLARED_SECTION[name]]["fields"][name]
        assert f == {"value": value, "status": "declared", "source": f"model-card config: {name}"}
    assert card["title"] == DECLARED["model_name"]


def test_markdown_renders_every_section_and_field(latent_run: Any) -> None:
    result, full, release_dir = latent_run
    for run_dir in (full, release_dir):
        artifacts = result.artifacts(release_only=run_dir == release_dir)
        declared = ModelCardDeclarations.from_dict(DECLARED) if run_dir == full else None
        card = build_model_card(artifacts, declared)
        markdown = (run_dir / f"{_stem(run_dir)}.md").read_text(encoding="utf-8")
        assert markdown == card.to_markdown()
        assert json.loads((run_dir / f"{_stem(run_dir)}.json").read_text()) == card.to_dict()
        assert markdown.startswith(f"# Federated model card: {card.title}")
        for section in card.sections:
            assert f"\n## {section.title}\n" in markdown
            for f in section.fields:
                assert f"| {f.label} |" in markdown
                # A declaration the operator did not make is not shown as declared.
                status = "not declared" if f.status == "declared" and f.value is None else f.status
                assert f"| {status} |" in markdown
        for omission in card.omitted:
            assert omission.what in markdown
        assert "\n## Omitted\n" in markdown
    text = (full / "evaluation_card.md").read_text(encoding="utf-8")
    assert DECLARED["contact"] in text and "not declared" not in text
    assert "not declared" in (release_dir / "model_card.md").read_text(encoding="utf-8")


def test_release_card_of_a_full_run_without_rerunning(latent_run: Any) -> None:
    result, _, release_dir = latent_run
    card = build_model_card(result.artifacts(), include_evaluation=False)
    reference = build_model_card(result.artifacts(release_only=True))
    assert not card.contains_evaluation
    assert [s.key for s in card.sections] == [s.key for s in reference.sections]
    assert card.to_dict()["sections"] == reference.to_dict()["sections"]
    assert all("include_evaluation=False" in o.reason for o in card.omitted)
    assert (release_dir / "model_card.md").read_text(encoding="utf-8") == reference.to_markdown()


def test_a_ledger_that_does_not_match_the_release_is_refused(
    latent_run: Any, tmp_path: Path
) -> None:
    result, _, _ = latent_run
    artifacts = result.artifacts()
    release = json.loads(json.dumps(dict(artifacts.release)))
    release["dp"]["ledger_sha256"] = "0" * 64
    tampered = dataclasses.replace(artifacts, release=release)
    with pytest.raises(ArtifactIntegrityError, match=r"ledger\.json"):
        build_model_card(tampered)
    target = tmp_path / "run"
    with pytest.raises(ArtifactIntegrityError):
        write_artifacts(target, tampered)
    assert not target.exists()  # the card is built before anything is written


# -- the factory engine ----------------------------------------------------------------------


@pytest.mark.slow
def test_factory_card_fields_trace_to_the_run(factory_run: Any) -> None:
    report, full, release_dir = factory_run
    assert _check_traced_fields(full) >= 25
    assert _check_traced_fields(release_dir) >= 15
    card = _fields(_load(full))
    evaluation = json.loads((full / "evaluation.json").read_text())
    assert card[("privacy", "guarantee")]["value"] == "no differential privacy"
    assert "no differential privacy" in card[("federation", "noise_model")]["value"]
    assert card[("federation", "rounds")]["value"] == 1
    assert card[("federation", "partition")]["value"] == "dirichlet"
    assert card[("utility", "accuracy_synthetic")]["value"] == report.factory_accuracy
    assert card[("utility", "accuracy_fedavg")]["value"] == report.fedavg_accuracy
    summary = evaluation["audit"]["summary"]
    assert card[("privacy", "audit_epsilon_lower_bound")]["value"] == max(
        s["max_epsilon_lower_bound"] for s in summary.values()
    )
    assert card[("privacy", "audit_claim")]["value"] == "no claim: no differential privacy"
    assert "remove_client" in card[("unlearning", "unlearning")]["value"]
    assert "UnlearningCertificate" in card[("unlearning", "certificate")]["value"]
    markdown = (full / "evaluation_card.md").read_text(encoding="utf-8")
    assert "| Guarantee | no differential privacy | verified |" in markdown
    release_markdown = (release_dir / "model_card.md").read_text(encoding="utf-8")
    assert "no differential privacy" in release_markdown
    assert _load(release_dir)["contains_evaluation"] is False


def test_factory_card_carries_no_private_number(factory_run: Any) -> None:
    report, full, release_dir = factory_run
    private = _factory_private(report)
    _assert_card_has_no_private_number(full, private)
    # The bytes shipped are derived from private data: evaluation only.
    _assert_card_has_no_private_number(
        release_dir, {**private, "bytes": [round(report.factory_bytes_per_client)]}
    )
    assert ("privacy", "ledger_releases") not in _fields(_load(full))


def test_factory_unlearning_is_what_the_card_says(factory_run: Any) -> None:
    report, _, _ = factory_run
    matrix = report.matrix
    client = matrix.clients[0]
    certificate = matrix.remove_client(client)
    assert isinstance(certificate, UnlearningCertificate)
    assert matrix.verify(certificate)
    assert "downstream-classifier" in certificate.retrain
    assert all(cell.client_id == client for cell in certificate.removed_cells)


def test_factory_card_with_dp_states_the_guarantee(factory_run: Any) -> None:
    report, _, _ = factory_run
    ledger = PrivacyLedger.from_json(
        json.dumps(
            {
                "format": "privfed.dp.ledger",
                "version": 2,
                "budget_epsilon": None,
                "budget_delta": None,
                "releases": [
                    {
                        "adjacency": "replace-one",
                        "dimension": 4,
                        "l2_sensitivity": 1.0,
                        "name": "factory class=0 client=1",
                        "noise_std": 2.0,
                        "partition": {"label": "class=0/client=1", "scheme": "cell"},
                        "sampler": "chacha20-rounded-gaussian",
                        "seeded": False,
                        "type": "gaussian",
                    }
                ],
            }
        )
    )
    with_dp = dataclasses.replace(report, ledger=ledger)
    artifacts = with_dp.artifacts(release_only=True)
    card = build_model_card(artifacts)
    release = artifacts.release
    assert card.field("privacy", "epsilon").value == release["dp"]["epsilon"]
    assert card.field("privacy", "epsilon").source == "release.json:dp.epsilon"
    assert (
        card.field("privacy", "ledger_sha256").value
        == hashlib.sha256(ledger.to_json().encode()).hexdigest()
    )
    assert "replace-one" in card.field("privacy", "adjacency").value
    assert card.field("federation", "noise_model").value.startswith("local: DP-SGD")
    with pytest.raises(KeyError):
        card.field("privacy", "guarantee")


# -- declarations ----------------------------------------------------------------------------


def test_declarations_round_trip(tmp_path: Path) -> None:
    declared = ModelCardDeclarations.from_dict(DECLARED)
    assert declared.to_dict() == DECLARED
    assert ModelCardDeclarations.from_dict(declared.to_dict()) == declared
    as_json = tmp_path / "card.json"
    as_json.write_text(json.dumps(DECLARED), encoding="utf-8")
    assert ModelCardDeclarations.from_file(as_json) == declared
    as_toml = tmp_path / "card.toml"
    as_toml.write_text(
        "\n".join(f"{k} = {json.dumps(v)}" for k, v in DECLARED.items()), encoding="utf-8"
    )
    assert ModelCardDeclarations.from_file(as_toml) == declared
    partial = ModelCardDeclarations.from_dict({"owner": "  Example Lab \n"})
    assert partial.owner == "Example Lab"  # surrounding whitespace stripped
    assert partial.to_dict() == {k: ("Example Lab" if k == "owner" else None) for k in DECLARED}
    assert ModelCardDeclarations() == ModelCardDeclarations.from_dict({})


@pytest.mark.parametrize(
    ("data", "error", "match"),
    [
        ({"model_nmae": "x"}, ParameterError, "model_nmae"),
        ({"owner": 3}, ParameterTypeError, "owner"),
        ({"owner": "   "}, ParameterError, "owner"),
        ({"contact": "x" * 4001}, ParameterError, "contact"),
        ({"limitations": ["a", "b"]}, ParameterTypeError, "limitations"),
        (["owner"], ParameterTypeError, "declarations"),
    ],
)
def test_bad_declarations_are_refused(data: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ModelCardDeclarations.from_dict(data)


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        (None, "no such file"),
        ("{not json", "not valid JSON"),
        ("[" * 100_000, "not valid JSON"),  # past the parser's depth
        ('{"owner": ' + "1" * 5_000 + "}", "not valid JSON"),  # past the digit limit
        ('["owner"]', "not one table"),
        ('{"owner": 1}', "owner"),
        ('{"colour": "blue"}', "colour"),
    ],
)
def test_bad_declaration_files_are_refused(tmp_path: Path, text: str | None, detail: str) -> None:
    path = tmp_path / "card.json"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(ParameterError, match=detail) as info:
        ModelCardDeclarations.from_file(path)
    assert info.value.parameter == "model_card_config"
    assert "\n" not in str(info.value)


def test_run_artifacts_refuse_bad_declarations(latent_run: Any) -> None:
    result, _, _ = latent_run
    artifacts = result.artifacts(release_only=True)
    with pytest.raises(ParameterTypeError, match="declarations"):
        dataclasses.replace(artifacts, declarations={"owner": "x"})
    with pytest.raises(ParameterTypeError, match="artifacts"):
        build_model_card(dict(artifacts.release))  # type: ignore[arg-type]
    with pytest.raises(ParameterTypeError, match="declarations"):
        build_model_card(artifacts, "owner")  # type: ignore[arg-type]
    assert isinstance(RunArtifacts(release=artifacts.release).release, dict)


def test_a_release_of_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ParameterError, match="engine"):
        build_model_card(RunArtifacts(release={"engine": "other"}))
    card = ModelCard(engine="latent", title="t", contains_evaluation=False, sections=())
    assert "Nothing: every section is filled." in card.to_markdown()


def test_factory_release_notice_agrees_with_its_limitations(factory_run: Any) -> None:
    # The notice once said "No number in it is computed from private data without noise"
    # above dp.limitations saying the cell set and quotas are (issue #27).
    _, full, _ = factory_run
    release = json.loads((full / "release.json").read_text())
    assert "limitations" in release["dp"]
    assert "without noise" not in release["notice"] or "Not covered" in release["notice"]
    assert "No number in it is computed from private data" not in release["notice"]
    if release["dp"].get("guarantee", "x") is None:
        assert "WITHOUT DIFFERENTIAL PRIVACY" in release["notice"]
