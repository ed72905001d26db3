"""privfed on Flower: secure aggregation and the one-shot jobs as Flower apps.

Flower (``flwr``, extra ``privfed[flower]``) is privfed's distributed engine:
the same protocol state machines and job stages, with real clients in
separate processes or machines, over Flower's Message API.

* Client: :func:`add_secagg_handlers` puts ``SecAggClient`` behind query
  handlers of a ``ClientApp`` (message types ``query.privfed_secagg_*``), with
  its state in ``Context.state`` through the versioned state codec and a
  durable reveal journal against rollback.
* Server: :class:`SecAggRound` drives ``SecAggServer`` from a
  ``ServerApp`` with ``Grid.send_and_receive`` and stage timeouts; the sender
  of each reply is the Flower node that sent it.
* Node policy: :class:`NodePolicy` (:mod:`privfed.flower.policy`), the node
  operator's -- security mode, minimum threshold, n_C, identity key and
  registry, from the node config -- checked against every proposed round
  before any key exists; the active mode over Flower rests on it.
* Noise declarations: a node's masked input says what noise it added
  (:class:`NoiseDeclaration`); the workflow refuses inputs whose declaration
  is missing or not the job's plan (:mod:`privfed.flower.declaration`).
* The one ClientApp of privfed's jobs: :func:`privfed.flower.node_app.make_client_app`
  (every entry point runs it).
* Training: :func:`secagg_mod` (a Flower Mod, where ``secaggplus_mod``
  goes) with :class:`SecAggWorkflow` (a ``fit_workflow`` for
  ``DefaultWorkflow`` and the legacy strategies, where ``SecAggPlusWorkflow``
  goes) or :class:`SecAggGrid` (any Message-API strategy's
  ``start(grid=SecAggGrid(grid, workflow), ...)``): the strategy receives one
  securely aggregated weighted average per round.
* Apps: :mod:`privfed.flower.secagg_app` (a secure sum),
  :mod:`privfed.flower.latent_app` (the latent-statistic job),
  :mod:`privfed.flower.factory_app` (the factory job).
* Running: ``flwr run examples/flower_app`` (simulation engine),
  :func:`run_simulation` from Python, ``scripts/flower_deploy.py`` for
  SuperLink + SuperNodes (deployment engine).

Nothing else in privfed imports this package; it imports the cores and engines.
"""

from __future__ import annotations

from privfed._deps import require

require("flwr", feature="privfed.flower")

from privfed.flower.client import (  # noqa: E402
    JOURNAL_NODE_CONFIG_KEY,
    STATE_KEY,
    add_secagg_handlers,
    default_journal,
)
from privfed.flower.declaration import DeclaredInput, NoiseDeclaration  # noqa: E402
from privfed.flower.dp_training import DistributedDP  # noqa: E402
from privfed.flower.mod import SecAggMod, secagg_mod  # noqa: E402
from privfed.flower.policy import (  # noqa: E402
    POLICY_NODE_CONFIG_KEY,
    NodePolicy,
    PolicyFiles,
    default_policy,
    load_identity_key,
    load_registry,
    write_identity_key,
)
from privfed.flower.server import (  # noqa: E402
    HELLO_TYPE,
    SecAggRound,
    SecAggRoundResult,
    hello,
    wait_for_nodes,
)
from privfed.flower.simulation import run_simulation  # noqa: E402
from privfed.flower.training import (  # noqa: E402
    SecAggWorkflow,
    SecureAggregate,
    TrainingRoundReport,
    TrainingRoundState,
)
from privfed.flower.training_grid import SecAggGrid  # noqa: E402

__all__ = [
    "HELLO_TYPE",
    "JOURNAL_NODE_CONFIG_KEY",
    "POLICY_NODE_CONFIG_KEY",
    "STATE_KEY",
    "DeclaredInput",
    "DistributedDP",
    "NodePolicy",
    "NoiseDeclaration",
    "PolicyFiles",
    "SecAggGrid",
    "SecAggMod",
    "SecAggRound",
    "SecAggRoundResult",
    "SecAggWorkflow",
    "SecureAggregate",
    "TrainingRoundReport",
    "TrainingRoundState",
    "add_secagg_handlers",
    "default_journal",
    "default_policy",
    "hello",
    "load_identity_key",
    "load_registry",
    "run_simulation",
    "secagg_mod",
    "wait_for_nodes",
    "write_identity_key",
]
