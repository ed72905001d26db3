"""Filling the model card from a run's artefacts: :func:`build_model_card`.

Each section reads ``release.json``, ``ledger.json`` and (unless left out)
``evaluation.json`` through one reader that records every value's source;
what the card leaves out is listed with its reason.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

import numpy as np

from privfed._checks import check_bool
from privfed.engines.artifacts import (
    EVALUATION_FILENAME,
    LEDGER_FILENAME,
    RELEASE_FILENAME,
    SYNTHETIC_FILENAME,
    RunArtifacts,
)
from privfed.engines.model_card.card import CardField, CardSection, ModelCard, Omission
from privfed.engines.model_card.declarations import ModelCardDeclarations
from privfed.errors import ArtifactIntegrityError, ParameterError, ParameterTypeError

__all__ = ["build_model_card"]

_OVERALL_ONLY: Final = "overall only: this engine does not compute per-class accuracy"
_EVALUATION_OMITTED: Final = (
    "release-only run: evaluation.json was not written; these figures are computed from "
    "private data without noise and are not part of the release"
)
_NOT_REQUESTED: Final = (
    "evaluation fields left out on request (include_evaluation=False): this card describes "
    "the release alone"
)


# -- reading the artefacts ---------------------------------------------------------------

_MISSING: Final = object()


def _get(document: Mapping[str, Any] | None, path: str) -> Any:
    node: Any = document
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


class _Reader:
    """Builds fields from the run's documents, recording each value's source."""

    def __init__(self, artifacts: RunArtifacts, include_evaluation: bool) -> None:
        self.release = artifacts.release
        self.evaluation = artifacts.evaluation if include_evaluation else None
        self.engine = str(self.release.get("engine", "unknown"))

    def release_field(self, key: str, label: str, path: str, default: Any = None) -> CardField:
        value = _get(self.release, path)
        return CardField(
            key,
            label,
            default if value is _MISSING else value,
            "verified",
            f"{RELEASE_FILENAME}:{path}",
        )

    def release_value(self, path: str, default: Any = None) -> Any:
        value = _get(self.release, path)
        return default if value is _MISSING else value

    def evaluation_value(self, path: str, default: Any = None) -> Any:
        value = _get(self.evaluation, path)
        return default if value is _MISSING else value

    def evaluation_field(self, key: str, label: str, path: str) -> CardField:
        return CardField(
            key, label, self.evaluation_value(path), "evaluation", f"{EVALUATION_FILENAME}:{path}"
        )

    def engine_fact(self, key: str, label: str, value: Any) -> CardField:
        return CardField(
            key, label, value, "verified", f"{RELEASE_FILENAME}:engine ({self.engine} engine)"
        )


def _declared(declarations: ModelCardDeclarations, key: str, label: str) -> CardField:
    value = getattr(declarations, key)
    source = f"model-card config: {key}" + ("" if value is not None else " (not declared)")
    return CardField(key, label, value, "declared", source)


def _ledger_fields(artifacts: RunArtifacts, reader: _Reader) -> list[CardField]:
    """The ledger's digest (checked against the release), entries and budget."""
    if artifacts.ledger is None:
        return [
            CardField(
                "ledger",
                "Privacy ledger",
                "none: the run made no DP release",
                "verified",
                f"{RELEASE_FILENAME}:dp (no ledger_sha256)",
            )
        ]
    text = artifacts.ledger.to_json()
    digest = hashlib.sha256(text.encode()).hexdigest()
    claimed = reader.release_value("dp.ledger_sha256")
    if claimed is not None and claimed != digest:
        raise ArtifactIntegrityError(
            LEDGER_FILENAME, "its SHA-256 differs from release.json:dp.ledger_sha256"
        )
    document = json.loads(text)
    source = (
        f"{LEDGER_FILENAME} (SHA-256 of the ledger's canonical JSON, PrivacyLedger.to_json; "
        f"equals {RELEASE_FILENAME}:dp.ledger_sha256)"
    )
    budget = {
        "epsilon": document.get("budget_epsilon"),
        "delta": document.get("budget_delta"),
    }
    rows = [
        CardField("ledger_sha256", "Ledger digest (SHA-256)", digest, "verified", source),
        CardField(
            "ledger_budget",
            "Ledger budget",
            budget if any(v is not None for v in budget.values()) else "none set",
            "verified",
            f"{LEDGER_FILENAME}:budget_epsilon, budget_delta",
        ),
    ]
    if reader.engine == "latent":
        # One entry per class (public).  The factory engine's entries are one per
        # trained factory, a number derived from private counts: not restated here.
        rows.insert(
            1,
            CardField(
                "ledger_releases",
                "Ledger entries (one DP release per class)",
                len(document.get("releases", [])),
                "verified",
                f"{LEDGER_FILENAME}:releases",
            ),
        )
    return rows


# -- the sections -----------------------------------------------------------------------------


def _model_section(reader: _Reader, declarations: ModelCardDeclarations) -> CardSection:
    config = "public.config"
    rows = [
        _declared(declarations, "model_name", "Model / release name"),
        _declared(declarations, "owner", "Owner"),
        _declared(declarations, "contact", "Contact"),
        reader.release_field("engine", "Engine", "engine"),
    ]
    if reader.engine == "latent":
        rows.append(
            reader.release_field("codec", "Codec (fitted on public data)", f"{config}.codec")
        )
        rows.append(reader.release_field("latent_dim", "Latent dimension", "public.latent_dim"))
        rows.append(reader.release_field("clip_norm", "Clip norm R", "public.clip_norm"))
    else:
        rows.append(reader.release_field("factory", "Factory kind", f"{config}.factory"))
        kind = reader.release_value(f"{config}.factory")
        if kind in ("gaussian", "mixture"):
            rows.append(
                reader.release_field("gaussian_basis", "Latent basis", f"{config}.gaussian_basis")
            )
            rows.append(
                reader.release_field("latent_dim", "Latent dimension", f"{config}.latent_dim")
            )
        if kind == "mixture":
            rows.append(
                reader.release_field(
                    "mixture_components",
                    "Most mixture components per cell (public anchors)",
                    f"{config}.mixture_components",
                )
            )
        rows.append(
            reader.release_field(
                "classifier",
                "Downstream classifier (the centralized baseline trains the same, same epochs)",
                f"{config}.classifier",
                "cnn",
            )
        )
        rows.append(
            reader.release_field(
                "synthetic_per_class", "Synthetic images per class", f"{config}.synthetic_per_class"
            )
        )
    return CardSection("model", "Model", tuple(rows))


def _federation_section(reader: _Reader) -> CardSection:
    config = "public.config"
    if reader.engine == "latent":
        rows = [
            reader.release_field("num_clients", "Clients", "public.num_clients"),
            reader.release_field("partition", "Partition scheme", f"{config}.partition"),
            reader.engine_fact(
                "aggregation",
                "Aggregation",
                (
                    "secure aggregation (the double masking of Bonawitz et al., complete graph); "
                    "active model: signed keys against an identity registry and the "
                    "ConsistencyCheck round, so a server that deviates from the protocol and "
                    "colludes with at most assumed_corrupted clients learns only the total of "
                    "one signed survivor set"
                    if reader.release_value("public.secagg_mode") == "active"
                    else "secure aggregation (the double masking of Bonawitz et al., complete "
                    "graph); semi-honest model: the server and colluding clients below the "
                    "threshold follow the protocol and learn only the survivors' total"
                ),
            ),
            reader.release_field(
                "secagg_threshold", "Secure-aggregation threshold", "public.secagg_threshold"
            ),
            reader.release_field(
                "secagg_mode", "Secure-aggregation mode", "public.secagg_mode", "semi-honest"
            ),
            reader.release_field(
                "scripted_dropouts",
                "Scripted dropouts (stage: 0-based client ids)",
                "public.dropped_clients",
            ),
            reader.engine_fact("rounds", "Rounds", 1),
            (
                reader.engine_fact(
                    "noise_model", "Noise model", "central (server adds noise once after unmasking)"
                )
                if reader.release_value("dp.distributed") is None
                else reader.release_field("noise_model", "Noise model", "dp.noise_model")
            ),
            *(
                []
                if reader.release_value("dp.distributed") is None
                else [reader.release_field("noise_trust", "Noise trust assumption", "dp.trust")]
            ),
            reader.release_field("noise_placement", "Noise placement", f"{config}.placement"),
        ]
        note = "One secure-aggregation round; the partition is named, its sizes are private."
    else:
        dp = reader.release_value("dp.epsilon") is not None
        rows = [
            reader.release_field("num_clients", "Clients", f"{config}.num_clients"),
            reader.release_field("partition", "Partition scheme", f"{config}.scenario"),
            reader.engine_fact(
                "aggregation",
                "Aggregation",
                "none: each client ships its trained factories (weights) to the server once; "
                "no secure aggregation",
            ),
            reader.engine_fact(
                "secagg_threshold",
                "Secure-aggregation threshold",
                "not applicable (no secure aggregation)",
            ),
            reader.engine_fact(
                "scripted_dropouts", "Scripted dropouts", "not applicable (no secure aggregation)"
            ),
            reader.engine_fact("rounds", "Rounds", 1),
            reader.engine_fact(
                "noise_model",
                "Noise model",
                (
                    "local: one Gaussian release of clipped latent moments inside each "
                    "client's factory fit (the server adds none)"
                    if str(reader.release_value("dp.mechanism", "")).startswith("Gaussian")
                    else "local: DP-SGD inside each client's factory training "
                    "(the server adds none)"
                )
                if dp
                else "none: no differential privacy (factories trained without DP-SGD)",
            ),
        ]
        note = (
            "One-shot federation; the FedAvg run in the utility section is a baseline on the "
            "same split, not part of the release."
        )
    return CardSection("federation", "Federation", tuple(rows), note)


_ADJACENCY_MEANING: Final = {
    "replace-one": "replace-one: neighbouring datasets differ in one record replaced by another "
    "(record counts are public)",
    "add-remove": "add-remove: neighbouring datasets differ by adding or removing one record "
    "(record counts are private)",
}


def _privacy_section(
    reader: _Reader, artifacts: RunArtifacts, omitted: list[Omission], reason: str
) -> CardSection:
    has_dp = reader.release_value("dp.epsilon") is not None
    rows: list[CardField] = []
    if not has_dp:
        rows.append(
            CardField(
                "guarantee",
                "Guarantee",
                "no differential privacy",
                "verified",
                f"{RELEASE_FILENAME}:dp.guarantee (null)",
            )
        )
        rows.append(reader.release_field("warning", "Warning", "dp.warning"))
    else:
        adjacency = reader.release_value("dp.adjacency")
        rows.extend(
            [
                reader.release_field("epsilon", "ε", "dp.epsilon"),
                reader.release_field("delta", "δ", "dp.delta"),
            ]
        )
        if reader.release_value("dp.mu") is not None:
            rows.append(reader.release_field("mu", "μ (Gaussian DP)", "dp.mu"))
        rows.append(
            CardField(
                "adjacency",
                "Adjacency",
                _ADJACENCY_MEANING.get(str(adjacency), adjacency),
                "verified",
                f"{RELEASE_FILENAME}:dp.adjacency",
            )
        )
        rows.append(
            reader.engine_fact(
                "privacy_unit", "Unit of privacy", "one record (example-level DP), not one client"
            )
        )
        rows.append(reader.release_field("mechanism", "Mechanism", "dp.mechanism"))
        rows.append(reader.release_field("accountant", "Accountant", "dp.accountant"))
        for key, label in (
            ("noise_std_sum", "Noise std of the sums"),
            ("noise_std_second_moment", "Noise std of the second moments"),
            ("noise_std_count", "Noise std of the counts (0: counts public)"),
        ):
            if reader.release_value(f"dp.{key}") is not None:
                rows.append(reader.release_field(key, label, f"dp.{key}"))
        if reader.release_value("public.config.noise_seeded") is True:
            rows.append(
                reader.release_field(
                    "noise_seeded",
                    "DP noise seeded (reproducible experiment, not for deployment)",
                    "public.config.noise_seeded",
                )
            )
    rows.extend(_ledger_fields(artifacts, reader))
    if reader.evaluation is None:
        omitted.append(Omission("privacy: empirical audit", reason))
    else:
        rows.extend(_audit_fields(reader))
    note = (
        "The claim is the ledger's; the empirical audit, when present, is an evaluation "
        "(a lower bound from membership inference, never a proof). The canary self-audit "
        "of the release code is separate: privfed audit --self-audit."
    )
    return CardSection("privacy", "Privacy", tuple(rows), note)


def _audit_fields(reader: _Reader) -> list[CardField]:
    audit = reader.evaluation_value("audit")
    source = f"{EVALUATION_FILENAME}:audit"
    if audit is None:
        return [CardField("audit", "Empirical audit", "not run", "evaluation", f"{source} (null)")]
    if not isinstance(audit, Mapping):
        return [CardField("audit", "Empirical audit", "not readable", "evaluation", source)]
    if reader.engine == "latent" and "skipped" in audit:
        # The reason states record counts: it stays in evaluation.json.
        return [
            CardField(
                "audit",
                "Empirical audit",
                f"skipped: too few records (the reason is in {EVALUATION_FILENAME})",
                "evaluation",
                f"{source}.skipped (not restated)",
            )
        ]
    if reader.engine == "latent":
        return _latent_audit_fields(audit, source)
    return _factory_audit_fields(audit, source, reader)


def _max_of(values: Iterable[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return max(numbers) if numbers else None


def _latent_audit_fields(audit: Mapping[str, Any], source: str) -> list[CardField]:
    attacks: Mapping[str, Any] = audit.get("attacks", {})
    claimed: Mapping[str, Any] = audit.get("claimed", {})
    significance = _max_of(a.get("significance") for a in attacks.values())
    best = str(audit.get("best", ""))
    best_auc = _get(attacks, f"{best}.auc") if best else _MISSING
    rows = [
        CardField(
            "audit_attacks",
            "Audit attacks",
            sorted(attacks),
            "evaluation",
            f"{source}.attacks (names)",
        ),
        CardField(
            "audit_epsilon_lower_bound",
            "Audit: largest ε lower bound"
            + ("" if significance is None else f" (each at confidence {1 - significance:g})"),
            _max_of(a.get("epsilon_lower_bound") for a in attacks.values()),
            "evaluation",
            f"{source}.attacks.*.epsilon_lower_bound",
        ),
        CardField(
            "audit_mu_lower_bound",
            "Audit: largest μ lower bound",
            _max_of(a.get("mu_lower_bound") for a in attacks.values()),
            "evaluation",
            f"{source}.attacks.*.mu_lower_bound",
        ),
        CardField(
            "audit_claim",
            "Audit: what the claim allows for the membership game",
            {"epsilon": claimed.get("game_epsilon"), "mu": claimed.get("game_mu")},
            "evaluation",
            f"{source}.claimed.game_epsilon, game_mu",
        ),
        CardField(
            "audit_exceeds_claim",
            "Audit: a bound exceeds the claim (evidence of a bug or broken assumption)",
            any(bool(a.get("exceeds_claim")) for a in attacks.values()),
            "evaluation",
            f"{source}.attacks.*.exceeds_claim",
        ),
    ]
    if isinstance(best_auc, Mapping):
        rows.append(
            CardField(
                "audit_best_auc",
                f"Audit: AUC of the strongest attack ({best}), with interval",
                {k: best_auc.get(k) for k in ("estimate", "lower", "upper")},
                "evaluation",
                f"{source}.attacks.{best}.auc",
            )
        )
        power = _audit_power(best_auc, claimed.get("game_mu"))
        if power is not None:
            rows.append(
                CardField(
                    "audit_power",
                    "Audit: what the test could detect at its sample size",
                    power,
                    "evaluation",
                    f"{source}.attacks.{best}.auc (interval width)",
                )
            )
    return rows


def _audit_power(auc: Mapping[str, Any], claimed_mu: Any) -> dict[str, Any] | None:
    """The smallest leakage the audit could have shown, from its AUC interval's width.

    The test shows leakage only when the AUC's lower bound exceeds 0.5, i.e. (the
    interval keeping its width) when the AUC exceeds about ``0.5 + (estimate - lower)``.
    The AUC of the optimal attack on a μ-GDP mechanism is ``Φ(μ/√2)``, so the smallest
    μ it could detect is about ``√2 Φ⁻¹(0.5 + (estimate - lower))`` (an approximation,
    stated as such).  When that exceeds the claim's μ, a clean audit says nothing.
    """
    from statistics import NormalDist

    values = [auc.get(k) for k in ("estimate", "lower", "upper")]
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    if len(numbers) != 3:
        return None
    estimate, lower, upper = numbers
    reach = min(0.5 + max(estimate - lower, 0.0), 1.0 - 1e-12)
    smallest = math.sqrt(2.0) * NormalDist().inv_cdf(reach)
    if isinstance(claimed_mu, int | float) and smallest > float(claimed_mu):
        verdict = (
            "too little power to mean anything: it could not detect leakage even at the "
            "claimed mu, so a clean result is no evidence"
        )
    elif isinstance(claimed_mu, int | float):
        verdict = "could detect leakage at the claimed mu"
    else:
        verdict = "no claim to compare with"
    return {
        "auc_interval_width": round(upper - lower, 4),
        "smallest_detectable_mu_approx": round(smallest, 4),
        "verdict": verdict,
    }


def _factory_audit_power(summary: Mapping[str, Any], claim_epsilon: Any) -> Any:
    """The most ε a perfect attack could have shown on the audited factories, and a verdict.

    When that is below the claimed ε, no outcome of the test could contradict
    the claim: a clean audit is then no evidence (too little power).
    """
    reach = _max_of(s.get("largest_possible_epsilon_lower_bound") for s in summary.values())
    if not isinstance(reach, int | float):
        return None
    if not isinstance(claim_epsilon, int | float):
        verdict = "no claim to compare with (no differential privacy)"
    elif reach < float(claim_epsilon):
        verdict = (
            "too little power to mean anything: even a perfect attack could not show the "
            "claimed epsilon with this few records, so a clean result is no evidence"
        )
    else:
        verdict = "could show leakage at the claimed epsilon"
    return {"largest_possible_epsilon_lower_bound": round(float(reach), 4), "verdict": verdict}


def _factory_audit_fields(
    audit: Mapping[str, Any], source: str, reader: _Reader
) -> list[CardField]:
    summary: Mapping[str, Any] = audit.get("summary") or {}
    claim_epsilon = reader.release_value("dp.epsilon")
    return [
        CardField(
            "audit_attacks",
            "Audit attacks",
            sorted(summary),
            "evaluation",
            f"{source}.summary (names)",
        ),
        CardField(
            "audit_epsilon_lower_bound",
            "Audit: largest ε lower bound over the audited factories",
            _max_of(s.get("max_epsilon_lower_bound") for s in summary.values()),
            "evaluation",
            f"{source}.summary.*.max_epsilon_lower_bound",
        ),
        CardField(
            "audit_mu_lower_bound",
            "Audit: largest μ lower bound over the audited factories",
            _max_of(s.get("max_mu_lower_bound") for s in summary.values()),
            "evaluation",
            f"{source}.summary.*.max_mu_lower_bound",
        ),
        CardField(
            "audit_claim",
            "Audit: the claim beside it",
            {"epsilon": claim_epsilon}
            if claim_epsilon is not None
            else "no claim: no differential privacy",
            "verified",
            f"{RELEASE_FILENAME}:dp.epsilon"
            if claim_epsilon is not None
            else f"{RELEASE_FILENAME}:dp.guarantee (null)",
        ),
        CardField(
            "audit_power",
            "Audit: what the test could detect at its sample size",
            _factory_audit_power(summary, claim_epsilon),
            "evaluation",
            f"{source}.summary.*.largest_possible_epsilon_lower_bound",
        ),
        CardField(
            "audit_max_auc",
            "Audit: largest AUC over the audited factories",
            _max_of(s.get("max_auc") for s in summary.values()),
            "evaluation",
            f"{source}.summary.*.max_auc",
        ),
        CardField(
            "audit_mean_auc",
            "Audit: mean AUC over the audited factories",
            _max_of(s.get("mean_auc") for s in summary.values()),
            "evaluation",
            f"{source}.summary.*.mean_auc",
        ),
    ]


def _data_section(
    reader: _Reader, artifacts: RunArtifacts, declarations: ModelCardDeclarations
) -> CardSection:
    config = "public.config"
    rows = [
        _declared(declarations, "dataset_name", "Dataset (as declared)"),
        reader.release_field("dataset", "Dataset source", f"{config}.dataset"),
    ]
    if artifacts.sample_labels is not None:
        labels = np.asarray(artifacts.sample_labels)
        rows.append(
            CardField(
                "classes",
                "Classes in the synthetic release",
                int(np.unique(labels).size),
                "verified",
                f"{SYNTHETIC_FILENAME}:labels",
            )
        )
    rows.append(
        reader.release_field(
            "public_fraction", "Public split fraction", f"{config}.public_fraction"
        )
    )
    rows.append(
        reader.release_field(
            "test_fraction", "Held-out test split fraction", f"{config}.test_fraction"
        )
    )
    if reader.engine == "latent":
        adjacency = reader.release_value("dp.adjacency")
        if adjacency == "add-remove":
            rows.append(
                reader.release_field(
                    "class_counts",
                    "Noisy class counts (DP release, add/remove)",
                    "dp.noisy_class_counts",
                )
            )
        else:
            rows.append(
                CardField(
                    "class_counts",
                    "Class counts",
                    f"not published: under {adjacency} adjacency the counts are public by "
                    "assumption, and this release does not publish them",
                    "verified",
                    f"{RELEASE_FILENAME}:dp.adjacency",
                )
            )
    else:
        rows.append(
            reader.engine_fact(
                "class_counts",
                "Class counts",
                "not published: the factory engine releases no counts (the exact per-(class, "
                "client) counts are private)",
            )
        )
    rows.append(
        reader.engine_fact(
            "client_sizes",
            "Per-client sizes",
            "not published: exact per-client sizes are private and in no file of the release",
        )
    )
    rows.append(
        reader.release_field(
            "synthetic_per_class", "Synthetic samples per class", "synthetic.samples_per_class"
        )
    )
    note = "Data are characterised at DP precision only: no exact record count appears here."
    return CardSection("data", "Data", tuple(rows), note)


#: The evaluation rows of the utility section, per engine: ``(key, label, evaluation path)``.
_UTILITY_ROWS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "latent": (
        (
            "accuracy_synthetic",
            "Accuracy: classifier trained on the DP synthetic data",
            "accuracy_synthetic",
        ),
        (
            "accuracy_real",
            "Accuracy: classifier trained on the real private data (baseline)",
            "accuracy_real",
        ),
        (
            "accuracy_nondp_synthetic",
            "Accuracy: synthetic data from the noiseless statistics (baseline, no DP)",
            "accuracy_nondp_synthetic",
        ),
    ),
    "factory": (
        (
            "accuracy_synthetic",
            "Accuracy: classifier trained on the factories' synthetic data",
            "factory_accuracy",
        ),
        ("accuracy_fedavg", "Accuracy: FedAvg on the same split (baseline)", "fedavg_accuracy"),
        (
            "accuracy_centralized",
            "Accuracy: classifier on the pooled private data (baseline)",
            "centralized_accuracy",
        ),
    ),
}

#: The evaluation rows of bytes sent in the compute section, per engine.
_BYTES_ROWS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "latent": (
        (
            "secagg_bytes_per_client",
            "Secure-aggregation bytes sent per finishing client (mean)",
            "secagg_bytes_per_client",
        ),
    ),
    "factory": (
        (
            "factory_bytes_per_client",
            "Factory weights shipped per client (bytes, mean)",
            "factory_bytes_per_client",
        ),
        (
            "fedavg_bytes_per_client",
            "FedAvg bytes per client (baseline, mean)",
            "fedavg_bytes_per_client",
        ),
    ),
}


def _evaluation_rows(
    reader: _Reader, table: dict[str, tuple[tuple[str, str, str], ...]]
) -> list[CardField]:
    """The evaluation fields ``table`` lists for the reader's engine (not latent: factory)."""
    rows = table["latent" if reader.engine == "latent" else "factory"]
    return [reader.evaluation_field(key, label, path) for key, label, path in rows]


def _utility_section(reader: _Reader) -> CardSection:
    rows = _evaluation_rows(reader, _UTILITY_ROWS)
    rows.append(
        CardField(
            "per_class",
            "Per-class accuracy",
            _OVERALL_ONLY,
            "evaluation",
            f"{EVALUATION_FILENAME} (no per-class figure)",
        )
    )
    note = (
        "Top-1 accuracy in [0, 1] on the held-out real test split, which the release never "
        "used; 'none' marks a baseline that was not run. Evaluation, not part of the release."
    )
    return CardSection("utility", "Utility (held-out real data)", tuple(rows), note)


def _compute_section(reader: _Reader, omitted: list[Omission], reason: str) -> CardSection:
    config = "public.config"
    rows = [
        reader.release_field("device", "Device", f"{config}.device"),
        _threads_field(reader),
    ]
    if reader.engine == "latent":
        rows.append(
            reader.release_field(
                "payload_bytes_per_client",
                "Statistics payload per client (bytes, before masking)",
                "public.payload_bytes_per_client",
            )
        )
    if reader.evaluation is None:
        what = "seconds per stage and bytes sent per client"
        if reader.engine == "latent":
            what = "seconds per stage and secure-aggregation bytes sent per client"
        omitted.append(Omission(f"compute: {what}", reason))
    else:
        rows.extend(_evaluation_rows(reader, _BYTES_ROWS))
        seconds = reader.evaluation_value("seconds") or {}
        rows.append(reader.evaluation_field("seconds", "Seconds per stage (wall clock)", "seconds"))
        rows.append(
            CardField(
                "seconds_total",
                "Seconds in all stages",
                round(sum(float(v) for v in seconds.values()), 4),
                "evaluation",
                f"{EVALUATION_FILENAME}:seconds (sum)",
            )
        )
    return CardSection("compute", "Compute", tuple(rows))


def _threads_field(reader: _Reader) -> CardField:
    """The CPU threads the run used: the configured number, else the number resolved."""
    configured = reader.release_value("public.config.num_threads")
    if configured is not None:
        return reader.release_field("num_threads", "CPU threads", "public.config.num_threads")
    used = reader.release_value("public.num_threads_used")
    if used is not None:
        return CardField(
            "num_threads",
            "CPU threads (chosen by the run: the idle cores)",
            used,
            "verified",
            f"{RELEASE_FILENAME}:public.num_threads_used",
        )
    return reader.release_field(
        "num_threads", "CPU threads", "public.config.num_threads", "not recorded"
    )


def _use_section(reader: _Reader, declarations: ModelCardDeclarations) -> CardSection:
    engine_limits: list[str]
    if reader.engine == "latent":
        engine_limits = [
            "secure aggregation is semi-honest only: it does not protect against a server "
            "that deviates from the protocol",
            "the guarantee covers the release (release.json, ledger.json, synthetic data); "
            "not evaluation.json, audit_inputs.npz or a card with evaluation fields",
            "per-class Gaussians in the codec's latent space: utility is bounded by the "
            "public codec and by the noise",
        ]
        if reader.release_value("public.config.noise_seeded") is True:
            engine_limits.append("the DP noise was seeded: a reproducible experiment only")
    else:
        engine_limits = [
            "no secure aggregation: the server sees every client's factories",
            "the synthetic data are sampled from the shipped factories; they carry what the "
            "factories memorised",
        ]
        if reader.release_value("dp.epsilon") is None:
            engine_limits.insert(
                0, "no differential privacy: the audit measures what the factories leak"
            )
    rows = [
        _declared(declarations, "intended_use", "Intended use"),
        _declared(declarations, "out_of_scope_uses", "Out-of-scope uses"),
        _declared(declarations, "limitations", "Limitations (declared)"),
        reader.engine_fact("engine_limitations", "Limitations (of this engine)", engine_limits),
    ]
    return CardSection("use", "Intended use and limitations", tuple(rows))


def _unlearning_section(reader: _Reader) -> CardSection:
    if reader.engine == "latent":
        rows = [
            reader.engine_fact(
                "unlearning",
                "What a removal request does",
                "no exact unlearning of a published release: the release is one noisy aggregate "
                "of every survivor's statistics and cannot remove one client's contribution. "
                "Honouring a request means re-running the round without that client: a new "
                "release with a new privacy cost in a new ledger. The earlier release stays "
                "published; its DP guarantee bounds what it reveals about any one record.",
            ),
            reader.engine_fact("certificate", "Unlearning certificate", "none (not supported)"),
        ]
    else:
        rows = [
            reader.engine_fact(
                "unlearning",
                "What a removal request does",
                "exact unlearning on the server: FactoryMatrix.remove_client(k) drops client "
                "k's column (its factories) and every synthetic sample they produced, and redraws "
                "the affected classes from the remaining factories with the same seeds. Copies "
                "already published (this run's synthetic data) must be replaced by the operator.",
            ),
            reader.engine_fact(
                "certificate",
                "Unlearning certificate",
                "privfed.engines.factory.matrix.UnlearningCertificate: SHA-256 of the removed "
                "weights, dropped and regenerated sample ids, matrix digests before and after, "
                "downstream consumers to retrain (here the downstream classifier); "
                "FactoryMatrix.verify(certificate) checks it",
            ),
        ]
    return CardSection("unlearning", "Unlearning", tuple(rows))


# -- the builder --------------------------------------------------------------------------


def build_model_card(
    artifacts: RunArtifacts,
    declarations: ModelCardDeclarations | None = None,
    *,
    include_evaluation: bool = True,
) -> ModelCard:
    """Fill the federated model card of a run from its artefacts.

    Args:
        artifacts: What the run writes (:class:`~privfed.engines.job.RunArtifacts`).
        declarations: The operator's statements; ``None`` uses
            ``artifacts.declarations`` (itself ``None``: nothing declared).
        include_evaluation: Include the evaluation fields (utility, audit,
            timings) when the artefacts have an evaluation.  ``False`` gives
            the card of the release alone.

    Returns:
        The :class:`ModelCard`; without an evaluation (or with
        ``include_evaluation=False``) it holds no evaluation field and lists
        the omitted sections.

    Raises:
        ParameterTypeError: ``artifacts`` or ``declarations`` has the wrong type.
        ParameterError: The release names no engine privfed knows.
        ArtifactIntegrityError (artifact ``ledger.json``): The ledger's digest
            differs from the one in the release.
    """
    if not isinstance(artifacts, RunArtifacts):
        raise ParameterTypeError("artifacts", "a RunArtifacts", artifacts)
    check_bool("include_evaluation", include_evaluation)
    if declarations is None:
        declarations = artifacts.declarations
    if declarations is None:
        declarations = ModelCardDeclarations()
    if not isinstance(declarations, ModelCardDeclarations):
        raise ParameterTypeError("declarations", "a ModelCardDeclarations or None", declarations)
    engine = artifacts.release.get("engine")
    if engine not in ("latent", "factory"):
        raise ParameterError("release['engine']", "'latent' or 'factory'", engine)
    reader = _Reader(artifacts, include_evaluation)
    reason = _NOT_REQUESTED if artifacts.evaluation is not None else _EVALUATION_OMITTED
    omitted: list[Omission] = []
    sections = [
        _model_section(reader, declarations),
        _federation_section(reader),
        _privacy_section(reader, artifacts, omitted, reason),
        _data_section(reader, artifacts, declarations),
    ]
    if reader.evaluation is None:
        omitted.insert(0, Omission("utility (held-out real data)", reason))
    else:
        sections.append(_utility_section(reader))
    sections.append(_compute_section(reader, omitted, reason))
    sections.append(_use_section(reader, declarations))
    sections.append(_unlearning_section(reader))
    contains = any(f.status == "evaluation" for s in sections for f in s.fields)
    title = declarations.model_name or f"{engine} engine run"
    return ModelCard(
        engine=str(engine),
        title=title,
        contains_evaluation=contains,
        sections=tuple(sections),
        omitted=tuple(omitted),
        provenance=None if artifacts.provenance is None else dict(artifacts.provenance),
    )
