"""privfed_secagg_training: the ServerApp (FedAvg in ``DefaultWorkflow`` with privfed's workflow).

Flower's ``examples/flower-secure-aggregation`` server with one change: the
``fit_workflow`` is privfed's ``SecAggWorkflow`` instead of Flower's
``SecAggPlusWorkflow`` (same arguments).  FedAvg receives one result per round,
the securely aggregated weighted average of the nodes' weights.
"""

from __future__ import annotations

from flwr.app import Context, UserConfig
from flwr.common import Metrics, ndarrays_to_parameters
from flwr.server import LegacyContext, ServerConfig
from flwr.server.strategy import FedAvg
from flwr.server.workflow import DefaultWorkflow
from flwr.serverapp import Grid, ServerApp

from privfed.flower import SecAggWorkflow
from privfed_secagg_training.task import get_weights, input_shape, make_net


def weighted_average(metrics: list[tuple[int, Metrics]]) -> Metrics:
    """The example-weighted mean of every numeric metric.

    Under privfed a fit round hands the strategy one result whose metrics are
    already the securely aggregated weighted means: this returns them as they are.
    """
    examples = max(sum(n for n, _ in metrics), 1)
    names = {k for _, m in metrics for k, v in m.items() if isinstance(v, int | float)}
    return {k: sum(n * float(m.get(k, 0.0)) for n, m in metrics) / examples for k in sorted(names)}


def report(workflow: SecAggWorkflow) -> None:
    """One stdout line per round (``flwr run --stream`` shows them): who was aggregated."""
    for r in workflow.reports:
        outcome = f"skipped ({r.skipped})" if r.skipped else "securely aggregated"
        print(
            f"privfed: round {r.round_index}: {len(r.survivors)} of {len(r.nodes)} nodes "
            f"{outcome} in {sum(r.seconds.values()):.2f} s",
            flush=True,
        )


def number(run_config: UserConfig, key: str) -> int | float:
    """Run-config ``key`` as a number (an int stays an int).

    Raises:
        TypeError: The value is not a number.
    """
    value = run_config[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"run config {key!r} must be a number, got {value!r}")
    return value


def fit_workflow(run_config: UserConfig) -> SecAggWorkflow:
    """privfed's workflow with the run config's SecAgg+ arguments (``timeout`` 0: wait for all)."""
    timeout = float(number(run_config, "timeout"))
    return SecAggWorkflow(
        num_shares=number(run_config, "num-shares"),
        reconstruction_threshold=number(run_config, "reconstruction-threshold"),
        max_weight=float(number(run_config, "max-weight")),
        clipping_range=float(number(run_config, "clipping-range")),
        quantization_range=int(number(run_config, "quantization-range")),
        timeout=timeout if timeout > 0 else None,
    )


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run ``num-server-rounds`` rounds of FedAvg, each securely aggregated by privfed."""
    cfg = context.run_config
    parameters = ndarrays_to_parameters(get_weights(make_net(input_shape(str(cfg["npz-path"])))))
    strategy = FedAvg(
        fraction_fit=float(number(cfg, "fraction-train")),
        fraction_evaluate=float(number(cfg, "fraction-evaluate")),
        fit_metrics_aggregation_fn=weighted_average,
        evaluate_metrics_aggregation_fn=weighted_average,
        initial_parameters=parameters,
    )
    legacy = LegacyContext(
        context=context,
        config=ServerConfig(num_rounds=int(number(cfg, "num-server-rounds"))),
        strategy=strategy,
    )
    workflow = fit_workflow(cfg)
    DefaultWorkflow(fit_workflow=workflow)(grid, legacy)
    report(workflow)
