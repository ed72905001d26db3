"""The job contract both engines run through.

A job is a typed configuration (one frozen dataclass, the single source of its
defaults: the command line reads them from it) and a sequence of typed stage
functions that pass frozen values to each other.  The stages are public and
usable on their own: a Flower client runs a wing's client stage on its node,
a ServerApp runs the server stages.  Around them this module provides what
both wings share:

* :class:`StageClock` -- times stages and reports them through the one
  progress protocol (:mod:`privfed.progress`);
* :func:`torch_threads` -- the CPU threads torch may use during a job,
  restored afterwards (both wings set it the same way);
* :class:`RunArtifacts` and :func:`write_artifacts` -- the one
  report-and-write path: every run of either engine writes the same artefact
  set into its output directory;
* :func:`save_sample_grid` -- the ``samples.png`` picture of synthetic images.

Nothing here imports torch at module level (the torch-free server path relies
on it); :func:`torch_threads` and the plotting helper import what they need
when called.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privfed.errors import ParameterError, ParameterTypeError
from privfed.progress import ProgressEvent, ProgressFn

if TYPE_CHECKING:  # pragma: no cover
    from privfed.dp import PrivacyLedger
    from privfed.engines.latent.audit import AuditInputs

__all__ = [
    "LEDGER_FILENAME",
    "REPORT_FILENAME",
    "SAMPLES_FILENAME",
    "RunArtifacts",
    "StageClock",
    "save_sample_grid",
    "torch_threads",
    "write_artifacts",
]

#: Names of the artefacts in a run directory.
REPORT_FILENAME = "report.json"
LEDGER_FILENAME = "ledger.json"
SAMPLES_FILENAME = "samples.png"


class StageClock:
    """Times a job's stages and reports them as :class:`~privfed.progress.ProgressEvent`.

    ``start(stage, message)`` reports ``0/1``; ``finish(stage, message)``
    records the stage's wall-clock seconds (rounded to 0.1 ms) in
    :attr:`seconds` and reports ``1/1`` with them; ``step`` forwards counted
    progress inside a stage.

    Args:
        progress: Callback receiving every event; ``None`` reports nothing.
    """

    def __init__(self, progress: ProgressFn | None = None) -> None:
        if progress is not None and not callable(progress):
            raise ParameterTypeError("progress", "a callable taking a ProgressEvent", progress)
        self._progress = progress
        self._started: dict[str, float] = {}
        self.seconds: dict[str, float] = {}

    def _emit(self, event: ProgressEvent) -> None:
        if self._progress is not None:
            self._progress(event)

    def start(self, stage: str, message: str = "") -> None:
        """Begin ``stage``."""
        self._started[stage] = time.perf_counter()
        self._emit(ProgressEvent(stage, 0, 1, message))

    def step(self, stage: str, done: int, total: int, message: str = "") -> None:
        """Report ``done`` of ``total`` steps of ``stage`` (the last one ends it)."""
        seconds = None
        if done == total and stage in self._started:
            seconds = self._record(stage)
        self._emit(ProgressEvent(stage, done, total, message, seconds))

    def finish(self, stage: str, message: str = "") -> float:
        """End ``stage`` and return its seconds."""
        seconds = self._record(stage)
        self._emit(ProgressEvent(stage, 1, 1, message, seconds))
        return seconds

    def _record(self, stage: str) -> float:
        begun = self._started.pop(stage, None)
        elapsed = 0.0 if begun is None else time.perf_counter() - begun
        self.seconds[stage] = round(self.seconds.get(stage, 0.0) + elapsed, 4)
        return self.seconds[stage]


@contextlib.contextmanager
def torch_threads(num_threads: int) -> Iterator[None]:
    """Let torch use ``num_threads`` CPU threads inside the block, then restore.

    Args:
        num_threads: Threads, int ``>= 1``.
    """
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ParameterError("num_threads", "an int >= 1", num_threads)
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@dataclass(frozen=True, eq=False)
class RunArtifacts:
    """Everything a run writes, whichever engine ran it.

    Attributes:
        report: The JSON report (a plain, JSON-serialisable mapping).
        ledger: The run's privacy ledger (``ledger.json``), or ``None`` when the
            run made no DP release.
        sample_images: Synthetic images ``(s, C, H, W)`` in ``[0, 1]`` for
            ``samples.png``, or ``None``.
        sample_labels: Their labels ``(s,)``.
        audit_inputs: What ``privfed audit --run-dir`` reads
            (``audit_inputs.npz``), or ``None`` when no audit ran.  It holds
            real records' latents: keep it as private as the data.
    """

    report: Mapping[str, Any]
    ledger: PrivacyLedger | None = None
    sample_images: np.ndarray | None = field(default=None, repr=False)
    sample_labels: np.ndarray | None = field(default=None, repr=False)
    audit_inputs: AuditInputs | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.report, Mapping):
            raise ParameterTypeError("report", "a mapping", self.report)
        if (self.sample_images is None) != (self.sample_labels is None):
            raise ParameterError(
                "sample_labels", "given together with sample_images", self.sample_labels
            )


def write_artifacts(output_dir: str | Path, artifacts: RunArtifacts) -> dict[str, Path]:
    """Write a run's artefacts into ``output_dir`` (created if needed).

    Files: ``report.json``, and when present ``ledger.json``, ``samples.png``
    and ``audit_inputs.npz``.

    Returns:
        The paths written, by kind (``"report"``, ``"ledger"``, ``"samples"``,
        ``"audit_inputs"``).
    """
    if not isinstance(artifacts, RunArtifacts):
        raise ParameterTypeError("artifacts", "a RunArtifacts", artifacts)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"report": out / REPORT_FILENAME}
    paths["report"].write_text(json.dumps(dict(artifacts.report), indent=2, sort_keys=True))
    if artifacts.ledger is not None:
        paths["ledger"] = out / LEDGER_FILENAME
        paths["ledger"].write_text(artifacts.ledger.to_json())
    if artifacts.sample_images is not None and artifacts.sample_labels is not None:
        paths["samples"] = out / SAMPLES_FILENAME
        save_sample_grid(artifacts.sample_images, artifacts.sample_labels, paths["samples"])
    if artifacts.audit_inputs is not None:
        from privfed.engines.latent.audit import AUDIT_INPUTS_FILENAME

        paths["audit_inputs"] = out / AUDIT_INPUTS_FILENAME
        artifacts.audit_inputs.save(paths["audit_inputs"])
    return paths


def save_sample_grid(
    images: np.ndarray, labels: np.ndarray, path: str | Path, per_class: int = 8
) -> None:
    """Save up to ``per_class`` images of every class as one PNG grid.

    Args:
        images: ``(s, C, H, W)`` floats in ``[0, 1]`` (``C`` = 1 or 3).
        labels: ``(s,)`` integer labels.
        path: Destination ``.png``.
        per_class: Images shown per class (columns).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    classes = sorted(int(c) for c in np.unique(labels))
    rows = max(1, len(classes))
    fig, axes = plt.subplots(rows, per_class, figsize=(per_class * 0.8, rows * 0.8), squeeze=False)
    for r, cls in enumerate(classes):
        picks = np.flatnonzero(labels == cls)[:per_class]
        for col in range(per_class):
            ax = axes[r][col]
            ax.axis("off")
            if col < picks.size:
                img = images[picks[col]]
                shown = img[0] if img.shape[0] == 1 else np.transpose(img, (1, 2, 0))
                ax.imshow(shown, cmap="gray" if img.shape[0] == 1 else None, vmin=0, vmax=1)
        axes[r][0].set_title(str(cls), fontsize=7, loc="left")
    fig.suptitle("synthetic samples per class")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
