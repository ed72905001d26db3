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
  restored afterwards (both wings set it the same way); :func:`run_job`
  checks the device and runs a job's stages with both;
* :func:`release_document` and :func:`evaluation_document` -- the layout of
  ``release.json`` and ``evaluation.json``;
* :class:`RunArtifacts`, :func:`check_output_dir`, :func:`write_artifacts`
  and :class:`WritesArtifacts` -- the one report-and-write path: every run of
  either engine writes the same artefact set, split into the **release**
  (``release.json``, ``ledger.json``, ``samples.png``, ``synthetic.npz``: DP
  outputs and public facts only) and the **evaluation** (``evaluation.json``,
  ``audit_inputs.npz``: computed from private data without noise, labelled
  so, never needed to use the release), plus the federated model card
  (``model_card.md``, ``model_card.json``, :mod:`privfed.engines.model_card`:
  release facts only, in every run, so it ships with the release) and, in a
  full run, the evaluation card beside it (``evaluation_card.md`` / ``.json``:
  the same card with the evaluation fields, marked; never part of the
  release); the output directory is checked before any work and every file
  is written crash-consistently (:mod:`privfed._atomic`);
* :func:`save_sample_grid` -- the ``samples.png`` picture of synthetic images.

The artefact names, :class:`RunArtifacts` and the audit inputs live in
:mod:`privfed.engines.artifacts` (re-exported here), which the model card and
both wings import without importing this module.

Nothing here imports torch at module level (the torch-free server path relies
on it); :func:`torch_threads` and the plotting helper import what they need
when called.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from privfed._atomic import fsync_dir, fsync_file, unwritable_reason
from privfed._checks import check_int
from privfed.engines.artifacts import (
    ARTIFACT_FILENAMES,
    AUDIT_INPUTS_FILENAME,
    EVALUATION_CARD_JSON_FILENAME,
    EVALUATION_CARD_MARKDOWN_FILENAME,
    EVALUATION_FILENAME,
    LEDGER_FILENAME,
    LEGACY_FILENAMES,
    MODEL_CARD_JSON_FILENAME,
    MODEL_CARD_MARKDOWN_FILENAME,
    RELEASE_FILENAME,
    RELEASE_FILENAMES,
    SAMPLES_FILENAME,
    SYNTHETIC_FILENAME,
    RunArtifacts,
)
from privfed.errors import ParameterError, ParameterTypeError
from privfed.progress import ProgressEvent, ProgressFn

if TYPE_CHECKING:  # pragma: no cover
    from privfed.engines.model_card.declarations import ModelCardDeclarations

__all__ = [
    "ARTIFACT_FILENAMES",
    "AUDIT_INPUTS_FILENAME",
    "EVALUATION_CARD_JSON_FILENAME",
    "EVALUATION_CARD_MARKDOWN_FILENAME",
    "EVALUATION_FILENAME",
    "EVALUATION_NOTICE",
    "LEDGER_FILENAME",
    "MODEL_CARD_JSON_FILENAME",
    "MODEL_CARD_MARKDOWN_FILENAME",
    "RELEASE_FILENAME",
    "RELEASE_FILENAMES",
    "RELEASE_NOTICE",
    "SAMPLES_FILENAME",
    "SYNTHETIC_FILENAME",
    "JobStage",
    "RunArtifacts",
    "StageClock",
    "WritesArtifacts",
    "check_device",
    "check_output_dir",
    "evaluation_document",
    "ledger_file_text",
    "release_document",
    "run_job",
    "run_stages",
    "sample_caption",
    "save_sample_grid",
    "torch_threads",
    "write_artifacts",
]

#: Header of every ``evaluation.json``.
EVALUATION_NOTICE = (
    "EVALUATION, NOT RELEASE: computed from the private data without noise (accuracy on "
    "real records, exact record counts, audit scores). It is not covered by the privacy "
    "guarantee, is never needed to use the release, and must be kept as private as the data."
)
#: Header of every ``release.json``.
RELEASE_NOTICE = (
    "RELEASE: differentially private outputs (each traceable to an entry of ledger.json) "
    "and public facts declared by the operator (configuration, codec and ring "
    "specification). No number in it is computed from private data without noise."
)


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
        self._held: set[str] = set()
        self.seconds: dict[str, float] = {}
        #: CPU threads torch may use in the job (set by :func:`run_job`; ``None``: unknown).
        self.num_threads: int | None = None

    def _emit(self, event: ProgressEvent) -> None:
        if self._progress is not None:
            self._progress(event)

    def start(self, stage: str, message: str = "") -> None:
        """Begin ``stage``."""
        self._started[stage] = time.perf_counter()
        self._emit(ProgressEvent(stage, 0, 1, message))

    def step(self, stage: str, done: int, total: int, message: str = "") -> None:
        """Report ``done`` of ``total`` steps of ``stage``.

        The last step ends a stage opened with :meth:`start`, unless
        :func:`run_stages` runs it (the runner ends its stages itself).
        """
        seconds = None
        if done == total and stage in self._started and stage not in self._held:
            seconds = self._record(stage)
        self._emit(ProgressEvent(stage, done, total, message, seconds))

    @contextlib.contextmanager
    def _holding(self, stage: str) -> Iterator[None]:
        # Inside the block, counted steps of ``stage`` report progress and never end it.
        self._held.add(stage)
        try:
            yield
        finally:
            self._held.discard(stage)

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


def check_device(device: object) -> str:
    """Check, before any work, that torch can use ``device``.

    Args:
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (any torch device string).

    Returns:
        ``device`` unchanged.

    Raises:
        ParameterError (parameter ``device``): Not a torch device, or a CUDA
            device this torch build or machine does not have.
    """
    if not isinstance(device, str) or not device:
        raise ParameterTypeError("device", "a torch device string such as 'cpu' or 'cuda'", device)
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise ParameterError("device", "'cpu', 'cuda' or 'cuda:N'", device) from None
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ParameterError(
                "device",
                "a device this machine has",
                device,
                detail="this torch build or machine has no CUDA device; use --device cpu",
            )
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise ParameterError(
                "device", f"cuda:0 .. cuda:{torch.cuda.device_count() - 1}", device
            )
    elif parsed.type != "cpu":
        raise ParameterError("device", "'cpu', 'cuda' or 'cuda:N'", device)
    return device


@contextlib.contextmanager
def torch_threads(num_threads: int) -> Iterator[None]:
    """Let torch use ``num_threads`` CPU threads inside the block, then restore.

    Args:
        num_threads: Threads, int ``>= 1``.
    """
    check_int("num_threads", num_threads, minimum=1, type_error=False)
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


_T = TypeVar("_T")


def run_job(
    device: str, num_threads: int, progress: ProgressFn | None, stages: Callable[[StageClock], _T]
) -> _T:
    """Check ``device`` before any work, then run ``stages`` on a fresh clock.

    Args:
        device: The job's torch device (see :func:`check_device`).
        num_threads: CPU threads torch may use meanwhile (:func:`torch_threads`).
        progress: The job's progress callback, or ``None``.
        stages: The job's stages, called with the :class:`StageClock`.

    Returns:
        What ``stages`` returns.
    """
    check_device(device)
    clock = StageClock(progress)
    clock.num_threads = num_threads
    with torch_threads(num_threads):
        return stages(clock)


_J = TypeVar("_J")


@dataclass(frozen=True)
class JobStage(Generic[_J]):
    """One stage of a job, as data: its name, when it runs, its messages and its body.

    Both jobs (:mod:`privfed.engines.latent.job`, :mod:`privfed.engines.factory.job`)
    list their stages as a tuple of these over a job object that carries the
    values one stage hands to the next, and run them with :func:`run_stages`.

    Attributes:
        name: The stage's name (its key in the report's ``seconds`` and its
            progress events).
        run: The stage's body, called with the job; returns the message of
            the stage's finish event.
        begin: The message of its start event, computed from the job just
            before it starts (``None``: no message).
        when: Whether the stage runs for this job (``None``: always).
    """

    name: str
    run: Callable[[_J], str]
    begin: Callable[[_J], str] | None = None
    when: Callable[[_J], bool] | None = None


def run_stages(job: _J, stages: Sequence[JobStage[_J]], clock: StageClock) -> None:
    """Run a job's stages in order under the one timing contract of both jobs.

    Every stage that runs is started on ``clock`` with its ``begin`` message and
    finished with what its body returns; its seconds span its whole body.
    Counted progress inside a body (:meth:`StageClock.step`) reports steps
    and never ends the stage early.

    Args:
        job: The job object the stages read and fill in.
        stages: The stages, in order.
        clock: The job's clock.
    """
    for stage in stages:
        if stage.when is not None and not stage.when(job):
            continue
        clock.start(stage.name, "" if stage.begin is None else stage.begin(job))
        with clock._holding(stage.name):
            summary = stage.run(job)
        clock.finish(stage.name, summary)


def release_document(
    engine: str,
    *,
    public: Mapping[str, Any],
    dp: Mapping[str, Any],
    samples_per_class: int,
    notice: str = RELEASE_NOTICE,
) -> dict[str, Any]:
    """The content of ``release.json``: header, public facts, DP outputs, synthetic files.

    Args:
        engine: ``"latent"`` or ``"factory"``.
        public: Facts the operator declared (configuration, public bounds).
        dp: The guarantee and the DP outputs (or why there is none).
        samples_per_class: Synthetic samples per class in the release's files.
        notice: The header (an engine whose release has stated limitations
            says so in its own words).
    """
    return {
        "format": "privfed.release",
        "version": 1,
        "notice": notice,
        "engine": engine,
        "public": public,
        "dp": dp,
        "synthetic": {
            "samples_per_class": samples_per_class,
            "files": [SAMPLES_FILENAME, SYNTHETIC_FILENAME],
        },
    }


def evaluation_document(engine: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The content of ``evaluation.json``: its header, then ``body``'s entries."""
    return {
        "format": "privfed.evaluation",
        "version": 1,
        "notice": EVALUATION_NOTICE,
        "engine": engine,
        **body,
    }


class WritesArtifacts:
    """Mixin of a run's result: :meth:`write` puts its :meth:`artifacts` on disk."""

    def artifacts(self, *, release_only: bool = False) -> RunArtifacts:
        """The run's artefacts (``release_only``: without the evaluation)."""
        raise NotImplementedError

    def write(
        self,
        output_dir: str | Path,
        *,
        overwrite: bool = False,
        release_only: bool = False,
        declarations: ModelCardDeclarations | None = None,
        command: Sequence[str] | None = None,
    ) -> dict[str, Path]:
        """Write the run's files into ``output_dir`` (see :func:`write_artifacts`).

        The release: ``release.json``, ``ledger.json``, ``samples.png``,
        ``synthetic.npz``.  The evaluation (unless ``release_only``):
        ``evaluation.json`` and, when the audit ran, ``audit_inputs.npz``; the
        last holds real records' latents (members and non-members): keep it as
        private as the data itself.  The model card (``model_card.md``,
        ``model_card.json``: release facts only) always; unless
        ``release_only``, the evaluation card (``evaluation_card.md``,
        ``evaluation_card.json``) too.

        Args:
            output_dir: The run directory.
            overwrite: Allow a non-empty directory.
            release_only: Write the release alone.
            declarations: The operator's statements for the model card
                (``None``: nothing declared).
            command: The command line that made the run, recorded (secrets
                redacted) in every file's provenance; ``None``: a Python run,
                recorded by its configuration.

        Returns:
            The paths written, by kind.
        """
        from privfed.engines.provenance import make_provenance, with_command

        artifacts = self.artifacts(release_only=release_only)
        if declarations is not None:
            artifacts = replace(artifacts, declarations=declarations)
        provenance = artifacts.provenance
        if provenance is None:
            provenance = make_provenance(_config_of(artifacts.release))
        artifacts = replace(artifacts, provenance=with_command(provenance, command))
        return write_artifacts(output_dir, artifacts, overwrite=overwrite)


def check_output_dir(output_dir: str | Path, *, overwrite: bool = False) -> Path:
    """Check, before any work, that a run may write into ``output_dir``.

    A new path or an empty directory is fine.  A directory that holds files is
    refused unless ``overwrite`` (then the earlier run's artefacts are replaced
    and its stale ones removed when the new run writes; nothing else in it is
    touched).  Whether the location takes new entries is tried, not guessed
    from permission bits: a probe directory is made and removed at once in
    ``output_dir`` (or its nearest existing parent), so a read-only or
    pseudo file system (``/proc``) is refused here, before any stage runs.

    Args:
        output_dir: The run directory.
        overwrite: Allow a non-empty directory.

    Returns:
        The directory as a :class:`~pathlib.Path`.

    Raises:
        ParameterError (parameter ``output_dir``): The path is a file, lies under
            a file, is not writable, or is a non-empty directory without
            ``overwrite``.
    """
    if not isinstance(output_dir, str | Path) or not str(output_dir):
        raise ParameterTypeError("output_dir", "a non-empty path", output_dir)
    if not isinstance(overwrite, bool):
        raise ParameterTypeError("overwrite", "a bool", overwrite)
    out = Path(output_dir)
    existing = next((p for p in (out, *out.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        where = "is" if existing == out else f"lies under {str(existing)!r}, which is"
        raise ParameterError(
            "output_dir", "a directory path", str(out), detail=f"it {where} a file"
        )
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise ParameterError(
            "output_dir", "a writable location", str(out), detail=f"{existing} is not writable"
        )
    reason = unwritable_reason(out) if existing is not None else None
    if reason is not None:
        raise ParameterError("output_dir", "a writable location", str(out), detail=reason)
    if out.is_dir() and not overwrite and any(out.iterdir()):
        raise ParameterError(
            "output_dir",
            "a new or empty directory",
            str(out),
            detail="it already holds files; choose another directory or pass overwrite=True",
        )
    return out


def write_artifacts(
    output_dir: str | Path, artifacts: RunArtifacts, *, overwrite: bool = False
) -> dict[str, Path]:
    """Write a run's artefacts into ``output_dir``, atomically per file.

    Files: ``release.json`` and, when present, ``evaluation.json``,
    ``ledger.json``, ``samples.png``, ``synthetic.npz`` and
    ``audit_inputs.npz``, and the model card ``model_card.json`` and
    ``model_card.md`` (:func:`privfed.engines.model_card.build_model_card` of
    the release alone: never an evaluation field, whatever the run) and, with
    an evaluation, the evaluation card ``evaluation_card.json`` and
    ``evaluation_card.md`` (the card with its evaluation fields).  Every file
    is written under a temporary name, ``fsync``-ed and renamed into place,
    then the directory is ``fsync``-ed: a kill at any instant leaves each
    file old or new, never torn; on any error (or Ctrl-C) the temporary
    files are removed and nothing of this run is left half-written.  With ``overwrite``
    an earlier run's artefacts that this run does not write (say
    ``audit_inputs.npz`` of a run that audited, when this one did not) are
    removed, so the directory never mixes two runs.

    Args:
        output_dir: The run directory (created if needed).
        artifacts: What to write.
        overwrite: Allow a non-empty directory (see :func:`check_output_dir`).

    Returns:
        The paths written, by kind (``"release"``, ``"evaluation"``,
        ``"ledger"``, ``"samples"``, ``"synthetic"``, ``"audit_inputs"``,
        ``"model_card_json"``, ``"model_card_md"``, ``"evaluation_card_json"``,
        ``"evaluation_card_md"``).
    """
    if not isinstance(artifacts, RunArtifacts):
        raise ParameterTypeError("artifacts", "a RunArtifacts", artifacts)
    out = check_output_dir(output_dir, overwrite=overwrite)
    if artifacts.provenance is None:
        from privfed.engines.provenance import make_provenance

        artifacts = replace(artifacts, provenance=make_provenance(_config_of(artifacts.release)))
    provenance = dict(artifacts.provenance or {})
    writers: dict[str, tuple[str, Any]] = {
        "release": (
            RELEASE_FILENAME,
            _json_writer({**artifacts.release, "provenance": provenance}),
        )
    }
    if artifacts.evaluation is not None:
        evaluation = {**artifacts.evaluation, "provenance": provenance}
        writers["evaluation"] = (EVALUATION_FILENAME, _json_writer(evaluation))
    if artifacts.ledger is not None:
        ledger_text = ledger_file_text(
            artifacts.ledger, explanation=artifacts.ledger_explanation, provenance=provenance
        )
        writers["ledger"] = (LEDGER_FILENAME, _text_writer(ledger_text))
    if artifacts.sample_images is not None and artifacts.sample_labels is not None:
        images, labels = artifacts.sample_images, artifacts.sample_labels
        caption = sample_caption(artifacts.release)
        writers["samples"] = (
            SAMPLES_FILENAME,
            lambda p: save_sample_grid(images, labels, p, caption=caption),
        )
        writers["synthetic"] = (
            SYNTHETIC_FILENAME,
            lambda p: _save_npz(p, images=np.asarray(images), labels=np.asarray(labels)),
        )
    if artifacts.audit_inputs is not None:
        audit_inputs = artifacts.audit_inputs
        writers["audit_inputs"] = (AUDIT_INPUTS_FILENAME, audit_inputs.save)
    writers.update(_card_writers(artifacts))
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    temporary: list[Path] = []
    staged: dict[str, tuple[Path, Path]] = {}
    try:
        for kind, (name, write) in writers.items():
            final = out / name
            tmp = out / f".{name}.{secrets.token_hex(4)}.tmp{final.suffix}"
            temporary.append(tmp)
            write(tmp)
            fsync_file(tmp)  # complete on disk before its rename makes it the file
            staged[kind] = (tmp, final)
        # Every file of this run now exists under a temporary name.  First remove what an
        # earlier run left that this one does not rewrite (so a failure from here on can
        # leave fewer files, never two runs' files side by side), then rename into place;
        # the renames are one system call each, with nothing in between that can fail on
        # its own.
        written = {final.name for _, final in staged.values()}
        for name in (*ARTIFACT_FILENAMES, *LEGACY_FILENAMES):
            if name not in written:
                (out / name).unlink(missing_ok=True)
        for tmp, final in staged.values():
            os.replace(tmp, final)
        fsync_dir(out)
    except BaseException:
        for tmp in temporary:
            tmp.unlink(missing_ok=True)
        if created and not any(out.iterdir()):
            out.rmdir()
        raise
    return {kind: final for kind, (_, final) in staged.items()}


def _card_writers(artifacts: RunArtifacts) -> dict[str, tuple[str, Any]]:
    """The model card (the release's: never an evaluation field) and, for a full run,
    the evaluation card beside it (the same card with the evaluation fields)."""
    from privfed.engines.model_card import build_model_card

    # The release card of a full run is the release-only run's card, byte for byte.
    release = replace(artifacts, evaluation=None, audit_inputs=None)
    cards = {"model_card": build_model_card(release)}
    if artifacts.evaluation is not None:
        cards["evaluation_card"] = build_model_card(artifacts)
    names = {
        "model_card": (MODEL_CARD_JSON_FILENAME, MODEL_CARD_MARKDOWN_FILENAME),
        "evaluation_card": (EVALUATION_CARD_JSON_FILENAME, EVALUATION_CARD_MARKDOWN_FILENAME),
    }
    writers: dict[str, tuple[str, Any]] = {}
    for kind, card in cards.items():
        json_name, md_name = names[kind]
        writers[f"{kind}_json"] = (json_name, _text_writer(card.to_json()))
        writers[f"{kind}_md"] = (md_name, _text_writer(card.to_markdown()))
    return writers


def _text_writer(text: str) -> Any:
    return lambda path: Path(path).write_text(text, encoding="utf-8")


def _json_writer(data: Mapping[str, Any]) -> Any:
    text = json.dumps(dict(data), indent=2, sort_keys=True, allow_nan=False) + "\n"
    return lambda path: Path(path).write_text(text)


def _config_of(release: Mapping[str, Any]) -> Mapping[str, Any] | None:
    public = release.get("public")
    config = public.get("config") if isinstance(public, Mapping) else None
    return config if isinstance(config, Mapping) else None


def ledger_file_text(
    ledger: Any,
    *,
    explanation: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> str:
    """The text of ``ledger.json``: the ledger, indented, with its annotations.

    The ledger itself is :meth:`~privfed.dp.PrivacyLedger.to_json` (whose
    SHA-256 is ``release.json``'s ``dp.ledger_sha256``); ``explanation`` (what
    its numbers mean) and ``provenance`` are added beside it, under keys
    :meth:`~privfed.dp.PrivacyLedger.from_json` reads past, so the file loads
    as the same ledger.
    """
    document = json.loads(ledger.to_json())
    if explanation is not None:
        document["explanation"] = dict(explanation)
    if provenance is not None:
        document["provenance"] = dict(provenance)
    return json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n"


def sample_caption(release: Mapping[str, Any]) -> str:
    """The caption of ``samples.png``: engine, codec, ε and δ (or "no DP")."""
    engine = str(release.get("engine", "?"))
    public = release.get("public")
    config = public.get("config", {}) if isinstance(public, Mapping) else {}
    codec = config.get("codec") or config.get("codec_kind") or config.get("factory") or "?"
    dp = release.get("dp")
    dp = dp if isinstance(dp, Mapping) else {}
    epsilon, delta = dp.get("epsilon"), dp.get("delta")
    if isinstance(epsilon, int | float) and isinstance(delta, int | float):
        privacy = f"eps={epsilon:.4g} delta={delta:.3g}"
    else:
        privacy = "no DP"
    return f"{privacy} engine={engine} codec={codec}"


def _save_npz(path: str | Path, **arrays: np.ndarray) -> None:
    with open(path, "wb") as handle:
        np.savez(handle, allow_pickle=False, **arrays)


def save_sample_grid(
    images: np.ndarray,
    labels: np.ndarray,
    path: str | Path,
    per_class: int = 8,
    *,
    caption: str | None = None,
    max_classes: int = 20,
) -> None:
    """Save up to ``per_class`` images of up to ``max_classes`` classes as one PNG grid.

    One row per class (its label on the left) under a caption line (``caption``,
    e.g. ε, δ, engine and codec: :func:`sample_caption`), written by privfed's
    own PNG encoder (:mod:`privfed.engines._png`): no matplotlib, which cost
    the main job over a second per run for this one picture.  With more
    classes than ``max_classes`` the first ``max_classes`` are shown and a
    second caption line says how many are omitted (``synthetic.npz`` holds
    them all), so the picture stays readable at any class count.

    Args:
        images: ``(s, C, H, W)`` floats in ``[0, 1]`` (``C`` = 1 or 3).
        labels: ``(s,)`` integer labels.
        path: Destination ``.png``.
        per_class: Images shown per class (columns).
        caption: The caption line, or ``None`` (none).
        max_classes: Rows shown at most.
    """
    from privfed.engines._png import write_sample_grid

    write_sample_grid(
        np.asarray(images),
        np.asarray(labels),
        path,
        per_class=per_class,
        caption=caption,
        max_classes=max_classes,
    )
