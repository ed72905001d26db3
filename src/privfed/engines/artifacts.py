"""What a run writes: the artefact names, :class:`RunArtifacts` and :class:`AuditInputs`.

Part of the job contract (:mod:`privfed.engines.job`), kept in a module of its
own so that everything reading a run's outputs -- the job's writer, the model
card (:mod:`privfed.engines.model_card`), both wings and ``privfed audit`` --
imports it without importing the job, and neither wing imports the other:

* the file names of a run directory (:data:`RELEASE_FILENAMES` is the release,
  :data:`ARTIFACT_FILENAMES` everything a run may write);
* :class:`RunArtifacts` -- everything a run writes, whichever engine ran it;
* :class:`AuditInputs` and :func:`save_audit_inputs` -- the arrays of
  ``audit_inputs.npz`` (what ``privfed audit --run-dir`` reads), filled by
  either wing's audit stage.

numpy and the standard library only; :mod:`privfed.audit` loads when
:meth:`AuditInputs.run` is called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privfed._atomic import atomic_path
from privfed._records import field_dict
from privfed.errors import ParameterError, ParameterTypeError

if TYPE_CHECKING:  # pragma: no cover
    from privfed.audit import SyntheticReleaseAudit
    from privfed.dp import PrivacyLedger
    from privfed.engines.model_card.declarations import ModelCardDeclarations

__all__ = [
    "ARTIFACT_FILENAMES",
    "AUDIT_INPUTS_FILENAME",
    "AUDIT_INPUT_ARRAYS",
    "EVALUATION_CARD_JSON_FILENAME",
    "EVALUATION_CARD_MARKDOWN_FILENAME",
    "EVALUATION_FILENAME",
    "LEDGER_FILENAME",
    "MODEL_CARD_JSON_FILENAME",
    "MODEL_CARD_MARKDOWN_FILENAME",
    "RELEASE_FILENAME",
    "RELEASE_FILENAMES",
    "SAMPLES_FILENAME",
    "SYNTHETIC_FILENAME",
    "AuditInputs",
    "RunArtifacts",
    "save_audit_inputs",
]

#: Names of the artefacts in a run directory.  The release (what a deployment
#: ships) is ``release.json``, ``ledger.json``, ``samples.png`` and
#: ``synthetic.npz``; ``evaluation.json`` and ``audit_inputs.npz`` are computed
#: from private data without noise and are never part of the release.
RELEASE_FILENAME = "release.json"
EVALUATION_FILENAME = "evaluation.json"
LEDGER_FILENAME = "ledger.json"
SAMPLES_FILENAME = "samples.png"
SYNTHETIC_FILENAME = "synthetic.npz"
AUDIT_INPUTS_FILENAME = "audit_inputs.npz"
#: The federated model card (:mod:`privfed.engines.model_card`), written by every run:
#: release facts and declarations only, never an evaluation field, so the same file
#: name is safe to ship whichever kind of run wrote it (part of the release).
MODEL_CARD_JSON_FILENAME = "model_card.json"
MODEL_CARD_MARKDOWN_FILENAME = "model_card.md"
#: The card with the evaluation fields too (utility, audit, timings; marked, and it says
#: so): written by a full run beside the release card, never part of the release.
EVALUATION_CARD_JSON_FILENAME = "evaluation_card.json"
EVALUATION_CARD_MARKDOWN_FILENAME = "evaluation_card.md"
#: What earlier versions wrote (one report mixing both); removed by ``overwrite``.
LEGACY_FILENAMES = ("report.json",)
#: Every file a run may write (what ``overwrite`` replaces or removes).
ARTIFACT_FILENAMES: tuple[str, ...] = (
    RELEASE_FILENAME,
    EVALUATION_FILENAME,
    LEDGER_FILENAME,
    SAMPLES_FILENAME,
    SYNTHETIC_FILENAME,
    AUDIT_INPUTS_FILENAME,
    MODEL_CARD_JSON_FILENAME,
    MODEL_CARD_MARKDOWN_FILENAME,
    EVALUATION_CARD_JSON_FILENAME,
    EVALUATION_CARD_MARKDOWN_FILENAME,
)
#: The files of the release alone: what a release-only run writes, and the files of
#: any run directory that may be shipped (no model card among them carries an
#: evaluation field; a full run's evaluation card has names of its own).
RELEASE_FILENAMES: tuple[str, ...] = (
    RELEASE_FILENAME,
    LEDGER_FILENAME,
    SAMPLES_FILENAME,
    SYNTHETIC_FILENAME,
    MODEL_CARD_JSON_FILENAME,
    MODEL_CARD_MARKDOWN_FILENAME,
)


#: Arrays of ``audit_inputs.npz`` (the format ``privfed audit --run-dir`` reads), in
#: the order they are written (kept stable, so equal inputs give equal bytes).
AUDIT_INPUT_ARRAYS: tuple[str, ...] = (
    "member_latents",
    "nonmember_latents",
    "synthetic_latents",
    "member_labels",
    "nonmember_labels",
    "synthetic_labels",
    "reference_latents",
    "reference_labels",
    "noisy_sums",
    "counts",
    "noise_std_sum",
)


@dataclass(frozen=True, eq=False)
class RunArtifacts:
    """Everything a run writes, whichever engine ran it.

    Attributes:
        release: ``release.json``: DP outputs and public facts only (a plain,
            JSON-serialisable mapping).
        evaluation: ``evaluation.json``: what was computed from private data
            without noise (accuracies, exact counts, timings, the audit), or
            ``None`` (a release-only run).
        ledger: The run's privacy ledger (``ledger.json``), or ``None`` when the
            run made no DP release.
        sample_images: Synthetic images ``(s, C, H, W)`` in ``[0, 1]`` for
            ``samples.png`` and ``synthetic.npz``, or ``None``.
        sample_labels: Their labels ``(s,)``.
        audit_inputs: What ``privfed audit --run-dir`` reads
            (``audit_inputs.npz``), or ``None`` when no audit ran.  It holds
            real records' latents: keep it as private as the data.
        declarations: What the operator states for the model card
            (:class:`~privfed.engines.model_card.ModelCardDeclarations`), or
            ``None``: nothing declared.
        provenance: The run's provenance (:mod:`privfed.engines.provenance`),
            written into every JSON artefact and card; ``None``: a fresh one
            is made when the files are written.
        ledger_explanation: What the numbers of ``ledger.json`` mean (written
            into it under ``explanation``), or ``None``.
    """

    release: Mapping[str, Any]
    evaluation: Mapping[str, Any] | None = None
    ledger: PrivacyLedger | None = None
    sample_images: np.ndarray | None = field(default=None, repr=False)
    sample_labels: np.ndarray | None = field(default=None, repr=False)
    audit_inputs: AuditInputs | None = field(default=None, repr=False)
    declarations: ModelCardDeclarations | None = None
    provenance: Mapping[str, Any] | None = None
    ledger_explanation: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.release, Mapping):
            raise ParameterTypeError("release", "a mapping", self.release)
        if self.evaluation is not None and not isinstance(self.evaluation, Mapping):
            raise ParameterTypeError("evaluation", "a mapping or None", self.evaluation)
        if (self.sample_images is None) != (self.sample_labels is None):
            raise ParameterError(
                "sample_labels", "given together with sample_images", self.sample_labels
            )
        if self.declarations is not None:
            from privfed.engines.model_card.declarations import ModelCardDeclarations

            if not isinstance(self.declarations, ModelCardDeclarations):
                raise ParameterTypeError(
                    "declarations", "a ModelCardDeclarations or None", self.declarations
                )


@dataclass(frozen=True, eq=False)
class AuditInputs:
    """The arrays of ``audit_inputs.npz``: what the default audit reads.

    Attributes:
        member_latents: Float ``(n1, d)``: clipped, grid-quantized latents of
            the records in the release.
        nonmember_latents: Float ``(n0, d)``: the same for held-out records.
        synthetic_latents: Float ``(s, d)``: the released synthetic latents.
        member_labels / nonmember_labels / synthetic_labels: Int labels, or
            ``None`` (one pooled class).
        reference_latents / reference_labels: The attacker's population
            knowledge (public split), or ``None``.
        noisy_sums: Float ``(C, d)``: the released noisy per-class sums, in
            latent units, or ``None``.
        counts: Float ``(C,)``: the counts the attacker sees, or ``None``.
        noise_std_sum: The sums' noise std (latent units), or ``None``.

    Everything in it is either public release output or real records' latents:
    treat it (and the file) as private data.
    """

    member_latents: np.ndarray = field(repr=False)
    nonmember_latents: np.ndarray = field(repr=False)
    synthetic_latents: np.ndarray = field(repr=False)
    member_labels: np.ndarray | None = field(default=None, repr=False)
    nonmember_labels: np.ndarray | None = field(default=None, repr=False)
    synthetic_labels: np.ndarray | None = field(default=None, repr=False)
    reference_latents: np.ndarray | None = field(default=None, repr=False)
    reference_labels: np.ndarray | None = field(default=None, repr=False)
    noisy_sums: np.ndarray | None = field(default=None, repr=False)
    counts: np.ndarray | None = field(default=None, repr=False)
    noise_std_sum: float | None = None

    def __post_init__(self) -> None:
        for name in AUDIT_INPUT_ARRAYS[:3]:
            if getattr(self, name) is None:
                raise ParameterError(name, "an array", None)

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays that are present, by their ``.npz`` names."""
        out: dict[str, np.ndarray] = {}
        for name in AUDIT_INPUT_ARRAYS:
            value = getattr(self, name)
            if value is not None:
                scalar = name == "noise_std_sum"
                out[name] = np.asarray(value, dtype=np.float64) if scalar else value
        return out

    def save(self, path: str | Path) -> None:
        """Write them as an uncompressed ``.npz`` without pickled objects."""
        save_audit_inputs(path, self.arrays())

    @classmethod
    def load(cls, path: str | Path) -> AuditInputs:
        """Read ``audit_inputs.npz`` written by :meth:`save`.

        Raises:
            ParameterError: The file is missing, not an ``.npz`` archive, lacks a
                required array or has an unknown one.
        """
        file = Path(path)
        if not file.is_file():
            raise ParameterError("run_dir", f"a directory holding {file.name}", str(file))
        try:
            with np.load(file, allow_pickle=False) as data:
                arrays = {k: np.asarray(data[k]) for k in data.files}
        except (OSError, ValueError) as exc:
            raise ParameterError(
                "run_dir", f"a readable {file.name} (.npz archive)", str(file)
            ) from exc
        missing = [k for k in AUDIT_INPUT_ARRAYS[:3] if k not in arrays]
        if missing:
            raise ParameterError("run_dir", f"a {file.name} with {AUDIT_INPUT_ARRAYS[:3]}", missing)
        unknown = sorted(set(arrays) - set(AUDIT_INPUT_ARRAYS))
        if unknown:
            raise ParameterError(
                "run_dir", f"a {file.name} with arrays among {AUDIT_INPUT_ARRAYS}", unknown
            )
        values: dict[str, Any] = dict(arrays)
        if "noise_std_sum" in values:
            values["noise_std_sum"] = float(values["noise_std_sum"])
        return cls(**values)

    def run(
        self,
        *,
        delta: float,
        seed: int | None,
        significance: float = 0.05,
        confidence: float = 0.95,
        fprs: tuple[float, ...] | None = None,
    ) -> SyntheticReleaseAudit:
        """Run :func:`privfed.audit.audit_synthetic_release` on these inputs."""
        from privfed.audit import audit_synthetic_release

        extra: dict[str, Any] = {} if fprs is None else {"fprs": fprs}
        # The optional inputs are keyword arguments of the same names.
        return audit_synthetic_release(
            self.member_latents,
            self.nonmember_latents,
            self.synthetic_latents,
            **field_dict(self, *AUDIT_INPUT_ARRAYS[3:]),
            delta=delta,
            significance=significance,
            confidence=confidence,
            seed=seed,
            **extra,
        )


def save_audit_inputs(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """Write the audit's inputs as an uncompressed ``.npz`` without pickled objects.

    Args:
        path: Destination file (conventionally ``AUDIT_INPUTS_FILENAME`` of
            :mod:`privfed.cli.audit` inside a run directory).
        arrays: Keys among :data:`AUDIT_INPUT_ARRAYS`, the first three
            required; latents float ``(n, d)``, labels int ``(n,)``,
            ``noisy_sums`` ``(C, d)``, ``counts`` ``(C,)``, ``noise_std_sum``
            a scalar (latent units).  Everything in it is either public
            release output or real records' latents: treat the file as
            containing private data.

    Raises:
        ParameterError: On a missing required key or an unknown key.
    """
    missing = [k for k in AUDIT_INPUT_ARRAYS[:3] if k not in arrays]
    if missing:
        raise ParameterError("arrays", f"a dict with {AUDIT_INPUT_ARRAYS[:3]}", missing)
    unknown = sorted(set(arrays) - set(AUDIT_INPUT_ARRAYS))
    if unknown:
        raise ParameterError("arrays", f"keys among {AUDIT_INPUT_ARRAYS}", unknown)
    payload: dict[str, Any] = {k: np.asarray(v) for k, v in arrays.items()}
    final = str(path) if str(path).endswith(".npz") else f"{path}.npz"  # as np.savez names it
    with atomic_path(final) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, allow_pickle=False, **payload)
