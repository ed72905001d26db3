"""The federated model card of a run: ``model_card.md`` and ``model_card.json``.

Every run of either engine writes a model card beside its release
(:func:`privfed.engines.job.write_artifacts` calls :func:`build_model_card`).
The card is filled from what the run actually wrote -- ``release.json``,
``ledger.json``, the synthetic data and, unless the run was release-only,
``evaluation.json`` -- plus a few statements the operator declares
(:class:`ModelCardDeclarations`, ``privfed run --model-card-config FILE``).

Every field carries its provenance::

    {"value": 10.0, "status": "verified", "source": "release.json:dp.epsilon"}

* ``"verified"`` -- computed by this run or its privacy ledger (read from the
  release, the ledger or the synthetic data), or a fact fixed by the engine
  that ran (its source then names the engine);
* ``"declared"`` -- supplied by the operator and not checked by privfed
  (``"not declared"``, value ``null``, where the operator left it empty);
* ``"evaluation"`` -- computed from private data without noise (accuracies on
  real records, the membership-inference audit, timings).  Not part of the
  release and not covered by its privacy guarantee.

Sections: model, federation, privacy, data, utility, compute, intended use and
limitations, unlearning.  What the card never holds: exact record totals,
per-client sizes or exact class counts.  The data section is at DP precision
only: the noisy class counts of an add/remove release, and under replace-one
a statement that counts are public by assumption and not published.

A release-only run (no ``evaluation.json``) writes a card without the
evaluation fields and lists what was omitted and why; such a card holds only
verified release facts and declarations, so it ships with the release.  The
card of a full run holds evaluation fields (marked) and is as private as
``evaluation.json``; ``build_model_card(artifacts, include_evaluation=False)``
gives its release counterpart without running again.

This module imports numpy and the standard library only (never torch).
"""

from __future__ import annotations

from privfed.engines.artifacts import MODEL_CARD_JSON_FILENAME, MODEL_CARD_MARKDOWN_FILENAME
from privfed.engines.model_card.build import build_model_card
from privfed.engines.model_card.card import CardField, CardSection, FieldStatus, ModelCard, Omission
from privfed.engines.model_card.declarations import ModelCardDeclarations

__all__ = [
    "MODEL_CARD_JSON_FILENAME",
    "MODEL_CARD_MARKDOWN_FILENAME",
    "CardField",
    "CardSection",
    "FieldStatus",
    "ModelCard",
    "ModelCardDeclarations",
    "Omission",
    "build_model_card",
]
