"""``privfed run``: one engine's job end to end.

``--engine latent`` (default) runs :func:`privfed.engines.latent.job.run_pipeline`, the
latent-statistic engine with secure aggregation, the DP release, synthesis, a
classifier, the optional baselines (``--baselines``) and the default
membership-inference audit (``--no-audit`` skips it).  ``--engine factory`` runs
:func:`privfed.engines.factory.job.run_factory_pipeline` on digits.

Options that belong to one engine only are refused (exit status 2) when given
with the other, rather than silently ignored.  Exit status 0 on success, 2 on
invalid options or configurations.

Module import is light (argparse only); torch and the engines load inside
:func:`run`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from privfed.cli._options import (
    OPEN_UNIT,
    POSITIVE,
    Interval,
    add_int,
    add_number,
    fail,
    option_message,
    print_table,
)
from privfed.cli._progress import reporter

__all__ = ["DESCRIPTION", "HELP_FORMATTER", "add_options", "run"]

_PROG = "privfed run"
Partition = tuple[str, float | int | None]

#: Secure-aggregation dropouts: a share in [0, 0.5).
_DROPOUT = Interval(low=0.0, high=0.5, closed_low=True)


def _defaults() -> tuple[dict[str, tuple[str, Any]], dict[str, tuple[str, Any]], dict[str, Any]]:
    """Option tables whose defaults come from the engines' configs (their one source).

    Returns ``(latent_only, factory_only, shared)``: option destination ->
    (flag, default) for options of one engine, and destination ->
    (latent default, factory default) for shared ones.  Only dataclass field
    defaults are read, so no engine code (torch) is imported.
    """
    from privfed.engines.factory.config import FactoryPipelineConfig
    from privfed.engines.latent.config import PipelineConfig

    latent, factory = _field_defaults(PipelineConfig), _field_defaults(FactoryPipelineConfig)
    latent_only = {
        "codec": ("--codec", latent["codec"]),
        "codec_kind": ("--codec-kind", latent["codec_kind"]),
        "clip_norm": ("--clip-norm", latent["clip_norm"]),
        "adjacency": ("--adjacency", latent["adjacency"].value),
        "dropout_rate": ("--dropout-rate", latent["dropout_rate"]),
        "noise": ("--noise", latent["noise"].value),
        "assumed_corrupted": ("--assumed-corrupted", latent["assumed_corrupted"]),
        "secagg_mode": ("--secagg-mode", latent["secagg_mode"]),
    }
    factory_only = {
        "factory": ("--factory", factory["factory"]),
        "fedavg_rounds": ("--fedavg-rounds", factory["fedavg_rounds"]),
        "classifier": ("--classifier", factory["classifier"]),
        "mixture_components": ("--mixture-components", factory["mixture_components"]),
    }
    shared = {
        "dataset": (latent["dataset"], factory["dataset"]),
        # factory: a target ε makes the EDM factories DP-SGD (calibrated per cell).
        "epsilon": (latent["epsilon"], factory["epsilon"]),
        "delta": (latent["delta"], factory["delta"]),
        "num_classes": (latent["num_classes"], factory["num_classes"]),
        "public_fraction": (latent["public_fraction"], factory["public_fraction"]),
        "test_fraction": (latent["test_fraction"], factory["test_fraction"]),
        "partition": (
            (latent["partition"].value, latent["alpha"]),
            (factory["scenario"], None),
        ),
        "clients": (latent["num_clients"], factory["num_clients"]),
        "latent_dim": (latent["latent_dim"], factory["latent_dim"]),
        "samples_per_class": (latent["samples_per_class"], factory["synthetic_per_class"]),
        "epochs": (latent["classifier_epochs"], factory["classifier_epochs"]),
        "baselines": (latent["baselines"], factory["centralized"]),
        "threads": (latent["num_threads"], factory["num_threads"]),
        "no_audit": (not latent["audit"], not factory["audit"]),
        # factory: seeds the Gaussian factories' DP noise (with --epsilon).
        "noise_seed": (latent["noise_seed"], factory["noise_seed"]),
    }
    return latent_only, factory_only, shared


def _field_defaults(cls: type) -> dict[str, Any]:
    """Default of every field of a dataclass that has a plain default."""
    import dataclasses

    return {
        f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING
    }


def _partition_spec(text: str) -> Partition:
    """Parse ``iid``, ``dirichlet[:ALPHA]``, ``pathological[:K]`` or ``single-class``."""
    name, _, arg = text.partition(":")
    try:
        if name == "dirichlet":
            alpha = float(arg) if arg else 0.1
            if alpha not in POSITIVE:
                raise argparse.ArgumentTypeError(
                    f"dirichlet:ALPHA needs ALPHA {POSITIVE.describe()}; got {arg!r}"
                )
            return name, alpha
        if name == "pathological":
            k = int(arg) if arg else 2
            if k < 1:
                raise argparse.ArgumentTypeError(
                    f"pathological:K needs K an integer >= 1; got {arg!r}"
                )
            return name, k
    except ValueError:
        pass
    else:
        if name in ("iid", "single-class") and not arg:
            return name, None
    raise argparse.ArgumentTypeError(
        "expected iid, dirichlet[:ALPHA], pathological[:K] or single-class"
    )


def _noise_seed(text: str) -> int:
    """``--noise-seed``: an integer >= 0; the value is never echoed (it seeds the DP noise)."""
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError("must be an integer >= 0; got <redacted>")
    return value


#: What ``privfed run --help`` says first.
DESCRIPTION = (
    "latent engine: public split fits the codec; private split spread over clients; "
    "exact fixed-point statistics summed by real secure aggregation with dropouts; "
    "DP release; per-class Gaussians; synthetic data; classifier on real test data; "
    "membership-inference audit.  factory engine: per-client generative factories "
    "on digits, synthesis, classifier, FedAvg baseline.  Options of one engine are "
    "refused with the other."
)


def add_options(parser: argparse.ArgumentParser) -> None:
    """Add the ``run`` options to its sub-parser."""
    add = parser.add_argument
    _add_data_options(add)
    _add_codec_options(add)
    _add_release_options(add)
    _add_evaluation_options(add)
    _add_factory_options(add)
    _add_compute_options(add)
    _add_noise_options(add)
    _add_output_options(add)


# The option groups, in the order ``privfed run --help`` lists them.


def _add_data_options(add: Any) -> None:
    """The engine, the dataset and its splits, and how records are spread over clients."""
    add(
        "--engine",
        choices=("latent", "factory"),
        default="latent",
        help="latent: one DP release of per-class latent statistics (default); factory: "
        "per-client generative factories",
    )
    add(
        "--dataset",
        help="'digits', an .npz file or an image folder (default {default})",
    )
    add_int(
        add,
        "--num-classes",
        2,
        help="classes of --dataset (labels 0..K-1); default: inferred, refusing empty classes",
    )
    add_number(
        add,
        "--public-fraction",
        OPEN_UNIT,
        help="share of records in the public split (default {default})",
    )
    add_number(
        add,
        "--test-fraction",
        OPEN_UNIT,
        help="share of records held out for testing (default {default})",
    )
    add(
        "--partition",
        type=_partition_spec,
        help="latent: iid | dirichlet[:ALPHA] | pathological[:K] | single-class; factory: "
        "single-class | dirichlet[:ALPHA] (default {default})",
    )
    add_int(
        add,
        "--clients",
        2,
        help="clients (default {default})",
    )


def _add_codec_options(add: Any) -> None:
    """The codec that maps records to latents, and its clipping."""
    add(
        "--codec",
        help="latent: pca | conv-ae | a diffusers model directory (default {default})",
    )
    add(
        "--codec-kind",
        choices=("tiny", "kl", "dc"),
        help="latent, diffusers codecs: AutoencoderTiny | AutoencoderKL | AutoencoderDC",
    )
    add_int(
        add,
        "--latent-dim",
        1,
        help="codec dimension; factory: of the Gaussian factories (default {default})",
    )
    add_number(
        add,
        "--clip-norm",
        POSITIVE,
        help="latent: default the codec's",
    )


def _add_release_options(add: Any) -> None:
    """The DP target and its neighbouring relation, and the secure-aggregation dropouts."""
    add_number(
        add,
        "--epsilon",
        POSITIVE,
        help="latent: ε of the release; factory: target ε of every factory (edm: DP-SGD, "
        "gaussian: noisy latent moments), noise calibrated per (class, client) cell "
        "(default {default})",
    )
    add_number(
        add,
        "--delta",
        OPEN_UNIT,
        help="latent: δ of the release and audit; factory: δ of the target, with --epsilon "
        "(default {default})",
    )
    add(
        "--adjacency",
        choices=("replace-one", "add-remove"),
        help="latent (default {default})",
    )
    add_number(
        add,
        "--dropout-rate",
        _DROPOUT,
        help="latent: secagg dropouts (default {default})",
    )


def _add_evaluation_options(add: Any) -> None:
    """Synthesis, the classifier trained on it, the baselines and the audit."""
    add_int(
        add,
        "--samples-per-class",
        1,
        help="synthetic samples per class (default {default})",
    )
    add_int(
        add,
        "--epochs",
        1,
        help="most classifier epochs; training stops earlier once the loss on held-out "
        "training data stops improving (default {default})",
    )
    add(
        "--baselines",
        action=argparse.BooleanOptionalAction,
        help="also train the reference classifiers -- latent: on the real private data and "
        "on noiseless synthetic data; factory: the centralized run (default {default})",
    )
    add(
        "--no-audit",
        action="store_true",
        default=None,  # None: not given, the engine's default applies
        help="skip the membership-inference audit stage",
    )


def _add_factory_options(add: Any) -> None:
    """The factory engine's own options."""
    add(
        "--factory",
        choices=("gaussian", "edm", "mixture"),
        help="factory (default {default})",
    )
    add_int(
        add,
        "--fedavg-rounds",
        0,
        help="factory: 0 skips the FedAvg baseline; FedAvg rounds (default {default})",
    )
    add(
        "--classifier",
        choices=("cnn", "mlp"),
        help="factory: architecture of the downstream classifier, which the centralized "
        "baseline trains too (default {default})",
    )
    add_int(
        add,
        "--mixture-components",
        1,
        help="factory mixture: most components per cell (default {default})",
    )


def _add_compute_options(add: Any) -> None:
    """Where and how the job computes, and its experimental-design seed."""
    add("--device", default="cpu", help="torch device: cpu (default), cuda or cuda:N")
    add_int(
        add,
        "--threads",
        1,
        help="CPU threads torch may use (default {default}; none: the cores not already busy)",
    )
    add_int(
        add,
        "--seed",
        0,
        default=0,
        help="experimental-design seed (split, partition, codec, sampling, classifier; "
        "never the DP noise)",
    )
    add_int(
        add,
        "--repeats",
        1,
        default=1,
        help="train and test the downstream classifier K times (seeds --seed, --seed+1, "
        "...) and record the accuracy's mean, std, min and max; the release is made once",
    )


def _add_noise_options(add: Any) -> None:
    """Who adds the DP noise and from which seed, and the secure-aggregation security mode."""
    add(
        "--noise-seed",
        type=_noise_seed,
        help="seed the DP noise (reproducible experiments only; default: OS CSPRNG); "
        "factory: Gaussian factories with --epsilon",
    )
    add(
        "--noise",
        choices=("central", "distributed-gaussian", "distributed-skellam"),
        help="latent: who adds the DP noise: the server after unmasking (central), or every "
        "client before masking (distributed: the server never holds a noiseless total) "
        "(default {default})",
    )
    add_int(
        add,
        "--assumed-corrupted",
        0,
        help="latent, distributed noise: clients assumed to collude with the server; the "
        "noise is calibrated for threshold minus this many honest clients (default {default})",
    )
    add(
        "--secagg-mode",
        choices=("semi-honest", "active"),
        help="latent: security mode of secure aggregation: semi-honest (the server follows "
        "the protocol) or active (signed keys and a ConsistencyCheck; needs 2t > clients + "
        "--assumed-corrupted) (default {default})",
    )


def _add_output_options(add: Any) -> None:
    """The run directory, what is written there, and the model card's declarations."""
    add(
        "--output-dir",
        default="privfed-run",
        help="run directory (default privfed-run); must be new or empty unless --overwrite",
    )
    add(
        "--overwrite",
        action="store_true",
        help="replace an earlier run's artefacts in --output-dir (stale ones are removed)",
    )
    add(
        "--release-only",
        action="store_true",
        help="write only the release (release.json, ledger.json, samples.png, synthetic.npz, "
        "and the model card without evaluation fields) and skip the evaluation stages that "
        "read private data (baselines, audit)",
    )
    add(
        "--model-card-config",
        metavar="FILE",
        help="JSON (or .toml) table of model-card declarations: model_name, dataset_name, "
        "intended_use, out_of_scope_uses, limitations, contact, owner (all optional strings)",
    )
    add(
        "--quiet",
        action="store_true",
        help="no progress on stderr (warnings and errors still show; results go to stdout)",
    )


class _DefaultsHelp(argparse.HelpFormatter):
    """Fills ``{default}`` in an option's help from the engines' configurations.

    The defaults are read from the configuration dataclasses when help is shown,
    so the text cannot disagree with what a run uses.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if text is not None and "{default}" in text:
            text = text.replace("{default}", _default_text(action.dest))
        return text


#: The help formatter of ``privfed run``.
HELP_FORMATTER = _DefaultsHelp


def _default_text(dest: str) -> str:
    """``"20 latent, 10 factory"``, or one value where only one engine has the option."""
    latent_only, factory_only, shared = _defaults()

    def show(value: Any) -> str:
        if isinstance(value, tuple):  # a partition: (scheme, parameter)
            return value[0] if value[1] is None else f"{value[0]}:{value[1]:g}"
        if isinstance(value, bool):
            return "on" if value else "off"
        return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)

    if dest in shared:
        latent, factory = shared[dest]
        if latent == factory:
            return show(latent)
        return f"{show(latent)} latent, {show(factory)} factory"
    table = latent_only if dest in latent_only else factory_only
    return show(table[dest][1])


class _UsageError(Exception):
    """An option that does not apply to the chosen engine (exit status 2)."""


def _resolve(args: argparse.Namespace) -> argparse.Namespace:
    """Refuse options of the other engine, then fill in this engine's defaults."""
    latent = args.engine == "latent"
    latent_only, factory_only, shared = _defaults()
    foreign = factory_only if latent else latent_only
    given = [flag for dest, (flag, _) in foreign.items() if getattr(args, dest) is not None]
    if given:
        raise _UsageError(
            "; ".join(f"{flag} does not apply to --engine {args.engine}" for flag in given)
        )
    filled = vars(args).copy()
    for dest, (_, default) in (latent_only if latent else factory_only).items():
        if filled[dest] is None:
            filled[dest] = default
    for dest, (latent_default, factory_default) in shared.items():
        if filled[dest] is None:
            filled[dest] = latent_default if latent else factory_default
    _check_combinations(filled, latent)
    if not latent:
        scheme = filled["partition"][0]
        if scheme not in ("single-class", "dirichlet"):
            raise _UsageError(
                f"--partition {scheme} does not apply to --engine factory "
                "(use single-class or dirichlet[:ALPHA])"
            )
        if filled["factory"] == "edm" and args.latent_dim is not None:
            raise _UsageError("--latent-dim does not apply to --factory edm")
        if args.delta is not None and args.epsilon is None:
            raise _UsageError("--delta applies to --engine factory only with --epsilon")
    return argparse.Namespace(**filled)


def _check_combinations(filled: dict[str, Any], latent: bool) -> None:
    """Cross-option rules, in the options' own terms, before any work."""
    public, test = filled["public_fraction"], filled["test_fraction"]
    if public + test >= 1.0:
        raise _UsageError(
            "--public-fraction + --test-fraction must be < 1 (the rest is the private "
            f"split); got {public:g} + {test:g}"
        )
    if not latent:
        return
    fitted = filled["codec"] in ("pca", "conv-ae")
    if fitted and filled["codec_kind"] is not None:
        raise _UsageError(
            f"--codec-kind applies only to a diffusers --codec (a model directory), "
            f"not --codec {filled['codec']}"
        )
    if not fitted and filled["codec_kind"] is None:
        raise _UsageError(
            f"--codec {filled['codec']} is a diffusers model: say which autoencoder it is "
            "with --codec-kind tiny, kl or dc"
        )


#: Records of the bundled digits (for the δ >= 1/n warning without loading).
_DIGITS_RECORDS = 1797
#: An ε above this protects almost nothing (e^50 odds).
_EPSILON_WARN = 50.0


def _warnings(given: argparse.Namespace, run: argparse.Namespace) -> list[str]:
    """Settings that are legal but almost surely wrong; the run goes on."""
    out = []
    if run.epsilon is not None and run.epsilon > _EPSILON_WARN:
        out.append(
            f"--epsilon {run.epsilon:g} is above {_EPSILON_WARN:g}: the guarantee bounds an "
            "attacker's odds by e^epsilon, which is no protection"
        )
    if run.dataset == "digits" and run.delta is not None and run.delta >= 1 / _DIGITS_RECORDS:
        out.append(
            f"--delta {run.delta:g} is >= 1/n (n = {_DIGITS_RECORDS} records): a release "
            "may then expose a whole record outright; use delta well below 1/n"
        )
    if (
        run.engine == "latent"
        and run.noise == "central"
        and run.secagg_mode != "active"
        and given.assumed_corrupted
    ):
        out.append(
            "--assumed-corrupted has no effect with --noise central unless --secagg-mode "
            "active (it calibrates distributed noise and the active threshold)"
        )
    return out


def _release_message(exc: Exception, epsilon: float) -> str | None:
    """The CLI's words for a release the fixed-point grid cannot hold (too little ε)."""
    parameter = getattr(exc, "parameter", None)
    if not (isinstance(parameter, str) and parameter.startswith("noise_std")):
        return None
    return (
        f"--epsilon {epsilon:g} needs more noise than the secure-aggregation field can "
        "hold at this run's fixed-point precision; use a larger --epsilon (or --delta)"
    )


#: Configuration parameters -> the option that sets them (error messages name options).
_OPTION_OF: dict[str, str] = {
    "dataset": "--dataset",
    "num_classes": "--num-classes",
    "public_fraction": "--public-fraction",
    "test_fraction": "--test-fraction",
    "codec_kind": "--codec-kind",
    "kind": "--codec-kind",
    "partition": "--partition",
    "alpha": "--partition dirichlet:ALPHA",
    "dirichlet_alpha": "--partition dirichlet:ALPHA",
    "classes_per_client": "--partition pathological:K",
    "scenario": "--partition",
    "num_clients": "--clients",
    "codec": "--codec",
    "latent_dim": "--latent-dim",
    "clip_norm": "--clip-norm",
    "epsilon": "--epsilon",
    "delta": "--delta",
    "adjacency": "--adjacency",
    "dropout_rate": "--dropout-rate",
    "samples_per_class": "--samples-per-class",
    "synthetic_per_class": "--samples-per-class",
    "classifier_epochs": "--epochs",
    "fedavg_rounds": "--fedavg-rounds",
    "factory": "--factory",
    "classifier": "--classifier",
    "mixture_components": "--mixture-components",
    "device": "--device",
    "num_threads": "--threads",
    "seed": "--seed",
    "repeats": "--repeats",
    "noise_seed": "--noise-seed",
    "noise": "--noise",
    "assumed_corrupted": "--assumed-corrupted",
    "secagg_mode": "--secagg-mode",
    "output_dir": "--output-dir",
    "model_card_config": "--model-card-config",
}


def run(args: argparse.Namespace) -> int:
    from privfed._deps import require
    from privfed.engines.job import check_output_dir
    from privfed.errors import PrivfedError

    resolved = args
    try:
        # Before any work: what the run needs installed, and where the results go.
        require("torch", feature="privfed run")
        resolved = _resolve(args)
        try:
            check_output_dir(resolved.output_dir, overwrite=resolved.overwrite)
        except PrivfedError as exc:
            text = option_message(exc, _OPTION_OF).replace("overwrite=True", "--overwrite")
            raise _UsageError(text) from None
        from privfed.engines.job import check_device

        check_device(resolved.device)
        resolved.declarations = _declarations(resolved.model_card_config)
        for line in _warnings(args, resolved):
            print(f"privfed run: warning: {line}", file=sys.stderr)
        from privfed.data.datasets import check_dataset_spec

        check_dataset_spec(resolved.dataset, num_classes=resolved.num_classes)
        if resolved.engine == "latent" and resolved.codec not in ("pca", "conv-ae"):
            # A hub id with no network fails now, naming the network, not after stages.
            from privfed.engines.codecs.pretrained import check_codec_source

            check_codec_source(resolved.codec)
        if resolved.engine == "factory":
            return _run_factory(resolved)
        return _run_latent(resolved)
    except (_UsageError, PrivfedError) as exc:
        grid = _release_message(exc, getattr(resolved, "epsilon", None) or 0.0)
        return fail(_PROG, grid or option_message(exc, _OPTION_OF))
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        return fail(_PROG, f"cannot write --output-dir: {exc.strerror or exc}{where}")


def _declarations(path: str | None) -> Any:
    """The model-card declarations of ``--model-card-config``, read before any work."""
    if path is None:
        return None
    from privfed.engines.model_card import ModelCardDeclarations

    return ModelCardDeclarations.from_file(path)


def _engine_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields both engines take, by the same name, from the same options."""
    return {
        "dataset": args.dataset,
        "num_classes": args.num_classes,
        "public_fraction": args.public_fraction,
        "test_fraction": args.test_fraction,
        "num_clients": args.clients,
        "latent_dim": args.latent_dim,
        "epsilon": args.epsilon,
        "delta": args.delta,
        "classifier_epochs": args.epochs,
        "audit": not (args.no_audit or args.release_only),
        "device": args.device,
        "num_threads": args.threads,
        "seed": args.seed,
        "repeats": args.repeats,
        "noise_seed": args.noise_seed,
    }


def _run_latent(args: argparse.Namespace) -> int:
    from privfed.dp import Adjacency
    from privfed.engines.latent.config import PipelineConfig
    from privfed.engines.latent.job import run_pipeline

    scheme, option = args.partition
    config = PipelineConfig(
        **_engine_fields(args),
        codec_kind=args.codec_kind,
        partition=scheme,
        alpha=option if scheme == "dirichlet" else None,
        classes_per_client=option if scheme == "pathological" else None,
        codec=args.codec,
        clip_norm=args.clip_norm,
        adjacency=Adjacency(args.adjacency),
        dropout_rate=args.dropout_rate,
        samples_per_class=args.samples_per_class,
        baselines=args.baselines and not args.release_only,
        noise=args.noise,
        assumed_corrupted=args.assumed_corrupted,
        secagg_mode=args.secagg_mode,
    )
    result = run_pipeline(config, progress=reporter(args.quiet))
    r = result.report
    release_rows = [
        ("epsilon / delta", f"{r.epsilon:g} / {r.delta:.3g} ({config.adjacency.value})"),
        (
            ("mu (GDP)", f"{r.mu:.4f}")
            if r.distributed is None
            else (
                "noise model",
                f"{r.distributed['noise_model']}: clients add noise before masking, "
                f"calibrated for {r.distributed['min_honest_contributors']} honest "
                f"contributors (RDP accounting)",
            )
        ),
        (
            "noise std: sum / second / count",
            f"{r.noise_std_sum:.4g} / {r.noise_std_second_moment:.4g} / {r.noise_std_count:.4g}",
        ),
        (
            "latent dim / clip norm / frac. bits",
            f"{r.latent_dim} / {r.clip_norm:.4g} / {r.fractional_bits}",
        ),
        (
            "payload per client",
            f"{r.payload_values_per_client} values, {r.payload_bytes_per_client} B",
        ),
        ("clients / dropped", f"{r.num_clients} / {_dropped(r.dropped_clients)}"),
    ]
    evaluation_rows = [
        ("accuracy, synthetic (DP)", f"{r.accuracy_synthetic:.4f}"),
        (
            "accuracy, real private data",
            "-" if r.accuracy_real is None else f"{r.accuracy_real:.4f}",
        ),
        (
            "accuracy, synthetic (no DP)",
            "-" if r.accuracy_nondp_synthetic is None else f"{r.accuracy_nondp_synthetic:.4f}",
        ),
        ("secagg bytes sent per client", f"{r.secagg_bytes_per_client:.0f} B"),
        ("empty clients", str(r.empty_clients)),
        ("records aggregated", f"{r.records_aggregated} of {r.records_private} private"),
    ]
    if r.audit is not None:
        evaluation_rows.extend(_audit_rows(r.audit))
    evaluation_rows.append(("total seconds", f"{sum(r.seconds.values()):.2f}"))
    return _write_and_print(result, args, release_rows, evaluation_rows)


def _dropped(dropped: dict[str, list[int]]) -> str:
    """``"none"``, or ``"2 (masked input: 3, 9)"``: who dropped out at which stage."""
    if not any(dropped.values()):
        return "none"
    total = sum(len(ids) for ids in dropped.values())
    where = "; ".join(
        f"{stage.lower().replace('_', ' ')}: {', '.join(map(str, ids))}"
        for stage, ids in dropped.items()
        if ids
    )
    return f"{total} ({where})"


def _write_and_print(
    result: Any,
    args: argparse.Namespace,
    release_rows: list[tuple[str, str]],
    evaluation_rows: list[tuple[str, str]],
) -> int:
    """Write the run's artefacts, then print its figures and the files written; 0."""
    paths = result.write(
        args.output_dir,
        overwrite=args.overwrite,
        release_only=args.release_only,
        declarations=args.declarations,
        command=["privfed", *getattr(args, "argv", ["run"])],
    )
    _print_sections(release_rows, evaluation_rows)
    print(f"\nwrote {', '.join(str(p) for p in paths.values())}")
    return 0


def _print_sections(
    release_rows: list[tuple[str, str]], evaluation_rows: list[tuple[str, str]]
) -> None:
    """The release's figures, then the evaluation's, each under its own heading."""
    print("\nrelease (DP outputs and public facts):")
    print_table(release_rows, "  ")
    print("\nevaluation (computed from private data without noise; not part of the release):")
    print_table(evaluation_rows, "  ")


def _audit_rows(summary: Any) -> list[tuple[str, str]]:
    """One summary line per attack: AUC [interval], lowest supported TPR, ε/μ bounds."""
    from privfed.engines.latent.audit import AuditSkipped

    if isinstance(summary, AuditSkipped):
        return [("audit", f"skipped: {summary.reason}")]
    claim = summary.claim
    rows = [
        (
            "audit: members / non-members",
            f"{summary.members} / {summary.nonmembers} "
            f"(claim for the game: eps {claim.game_epsilon:.3g}, mu {claim.game_mu:.3g})",
        )
    ]
    for name, entry in summary.attacks.items():
        auc = entry.auc
        text = f"AUC {auc.estimate:.3f} [{auc.lower:.3f}, {auc.upper:.3f}]"
        if entry.tpr_at_fpr:
            tpr = entry.tpr_at_fpr[-1]
            text += f", TPR@{tpr.fpr:g} {tpr.tpr:.3f} [{tpr.lower:.3f}, {tpr.upper:.3f}]"
        if entry.epsilon_lower_bound is not None and entry.significance is not None:
            level = 1.0 - entry.significance
            text += (
                f", eps >= {entry.epsilon_lower_bound:.3f}, mu >= {entry.mu_lower_bound:.3f}"
                f" ({level:.0%})"
            )
            if entry.exceeds_claim:
                text += "  EXCEEDS CLAIM"
        rows.append((f"audit: {name}", text))
    return rows


def _run_factory(args: argparse.Namespace) -> int:
    from privfed.engines.factory.config import FactoryPipelineConfig
    from privfed.engines.factory.job import run_factory_pipeline

    scheme, alpha = args.partition
    kwargs: dict[str, Any] = {
        **_engine_fields(args),
        "scenario": scheme,
        "factory": args.factory,
        "synthetic_per_class": args.samples_per_class,
        "fedavg_rounds": args.fedavg_rounds,
        "classifier": args.classifier,
        "mixture_components": args.mixture_components,
        "centralized": args.baselines and not args.release_only,
    }
    if scheme == "dirichlet":
        kwargs["dirichlet_alpha"] = alpha
    config = FactoryPipelineConfig(**kwargs)
    report = run_factory_pipeline(config, progress=reporter(args.quiet))
    data = report.to_dict()
    central = report.centralized_accuracy
    release_rows = [
        ("scenario / factory", f"{config.scenario} / {config.factory}"),
        (
            "epsilon (ledger)",
            "- (no DP)" if report.dp_epsilon is None else f"{report.dp_epsilon:.4g}",
        ),
    ]
    if config.epsilon is not None:
        release_rows.append(
            (
                "target (per cell, calibrated)",
                f"eps {config.epsilon:g} / delta {config.delta:.3g}, "
                f"{len(report.ledger.releases)} factories in the ledger",
            )
        )
    fedavg, fedavg_bytes = report.fedavg_accuracy, report.fedavg_bytes_per_client
    evaluation_rows = [
        ("accuracy, synthetic (factories)", f"{report.factory_accuracy:.4f}"),
        ("accuracy, FedAvg", "-" if fedavg is None else f"{fedavg:.4f}"),
        ("accuracy, centralized", "-" if central is None else f"{central:.4f}"),
        ("factories", str(report.num_factories)),
        (
            "bytes per client: factories / FedAvg",
            f"{report.factory_bytes_per_client:.0f} / "
            + ("-" if fedavg_bytes is None else f"{fedavg_bytes:.0f}"),
        ),
    ]
    evaluation_rows.extend(_factory_audit_rows(data.get("audit")))
    evaluation_rows.append(("total seconds", f"{data['seconds_total']:.2f}"))
    return _write_and_print(report, args, release_rows, evaluation_rows)


def _factory_audit_rows(audit: Any) -> list[tuple[str, str]]:
    """One line per attack of the factory audit's worst-case summary (if it ran)."""
    if not isinstance(audit, dict) or not isinstance(audit.get("summary"), dict):
        return []
    rows = []
    for name, entry in audit["summary"].items():
        parts = []
        if "max_auc" in entry:
            parts.append(f"max AUC {entry['max_auc']:.3f} ({entry.get('max_auc_cell', '?')})")
        if "mean_auc" in entry:
            parts.append(f"mean AUC {entry['mean_auc']:.3f}")
        if "max_epsilon_lower_bound" in entry:
            parts.append(f"eps >= {entry['max_epsilon_lower_bound']:.3f}")
        if "max_mu_lower_bound" in entry:
            parts.append(f"mu >= {entry['max_mu_lower_bound']:.3f}")
        if "largest_possible_epsilon_lower_bound" in entry:
            parts.append(
                f"a perfect attack could show at most eps >= "
                f"{entry['largest_possible_epsilon_lower_bound']:.3f}"
            )
        rows.append((f"audit: {name}", ", ".join(parts) or "-"))
    return rows
