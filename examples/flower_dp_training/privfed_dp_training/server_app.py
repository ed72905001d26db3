"""privfed_dp_training: the ServerApp (central DP around FedAvg, privfed's secure aggregation).

Flower's ``examples/fl-dp-sa`` server with one change: the ``fit_workflow`` is
privfed's ``SecAggWorkflow`` instead of Flower's ``SecAggPlusWorkflow`` (same
arguments).  FedAvg sits inside Flower's ``DifferentialPrivacyClientSideFixedClipping``:
nodes clip (``fixedclipping_mod``), privfed securely aggregates the clipped
weights, and the wrapper adds Gaussian noise of standard deviation
``noise-multiplier * clipping-norm / num-sampled-clients`` to the aggregate
(central DP: the server adds the noise after the secure aggregation).

Each round samples exactly ``num-sampled-clients`` nodes, the count the noise
is calibrated for.  A round with a dropout is not applied: the DP wrapper
drops a round with failures (as with Flower's SecAgg+).

That is run config ``noise = "central"``.  The default, ``"distributed-skellam"``
(or ``"distributed-gaussian"``), moves the noise to the nodes: plain FedAvg
inside ``SecAggWorkflow(..., privacy=DistributedDP(...))``; each node clips
its update to ``clipping-norm``, rotates, rounds and adds its share of the
noise for ``epsilon``/``delta`` over ``num-server-rounds`` rounds before
masking, so the server never holds a noiseless aggregate.  The ledger and
the trust statement are written to ``output-dir``.
"""

from __future__ import annotations

from flwr.app import Context, UserConfig
from flwr.common import Metrics, ndarrays_to_parameters
from flwr.server import LegacyContext, ServerConfig
from flwr.server.strategy import DifferentialPrivacyClientSideFixedClipping, FedAvg, Strategy
from flwr.server.workflow import DefaultWorkflow
from flwr.serverapp import Grid, ServerApp

from privfed.flower import DistributedDP, SecAggWorkflow
from privfed_dp_training.task import get_weights, input_shape, make_net


def weighted_average(metrics: list[tuple[int, Metrics]]) -> Metrics:
    """The example-weighted mean of every numeric metric.

    Under privfed a fit round hands the strategy one result whose metrics are
    already the securely aggregated weighted means: this returns them as they are.
    """
    examples = max(sum(n for n, _ in metrics), 1)
    names = {k for _, m in metrics for k, v in m.items() if isinstance(v, int | float)}
    return {k: sum(n * float(m.get(k, 0.0)) for n, m in metrics) / examples for k in sorted(names)}


def number(run_config: UserConfig, key: str) -> int | float:
    """Run-config ``key`` as a number (an int stays an int).

    Raises:
        TypeError: The value is not a number.
    """
    value = run_config[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"run config {key!r} must be a number, got {value!r}")
    return value


def distributed_dp(run_config: UserConfig, model_size: int) -> DistributedDP | None:
    """The run config's distributed DP (``None`` for ``noise = "central"``).

    Raises:
        ValueError: ``noise`` is not one of the three choices.
    """
    noise = str(run_config.get("noise", "distributed-skellam"))
    mechanisms = {"distributed-skellam": "skellam", "distributed-gaussian": "discrete-gaussian"}
    if noise == "central":
        return None
    if noise not in mechanisms:
        raise ValueError(f"run config noise must be central or {sorted(mechanisms)}: {noise!r}")
    output = str(run_config.get("output-dir", ""))
    return DistributedDP(
        float(number(run_config, "epsilon")),
        float(number(run_config, "delta")),
        rounds=int(number(run_config, "num-server-rounds")),
        clip_norm=float(number(run_config, "clipping-norm")),
        num_clients=int(number(run_config, "num-sampled-clients")),
        mechanism=mechanisms[noise],  # type: ignore[arg-type]
        ring_bits=int(number(run_config, "ring-bits")),
        model_size=model_size,
        output_dir=output or None,
    )


def fit_workflow(run_config: UserConfig, privacy: DistributedDP | None = None) -> SecAggWorkflow:
    """privfed's workflow with the run config's SecAgg+ arguments (``timeout`` 0: wait for all)."""
    timeout = float(number(run_config, "timeout"))
    return SecAggWorkflow(
        num_shares=number(run_config, "num-shares"),
        reconstruction_threshold=number(run_config, "reconstruction-threshold"),
        max_weight=float(number(run_config, "max-weight")),
        clipping_range=float(number(run_config, "clipping-range")),
        quantization_range=int(number(run_config, "quantization-range")),
        timeout=timeout if timeout > 0 else None,
        corrupted=int(number(run_config, "corrupted")) if "corrupted" in run_config else 0,
        privacy=privacy,
    )


def report(workflow: SecAggWorkflow) -> None:
    """One stdout line per round (``flwr run --stream`` shows them): who was aggregated."""
    for r in workflow.reports:
        outcome = f"skipped ({r.skipped})" if r.skipped else "securely aggregated"
        print(
            f"privfed: round {r.round_index}: {len(r.survivors)} of {len(r.nodes)} nodes "
            f"{outcome} in {sum(r.seconds.values()):.2f} s",
            flush=True,
        )
    if workflow.privacy is not None and workflow.privacy.plan is not None:
        plan, spent = workflow.privacy.plan, workflow.privacy.ledger
        epsilon = spent.epsilon(plan.delta) if spent.releases else 0.0
        print(
            f"privfed: distributed {plan.mechanism} noise, {plan.ring_bits} bits per coordinate, "
            f"epsilon spent {epsilon:.3f} of {plan.epsilon} (delta {plan.delta:g})",
            flush=True,
        )


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run ``num-server-rounds`` rounds of central-DP FedAvg, each securely aggregated."""
    cfg = context.run_config
    weights = get_weights(make_net(input_shape(str(cfg["npz-path"]))))
    parameters = ndarrays_to_parameters(weights)
    sampled = int(number(cfg, "num-sampled-clients"))
    privacy = distributed_dp(cfg, sum(w.size for w in weights))  # every DP error: here
    strategy = FedAvg(
        fraction_fit=0.0,  # sample exactly min_fit_clients = num-sampled-clients nodes
        fraction_evaluate=0.0,
        min_fit_clients=sampled,
        min_available_clients=sampled,
        fit_metrics_aggregation_fn=weighted_average,
        initial_parameters=parameters,
        # fixedclipping_mod reads the clip (the nodes' DP encoding clips to it as well)
        on_fit_config_fn=lambda _: {"clipping_norm": float(number(cfg, "clipping-norm"))},
    )
    chosen: Strategy = strategy
    if privacy is None:  # central DP: the server adds the noise
        chosen = DifferentialPrivacyClientSideFixedClipping(
            strategy,
            noise_multiplier=float(number(cfg, "noise-multiplier")),
            clipping_norm=float(number(cfg, "clipping-norm")),
            num_sampled_clients=sampled,
        )
    legacy = LegacyContext(
        context=context,
        config=ServerConfig(num_rounds=int(number(cfg, "num-server-rounds"))),
        strategy=chosen,
    )
    workflow = fit_workflow(cfg, privacy)
    DefaultWorkflow(fit_workflow=workflow)(grid, legacy)
    report(workflow)
