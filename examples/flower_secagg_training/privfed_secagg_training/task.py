"""privfed_secagg_training: the model, the local data and the training loop.

The model is the CNN of Flower's ``examples/flower-secure-aggregation`` (the
CIFAR-10 network of "PyTorch: A 60 Minute Blitz"), with its input channels and
first dense layer sized from the data.  The data are local, never downloaded:
scikit-learn's bundled digits (8x8, upscaled to 32x32, the size the network
was written for) or a ``.npz`` file given as run-config ``npz-path``.  Each
node keeps partition ``partition-id`` of ``num-partitions`` (an IID split with
a fixed seed) and holds out 20% of it for evaluation.
"""

from __future__ import annotations

import functools
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F  # noqa: N812 -- PyTorch's own alias
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

#: Classes of the bundled digits (and of MNIST/CIFAR-10 files): labels are 0..9.
NUM_CLASSES = 10
#: Side the bundled 8x8 digits are upscaled to: the CIFAR-10 size of the network.
DIGITS_SIDE = 32
#: Seed of the partition and of the train/test split (every node and the server agree).
SPLIT_SEED = 42
#: Share of a partition held out for evaluation.
TEST_FRACTION = 0.2

Shape = tuple[int, int, int]


class Net(nn.Module):
    """Flower's SecAgg+ example CNN: two 5x5 convolutions with pooling, three dense layers.

    Args:
        input_shape: ``(channels, height, width)`` of one image; CIFAR-10's
            ``(3, 32, 32)`` is the original network.  Height and width must be
            at least 16.
    """

    def __init__(self, input_shape: Shape = (3, 32, 32)) -> None:
        super().__init__()
        channels, height, width = input_shape
        side_h, side_w = ((height - 4) // 2 - 4) // 2, ((width - 4) // 2 - 4) // 2
        if side_h < 1 or side_w < 1:
            raise ValueError(f"images of shape {input_shape} are too small (at least 16x16)")
        self.conv1 = nn.Conv2d(channels, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * side_h * side_w, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, NUM_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class scores (logits) of a batch ``(B, C, H, W)``."""
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)  # type: ignore[no-any-return]


def make_net(input_shape: Shape, seed: int = 0) -> Net:
    """A freshly initialised :class:`Net` (seeded: the server's initial model)."""
    torch.manual_seed(seed)
    return Net(input_shape)


def get_weights(net: nn.Module) -> list[npt.NDArray[np.float32]]:
    """The model's parameters as NumPy arrays, in ``state_dict`` order."""
    return [value.detach().cpu().numpy() for value in net.state_dict().values()]


def set_weights(net: nn.Module, parameters: list[npt.NDArray[np.float32]]) -> None:
    """Load arrays in ``state_dict`` order into the model."""
    keys = net.state_dict().keys()
    state = OrderedDict((k, torch.tensor(v)) for k, v in zip(keys, parameters, strict=True))
    net.load_state_dict(state, strict=True)


# -- data ---------------------------------------------------------------------------


def input_shape(npz_path: str = "") -> Shape:
    """``(channels, height, width)`` of the images, read without loading them.

    Raises:
        ValueError: The file's ``images`` array has no image shape.
    """
    if not npz_path:
        return (1, DIGITS_SIDE, DIGITS_SIDE)
    with zipfile.ZipFile(npz_path) as archive, archive.open("images.npy") as header:
        version = np.lib.format.read_magic(header)
        if version == (1, 0):
            shape = np.lib.format.read_array_header_1_0(header)[0]
        else:
            shape = np.lib.format.read_array_header_2_0(header)[0]
    return _image_shape(tuple(shape))


def _image_shape(shape: tuple[int, ...]) -> Shape:
    if len(shape) == 3:
        return (1, shape[1], shape[2])
    if len(shape) == 4 and shape[3] in (1, 3):
        return (shape[3], shape[1], shape[2])
    raise ValueError(f"`images` must be (N, H, W) or (N, H, W, C) with C in (1, 3), got {shape}")


@functools.lru_cache(maxsize=2)
def load_images(npz_path: str = "") -> tuple[torch.Tensor, torch.Tensor]:
    """All images ``(N, C, H, W)`` scaled to ``[-1, 1]`` and labels ``(N,)``.

    ``""``: scikit-learn's digits (values 0..16), upscaled to 32x32.  A path: a
    ``.npz`` with ``images`` (integers are divided by 255; floats are taken as
    ``[0, 1]``) and ``labels`` in ``0..9``.

    Raises:
        ValueError: Shapes or labels out of the domain above.
    """
    if not npz_path:
        from sklearn.datasets import load_digits

        digits = load_digits()
        small = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
        images = F.interpolate(small, size=(DIGITS_SIDE, DIGITS_SIDE), mode="bilinear")
        labels = torch.tensor(digits.target, dtype=torch.int64)
    else:
        with np.load(Path(npz_path)) as data:
            raw, raw_labels = data["images"], data["labels"]
        channels, height, width = _image_shape(raw.shape)
        scale = 255.0 if np.issubdtype(raw.dtype, np.integer) else 1.0
        array = raw.reshape(raw.shape[0], height, width, channels).astype(np.float32) / scale
        images = torch.from_numpy(np.ascontiguousarray(array.transpose(0, 3, 1, 2)))
        labels = torch.from_numpy(raw_labels.astype(np.int64).reshape(-1))
        if labels.shape[0] != images.shape[0]:
            raise ValueError("`images` and `labels` hold different numbers of records")
        if labels.numel() and (labels.min() < 0 or labels.max() >= NUM_CLASSES):
            raise ValueError(f"labels must be in 0..{NUM_CLASSES - 1}")
    return (images - 0.5) / 0.5, labels


def load_data(
    partition_id: int, num_partitions: int, batch_size: int, npz_path: str = ""
) -> tuple[DataLoader[tuple[torch.Tensor, ...]], DataLoader[tuple[torch.Tensor, ...]]]:
    """This node's train and test loaders (80% / 20% of its partition).

    Raises:
        ValueError: ``partition_id`` is not in ``[0, num_partitions)``, or the
            partition is too small to split.
    """
    if not 0 <= partition_id < num_partitions:
        raise ValueError(f"partition-id {partition_id} is not in [0, {num_partitions})")
    images, labels = load_images(npz_path)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    part = np.array_split(order, num_partitions)[partition_id]
    n_test = round(TEST_FRACTION * len(part))
    if n_test < 1 or n_test >= len(part):
        raise ValueError(f"partition {partition_id} holds {len(part)} records: too few to split")
    test_idx, train_idx = torch.from_numpy(part[:n_test]), torch.from_numpy(part[n_test:])
    train = TensorDataset(images[train_idx], labels[train_idx])
    test = TensorDataset(images[test_idx], labels[test_idx])
    return DataLoader(train, batch_size=batch_size, shuffle=True), DataLoader(test, batch_size)


# -- training -------------------------------------------------------------------------


def train(
    net: nn.Module,
    trainloader: DataLoader[tuple[torch.Tensor, ...]],
    valloader: DataLoader[tuple[torch.Tensor, ...]],
    epochs: int,
    learning_rate: float,
    device: torch.device,
) -> dict[str, float]:
    """SGD with momentum 0.9 for ``epochs``; the validation loss and accuracy after it."""
    net.to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=learning_rate, momentum=0.9)
    net.train()
    for _ in range(epochs):
        for images, labels in trainloader:
            optimizer.zero_grad()
            criterion(net(images.to(device)), labels.to(device)).backward()
            optimizer.step()
    val_loss, val_accuracy = test(net, valloader, device)
    return {"val_loss": val_loss, "val_accuracy": val_accuracy}


def test(
    net: nn.Module, testloader: DataLoader[tuple[torch.Tensor, ...]], device: torch.device
) -> tuple[float, float]:
    """Mean cross-entropy per record and accuracy on ``testloader``."""
    net.to(device)
    net.eval()
    criterion = nn.CrossEntropyLoss(reduction="sum")
    loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for images, labels in testloader:
            outputs = net(images.to(device))
            labels = labels.to(device)
            loss += float(criterion(outputs, labels))
            correct += int((outputs.argmax(1) == labels).sum())
            count += len(labels)
    return loss / max(count, 1), correct / max(count, 1)
