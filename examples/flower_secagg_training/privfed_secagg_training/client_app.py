"""privfed_secagg_training: the ClientApp (a NumPyClient behind privfed's ``secagg_mod``).

Flower's ``examples/flower-secure-aggregation`` client with one change: the mod
is privfed's ``secagg_mod`` instead of Flower's ``secaggplus_mod``.  Each train
reply (the new weights, the example count, the validation metrics) is masked
on the node; the server only ever unmasks the sum.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from flwr.app import Context
from flwr.client import Client, NumPyClient
from flwr.clientapp import ClientApp

from privfed.flower import secagg_mod
from privfed_secagg_training.task import Net, get_weights, load_data, set_weights, test, train

Arrays = list[npt.NDArray[np.float32]]


class FlowerClient(NumPyClient):
    """Trains and evaluates :class:`~privfed_secagg_training.task.Net` on this node's partition."""

    def __init__(
        self,
        trainloader: Any,
        valloader: Any,
        local_epochs: int,
        learning_rate: float,
    ) -> None:
        self.trainloader = trainloader
        self.valloader = valloader
        self.net = Net(tuple(trainloader.dataset[0][0].shape))
        self.local_epochs = local_epochs
        self.lr = learning_rate
        self.device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

    def fit(self, parameters: Arrays, config: dict[str, Any]) -> tuple[Arrays, int, dict[str, Any]]:
        """Train on this node's data: the new weights, the example count, validation metrics."""
        set_weights(self.net, parameters)
        results = train(
            self.net, self.trainloader, self.valloader, self.local_epochs, self.lr, self.device
        )
        return get_weights(self.net), len(self.trainloader.dataset), results

    def evaluate(
        self, parameters: Arrays, config: dict[str, Any]
    ) -> tuple[float, int, dict[str, Any]]:
        """Loss and accuracy of the global model on this node's held-out data."""
        set_weights(self.net, parameters)
        loss, accuracy = test(self.net, self.valloader, self.device)
        return loss, len(self.valloader.dataset), {"accuracy": accuracy}


def client_fn(context: Context) -> Client:
    """This node's client: its partition (node config) and the run's hyperparameters."""
    cfg = context.run_config
    trainloader, valloader = load_data(
        int(context.node_config["partition-id"]),
        int(context.node_config["num-partitions"]),
        int(cfg["batch-size"]),
        str(cfg["npz-path"]),
    )
    epochs, lr = int(cfg["local-epochs"]), float(cfg["lr"])
    return FlowerClient(trainloader, valloader, epochs, lr).to_client()


app = ClientApp(client_fn=client_fn, mods=[secagg_mod])
