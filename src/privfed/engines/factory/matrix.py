"""The generative matrix Γ: factories per (class, client), quotas, provenance, unlearning.

The server of the factory-matrix engine (FederatedFactory, arXiv:2603.16370)
keeps one factory per (class c, client k) with the number of real images
``n_{c,k}`` it was trained on.  To synthesize ``N`` images of class c it asks
each factory of row c for a quota proportional to its count,
``Q_{c,k} = N · n_{c,k} / Σ_j n_{c,j}``, rounded by the largest-remainder
(Hamilton) rule so that the quotas are integers summing to exactly ``N``:

1. every cell receives ``floor(N · n_{c,k} / Σ_j n_{c,j})`` (exact integer
   arithmetic, no floating point);
2. the ``N − Σ floors`` leftover units go one each to the cells with the
   largest remainders ``(N · n_{c,k}) mod Σ_j n_{c,j}``;
3. ties are broken by the larger count ``n_{c,k}`` first, then by the client
   id in the matrix's canonical client order (integers ascending before
   strings ascending).

Every synthetic sample carries its provenance (sample id, class, client, the
seed of the cell's generator, index within the cell's draw).  Removing a
client (column), a class (row) or a cell drops the factories *and* every
synthetic sample they produced from the matrix's buffer, and returns an
:class:`UnlearningCertificate` naming what was removed (with the SHA-256 of
the removed weights), the ids of the dropped samples, and the registered
downstream consumers (models trained on the buffer) that used any of them
and must therefore be retrained.

Exactness.  Each cell draws from its own generator seeded by
:func:`cell_seed` ``(seed, class, client)``, which depends on no other cell.
The quotas of a class, however, depend on the counts of *all* its cells, so
a removal also invalidates the remaining samples of every affected class:
they are redrawn, with the same run seeds, from the remaining cells.  After
any removal the buffer is therefore sample-for-sample identical (up to
sample ids) to the buffer of a matrix that never held the removed cells and
ran the same synthesis calls -- a property the tests check bit for bit.

Threat model: the matrix is server state.  Unlearning here removes the
contribution from everything the matrix holds and tells the operator what
else to retrain; it cannot reach copies made outside the matrix.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
import torch

from privfed._checks import check_int, check_optional_int, check_str
from privfed._version import __version__
from privfed.engines.factory.base import (
    ClientId,
    Factory,
    tensors_sha256,
    validate_class_id,
    validate_client_id,
)
from privfed.errors import ParameterError, ParameterTypeError

__all__ = [
    "CellKey",
    "FactoryMatrix",
    "RemovedCell",
    "SampleProvenance",
    "SyntheticDataset",
    "UnlearningCertificate",
    "cell_seed",
    "largest_remainder_quotas",
]

#: A matrix cell: ``(class_id, client_id)``.
CellKey = tuple[int, ClientId]


def _client_order(client_id: ClientId) -> tuple[int, int | str]:
    """Canonical order of client ids: ints ascending, then strs ascending."""
    return (0, client_id) if isinstance(client_id, int) else (1, client_id)


def largest_remainder_quotas(counts: Mapping[ClientId, int], n_target: int) -> dict[ClientId, int]:
    """Split ``n_target`` over clients in proportion to their counts (Hamilton rule).

    Args:
        counts: Client id → sample count (ints >= 1); at least one entry.
        n_target: Total to hand out (int >= 0).

    Returns:
        Client id → quota; quotas are ints >= 0 summing to exactly
        ``n_target``, each within 1 of its exact share
        ``n_target · n_k / Σ n``.  The tie-break (larger count, then
        canonical client order) makes the result independent of the order of
        ``counts``.

    Raises:
        ParameterError: Empty ``counts``, a count < 1, or ``n_target`` < 0.
    """
    check_int("n_target", n_target, minimum=0, expected=None)
    if not counts:
        raise ParameterError("counts", "a non-empty mapping", "{}")
    for count in counts.values():
        check_int("counts", count, minimum=1, domain="ints >= 1", type_error=False)
    total = sum(counts.values())
    quotas: dict[ClientId, int] = {}
    remainders: list[tuple[int, int, tuple[int, int | str], ClientId]] = []
    for client, count in counts.items():
        quotas[client] = (n_target * count) // total
        rem = (n_target * count) % total
        remainders.append((-rem, -count, _client_order(client), client))
    leftover = n_target - sum(quotas.values())
    for _, _, _, client in sorted(remainders)[:leftover]:
        quotas[client] += 1
    return quotas


def cell_seed(seed: int, class_id: int, client_id: ClientId) -> int:
    """Seed of one cell's generator: SHA-256 of ``(seed, class, client)``, 63 bits.

    Depends only on the cell and the synthesis seed, never on which other
    cells exist, which is what makes removal exact.
    """
    payload = json.dumps(["privfed.factory-cell", seed, class_id, client_id]).encode()
    return int.from_bytes(hashlib.sha256(payload).digest()[:8], "big") >> 1


@dataclass(frozen=True)
class SampleProvenance:
    """Where one synthetic sample came from.

    Attributes:
        sample_id: Unique id within the matrix (never reused, even after removal).
        class_id: Label of the sample (the cell's class).
        client_id: Client whose factory generated it.
        run: Index of the :meth:`FactoryMatrix.synthesize` call that made it.
        cell_seed: Seed of the cell's generator in that run.
        index: Position of the sample in that cell's draw.
    """

    sample_id: int
    class_id: int
    client_id: ClientId
    run: int
    cell_seed: int
    index: int

    @property
    def cell(self) -> CellKey:
        """The ``(class_id, client_id)`` cell that produced the sample."""
        return (self.class_id, self.client_id)


@dataclass(frozen=True)
class SyntheticDataset:
    """A labelled synthetic image set with per-sample provenance.

    Attributes:
        images: float32 CPU tensor ``(N, C, H, W)`` in ``[0, 1]``.
        labels: int64 CPU tensor ``(N,)``.
        provenance: ``N`` records, aligned with ``images``.
    """

    images: torch.Tensor
    labels: torch.Tensor
    provenance: tuple[SampleProvenance, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.images, torch.Tensor) or self.images.ndim != 4:
            raise ParameterError("images", "a tensor (N, C, H, W)", type(self.images).__name__)
        n = self.images.shape[0]
        if not isinstance(self.labels, torch.Tensor) or tuple(self.labels.shape) != (n,):
            raise ParameterError("labels", f"a tensor of shape ({n},)", "mismatch")
        if len(self.provenance) != n:
            raise ParameterError("provenance", f"{n} records", len(self.provenance))

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def sample_ids(self) -> np.ndarray:
        """int64 array ``(N,)`` of sample ids."""
        return np.array([p.sample_id for p in self.provenance], dtype=np.int64)

    def cells(self) -> frozenset[CellKey]:
        """The set of cells that produced at least one sample."""
        return frozenset(p.cell for p in self.provenance)

    def class_counts(self) -> dict[int, int]:
        """Class id → number of samples."""
        out: dict[int, int] = {}
        for p in self.provenance:
            out[p.class_id] = out.get(p.class_id, 0) + 1
        return dict(sorted(out.items()))

    def select(self, keep: np.ndarray) -> SyntheticDataset:
        """The subset at boolean mask ``keep`` (shape ``(N,)``)."""
        idx = torch.from_numpy(np.flatnonzero(keep))
        return SyntheticDataset(
            images=self.images[idx],
            labels=self.labels[idx],
            provenance=tuple(p for p, k in zip(self.provenance, keep, strict=True) if k),
        )

    @staticmethod
    def concatenate(parts: Iterable[SyntheticDataset]) -> SyntheticDataset:
        """Concatenate datasets of the same image shape (at least one)."""
        items = list(parts)
        if not items:
            raise ParameterError("parts", "at least one dataset", 0)
        return SyntheticDataset(
            images=torch.cat([p.images for p in items]),
            labels=torch.cat([p.labels for p in items]),
            provenance=tuple(r for p in items for r in p.provenance),
        )


@dataclass(frozen=True)
class RemovedCell:
    """One factory removed by an unlearning operation.

    Attributes:
        class_id: Row of the cell.
        client_id: Column of the cell.
        sample_count: ``n_{c,k}`` it was registered with.
        factory_type: Its type name.
        weights_sha256: SHA-256 of its weights at removal
            (:func:`~privfed.engines.factory.base.tensors_sha256`).
    """

    class_id: int
    client_id: ClientId
    sample_count: int
    factory_type: str
    weights_sha256: str


@dataclass(frozen=True)
class UnlearningCertificate:
    """Record of an exact unlearning operation on a :class:`FactoryMatrix`.

    JSON-serialisable with :meth:`to_json`; :meth:`FactoryMatrix.verify`
    checks that nothing it names is still held.

    Attributes:
        scope: ``"client"`` (a column), ``"class"`` (a row) or ``"cell"``.
        target: The client id, class id, or ``[class_id, client_id]``.
        removed_cells: The factories removed, with weight digests.
        dropped_sample_ids: Sorted ids of every synthetic sample the
            removed cells had produced that was still in the buffer.
        regenerated_sample_ids: Sorted ids of samples of the remaining cells
            of affected classes that were replaced, because their quotas
            depended on the removed counts.
        replacement_sample_ids: Sorted ids of the samples that replaced them.
        dropped_per_class: Class id → number of samples dropped with the
            removed cells (before regeneration).
        retrain: Names of registered downstream consumers that were trained
            on samples of a removed cell or of an affected class, and must
            be retrained on the new buffer (sorted).
        matrix_digest_before: :meth:`FactoryMatrix.digest` before removal.
        matrix_digest_after: :meth:`FactoryMatrix.digest` after removal.
        issued_at: UTC time of the operation, ISO 8601.
        library_version: ``privfed.__version__``.
        membership_check: The optional membership-inference verification
            (:func:`privfed.engines.factory.unlearning.remove_client_verified`:
            AUCs against the original, unlearned and retrained outputs and the
            verdict), or ``None`` when it was not run.  Evaluation, not proof:
            exactness rests on the fields above.
    """

    scope: Literal["client", "class", "cell"]
    target: Any
    removed_cells: tuple[RemovedCell, ...]
    dropped_sample_ids: tuple[int, ...]
    regenerated_sample_ids: tuple[int, ...]
    replacement_sample_ids: tuple[int, ...]
    dropped_per_class: Mapping[int, int]
    retrain: tuple[str, ...]
    matrix_digest_before: str
    matrix_digest_after: str
    issued_at: str
    library_version: str = field(default=__version__)
    membership_check: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.scope not in ("client", "class", "cell"):
            raise ParameterError("scope", "'client', 'class' or 'cell'", self.scope)
        if not self.removed_cells or not all(
            isinstance(c, RemovedCell) for c in self.removed_cells
        ):
            raise ParameterError("removed_cells", "a non-empty tuple of RemovedCell", "invalid")
        for name in ("matrix_digest_before", "matrix_digest_after"):
            value = getattr(self, name)
            if not isinstance(value, str) or len(value) != 64:
                raise ParameterError(name, "a SHA-256 hex digest", value)
        for name in ("dropped_sample_ids", "regenerated_sample_ids", "replacement_sample_ids"):
            ids = getattr(self, name)
            if any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids):
                raise ParameterError(name, "a tuple of ints >= 0", "invalid")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary."""
        return {
            "scope": self.scope,
            "target": list(self.target) if isinstance(self.target, tuple) else self.target,
            "removed_cells": [
                {
                    "class_id": c.class_id,
                    "client_id": c.client_id,
                    "sample_count": c.sample_count,
                    "factory_type": c.factory_type,
                    "weights_sha256": c.weights_sha256,
                }
                for c in self.removed_cells
            ],
            "dropped_sample_ids": list(self.dropped_sample_ids),
            "regenerated_sample_ids": list(self.regenerated_sample_ids),
            "replacement_sample_ids": list(self.replacement_sample_ids),
            "dropped_per_class": {str(k): v for k, v in sorted(self.dropped_per_class.items())},
            "retrain": list(self.retrain),
            "matrix_digest_before": self.matrix_digest_before,
            "matrix_digest_after": self.matrix_digest_after,
            "issued_at": self.issued_at,
            "library_version": self.library_version,
            **(
                {}
                if self.membership_check is None
                else {"membership_check": dict(self.membership_check)}
            ),
        }

    def to_json(self) -> str:
        """Canonical JSON (sorted keys)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UnlearningCertificate:
        """Inverse of :meth:`to_dict`."""
        target = data["target"]
        return cls(
            scope=data["scope"],
            target=tuple(target) if isinstance(target, list) else target,
            removed_cells=tuple(RemovedCell(**c) for c in data["removed_cells"]),
            dropped_sample_ids=tuple(data["dropped_sample_ids"]),
            regenerated_sample_ids=tuple(data["regenerated_sample_ids"]),
            replacement_sample_ids=tuple(data["replacement_sample_ids"]),
            dropped_per_class={int(k): v for k, v in data["dropped_per_class"].items()},
            retrain=tuple(data["retrain"]),
            matrix_digest_before=data["matrix_digest_before"],
            matrix_digest_after=data["matrix_digest_after"],
            issued_at=data["issued_at"],
            library_version=data["library_version"],
            membership_check=data.get("membership_check"),
        )


@dataclass
class _Cell:
    factory: Factory
    count: int


class FactoryMatrix:
    """The server's generative matrix Γ of factories, with a provenance-tracked buffer.

    Rows are classes, columns clients.  A cell is either empty (no factory:
    the client holds no data of that class, or it was removed) or holds one
    fitted factory and its count ``n_{c,k}``.  Empty cells are explicit:
    :meth:`counts` shows them as 0 and :meth:`factory` returns ``None``.

    The matrix also holds a synthetic *buffer*: every sample made by
    :meth:`synthesize` that has not been removed.  Downstream users that
    train on the buffer register themselves with :meth:`record_consumer`, so
    that unlearning certificates can name what must be retrained.

    Every method validates all inputs before it changes anything; a raised
    error leaves the matrix unchanged.
    """

    def __init__(self) -> None:
        self._cells: dict[CellKey, _Cell] = {}
        self._buffer: SyntheticDataset | None = None
        self._next_sample_id = 0
        self._runs: list[tuple[int, int]] = []  # (seed, n_per_class) per synthesize call
        self._consumers: dict[str, frozenset[CellKey]] = {}

    def __repr__(self) -> str:
        return (
            f"FactoryMatrix(classes={len(self.classes)}, clients={len(self.clients)}, "
            f"factories={len(self._cells)}, buffered_samples={len(self.buffer)})"
        )

    # -- structure ---------------------------------------------------------------

    @property
    def classes(self) -> tuple[int, ...]:
        """Class ids with at least one factory, ascending."""
        return tuple(sorted({c for c, _ in self._cells}))

    @property
    def clients(self) -> tuple[ClientId, ...]:
        """Client ids with at least one factory, in canonical order."""
        return tuple(sorted({k for _, k in self._cells}, key=_client_order))

    @property
    def cells(self) -> tuple[CellKey, ...]:
        """Occupied cells, sorted by class then canonical client order."""
        return tuple(sorted(self._cells, key=lambda ck: (ck[0], _client_order(ck[1]))))

    def __len__(self) -> int:
        return len(self._cells)

    def __contains__(self, cell: object) -> bool:
        return cell in self._cells

    def factory(self, class_id: int, client_id: ClientId) -> Factory | None:
        """The factory at a cell, or ``None`` if the cell is empty."""
        cell = self._cells.get((class_id, client_id))
        return None if cell is None else cell.factory

    def count(self, class_id: int, client_id: ClientId) -> int:
        """``n_{c,k}`` of a cell (0 if empty)."""
        cell = self._cells.get((class_id, client_id))
        return 0 if cell is None else cell.count

    def counts(self) -> tuple[np.ndarray, tuple[int, ...], tuple[ClientId, ...]]:
        """The count matrix with explicit zeros for empty cells.

        Returns:
            ``(table, classes, clients)``: int64 array of shape
            ``(len(classes), len(clients))`` whose entry ``[i, j]`` is
            ``n_{classes[i], clients[j]}`` (0 = empty cell).
        """
        classes, clients = self.classes, self.clients
        table = np.zeros((len(classes), len(clients)), dtype=np.int64)
        row = {c: i for i, c in enumerate(classes)}
        col = {k: j for j, k in enumerate(clients)}
        for (c, k), cell in self._cells.items():
            table[row[c], col[k]] = cell.count
        return table, classes, clients

    def num_parameters(self) -> int:
        """Total scalar weights held (the communication cost in values)."""
        return sum(cell.factory.num_parameters for cell in self._cells.values())

    def digest(self) -> str:
        """SHA-256 over the occupied cells, their counts and weight digests."""
        rows = [
            [
                c,
                k,
                self._cells[(c, k)].count,
                tensors_sha256(self._cells[(c, k)].factory.state_tensors()),
            ]
            for c, k in self.cells
        ]
        return hashlib.sha256(json.dumps(rows).encode()).hexdigest()

    # -- registration --------------------------------------------------------------

    def register(self, class_id: int, client_id: ClientId, factory: Factory, count: int) -> None:
        """Put a fitted factory into the empty cell ``(class_id, client_id)``.

        Args:
            class_id: Class the factory generates (int >= 0).
            client_id: Client that trained it (int >= 0 or non-empty str).
            factory: A fitted object satisfying :class:`~privfed.engines.factory.Factory`.
            count: ``n_{c,k}``, the number of real images it was trained on
                (int >= 1); it sets the factory's share of each class quota.

        Raises:
            ParameterTypeError: Wrong types, or ``factory`` does not satisfy
                the protocol.
            ParameterError: Negative ids, ``count`` < 1, an unfitted factory,
                a cell already occupied, or an image shape different from the
                factories already registered.
        """
        validate_class_id(class_id)
        validate_client_id(client_id)
        check_int("count", count, minimum=1, expected=None)
        if not isinstance(factory, Factory):
            raise ParameterTypeError(
                "factory", "an object satisfying the Factory protocol", factory
            )
        if not factory.is_fitted:
            raise ParameterError("factory", "a fitted factory", "unfitted")
        if (class_id, client_id) in self._cells:
            raise ParameterError(
                "(class_id, client_id)",
                "an empty cell",
                (class_id, client_id),
                detail="remove the cell first to replace its factory",
            )
        shape = factory.manifest().image_shape
        for other in self._cells.values():
            other_shape = other.factory.manifest().image_shape
            if other_shape != shape:
                raise ParameterError("factory", f"a factory of image shape {other_shape}", shape)
            break
        self._cells[(class_id, client_id)] = _Cell(factory=factory, count=count)

    # -- quotas and synthesis ----------------------------------------------------------

    def quotas(self, n_target: int) -> dict[CellKey, int]:
        """Per-cell sample quotas for ``n_target`` samples of every class.

        Args:
            n_target: Samples per class (int >= 0).

        Returns:
            ``{(class_id, client_id): Q}`` over all occupied cells, with
            ``Σ_k Q_{c,k} = n_target`` for every class c (largest-remainder
            rule and tie-break of the module docstring).

        Raises:
            ParameterError: ``n_target`` < 0.
        """
        check_int("n_target", n_target, minimum=0, expected=None)
        out: dict[CellKey, int] = {}
        for c in self.classes:
            row = {k: cell.count for (cc, k), cell in self._cells.items() if cc == c}
            for k, q in largest_remainder_quotas(row, n_target).items():
                out[(c, k)] = q
        return dict(sorted(out.items(), key=lambda item: (item[0][0], _client_order(item[0][1]))))

    def synthesize(
        self,
        n_per_class: int,
        *,
        seed: int | None,
        classes: Iterable[int] | None = None,
    ) -> SyntheticDataset:
        """Draw a class-balanced synthetic set and append it to the buffer.

        Each cell ``(c, k)`` draws its quota from its factory with its own
        CPU generator seeded by :func:`cell_seed` ``(seed, c, k)``.

        Args:
            n_per_class: Samples per class (int >= 1).
            seed: Synthesis seed (int >= 0) for reproducible draws, or
                ``None`` to draw one from the OS.  It seeds sampling of
                already-trained public factories only; no privacy rests on it.
            classes: Classes to synthesize (default: every class with a
                factory).

        Returns:
            The new samples (labels = class ids, provenance per sample),
            ordered by class then canonical client order.

        Raises:
            ParameterError: ``n_per_class`` < 1, a bad seed, an unknown class,
                or an empty matrix.
        """
        check_int("n_per_class", n_per_class, minimum=1, expected=None)
        check_optional_int(
            "seed", seed, minimum=0, domain="an int >= 0 or None", type_error=False, secret=True
        )
        if not self._cells:
            raise ParameterError("self", "a matrix with at least one factory", "empty")
        chosen = self.classes if classes is None else tuple(classes)
        for c in chosen:
            validate_class_id(c, "classes")
            if c not in self.classes:
                raise ParameterError("classes", f"class ids in {list(self.classes)}", c)
        if seed is None:
            seed = secrets.randbits(63)
        run = len(self._runs)
        new = self._draw(self._cells, seed, n_per_class, chosen, run, self._next_sample_id)
        # Commit only after every factory sampled successfully.
        self._buffer = (
            new if self._buffer is None else SyntheticDataset.concatenate([self._buffer, new])
        )
        self._runs.append((seed, n_per_class))
        self._next_sample_id += len(new)
        return new

    @staticmethod
    def _draw(
        cells: Mapping[CellKey, _Cell],
        seed: int,
        n_per_class: int,
        classes: Iterable[int],
        run: int,
        first_id: int,
    ) -> SyntheticDataset:
        """Sample ``n_per_class`` per class of ``classes`` from ``cells`` (pure: no mutation)."""
        wanted = set(classes)
        images: list[torch.Tensor] = []
        labels: list[torch.Tensor] = []
        records: list[SampleProvenance] = []
        next_id = first_id
        for c in sorted(wanted):
            row = {k: cell.count for (cc, k), cell in cells.items() if cc == c}
            if not row:
                continue
            quotas = largest_remainder_quotas(row, n_per_class)
            for k in sorted(quotas, key=_client_order):
                q = quotas[k]
                if q == 0:
                    continue
                s = cell_seed(seed, c, k)
                batch = cells[(c, k)].factory.sample(q, torch.Generator().manual_seed(s))
                images.append(batch.to("cpu", torch.float32))
                labels.append(torch.full((q,), c, dtype=torch.int64))
                records.extend(SampleProvenance(next_id + i, c, k, run, s, i) for i in range(q))
                next_id += q
        if not images:
            return SyntheticDataset(
                images=torch.zeros((0, 1, 1, 1)),
                labels=torch.zeros((0,), dtype=torch.int64),
                provenance=(),
            )
        return SyntheticDataset(
            images=torch.cat(images), labels=torch.cat(labels), provenance=tuple(records)
        )

    @property
    def synthesis_runs(self) -> tuple[tuple[int, int], ...]:
        """``(seed, n_per_class)`` of every :meth:`synthesize` call, in order.

        Replaying them on a matrix retrained without a client reproduces what
        the unlearned buffer holds (the membership-inference unlearning check
        does so).  The seeds drive sampling of trained factories only.
        """
        return tuple(self._runs)

    @property
    def buffer(self) -> SyntheticDataset:
        """Every synthetic sample made and not removed (may be empty)."""
        if self._buffer is None:
            return SyntheticDataset(
                images=torch.zeros((0, 1, 1, 1)),
                labels=torch.zeros((0,), dtype=torch.int64),
                provenance=(),
            )
        return self._buffer

    def clear_buffer(self) -> None:
        """Drop every buffered sample (registered consumers are kept)."""
        self._buffer = None

    def record_consumer(self, name: str, dataset: SyntheticDataset) -> None:
        """Register a downstream model trained on ``dataset`` (from this matrix).

        The record keeps the set of cells the dataset's samples came from;
        unlearning certificates list ``name`` in ``retrain`` when a removed
        cell is among them.  Registering a name again replaces
        its record (e.g. after retraining).

        Raises:
            ParameterError: Empty name, or samples that this matrix did not make.
        """
        check_str("name", name, type_error=False)
        if not isinstance(dataset, SyntheticDataset):
            raise ParameterTypeError("dataset", "a SyntheticDataset", dataset)
        ids = dataset.sample_ids
        if ids.size and int(ids.max()) >= self._next_sample_id:
            raise ParameterError("dataset", "samples made by this matrix", "unknown sample ids")
        self._consumers[name] = dataset.cells()

    @property
    def consumers(self) -> tuple[str, ...]:
        """Names of registered downstream consumers, sorted."""
        return tuple(sorted(self._consumers))

    # -- unlearning --------------------------------------------------------------------

    def remove_client(self, client_id: ClientId) -> UnlearningCertificate:
        """Exactly unlearn a client: drop its column and all samples it produced.

        Raises:
            ParameterError: ``client_id`` holds no factory.
        """
        validate_client_id(client_id)
        return self._remove_line("client", client_id)

    def remove_class(self, class_id: int) -> UnlearningCertificate:
        """Exactly unlearn a class: drop its row and all samples it produced.

        Raises:
            ParameterError: ``class_id`` holds no factory.
        """
        validate_class_id(class_id)
        return self._remove_line("class", class_id)

    def remove_cell(self, class_id: int, client_id: ClientId) -> UnlearningCertificate:
        """Exactly unlearn one (class, client) factory and its samples.

        Raises:
            ParameterError: The cell is empty.
        """
        validate_class_id(class_id)
        validate_client_id(client_id)
        if (class_id, client_id) not in self._cells:
            raise ParameterError("(class_id, client_id)", "an occupied cell", (class_id, client_id))
        return self._remove([(class_id, client_id)], "cell", (class_id, client_id))

    def _remove_line(self, scope: Literal["client", "class"], target: Any) -> UnlearningCertificate:
        """Remove the column of client ``target`` or the row of class ``target``."""
        axis, held = (1, self.clients) if scope == "client" else (0, self.classes)
        cells = [ck for ck in self.cells if ck[axis] == target]
        if not cells:
            raise ParameterError(f"{scope}_id", f"a {scope} in {list(held)}", target)
        return self._remove(cells, scope, target)

    def _remove(
        self, cells: list[CellKey], scope: Literal["client", "class", "cell"], target: Any
    ) -> UnlearningCertificate:
        before = self.digest()
        removed = tuple(
            RemovedCell(
                class_id=c,
                client_id=k,
                sample_count=self._cells[(c, k)].count,
                factory_type=str(getattr(self._cells[(c, k)].factory, "factory_type", "unknown")),
                weights_sha256=tensors_sha256(self._cells[(c, k)].factory.state_tensors()),
            )
            for c, k in cells
        )
        gone = set(cells)
        remaining = {ck: cell for ck, cell in self._cells.items() if ck not in gone}
        remaining_classes = {c for c, _ in remaining}
        affected = {c for c, _ in cells} & remaining_classes
        buffer = self.buffer
        from_removed = np.array([p.cell in gone for p in buffer.provenance], dtype=bool)
        stale = np.array(
            [p.class_id in affected and p.cell not in gone for p in buffer.provenance], dtype=bool
        )
        dropped_ids = tuple(
            sorted(p.sample_id for p, d in zip(buffer.provenance, from_removed, strict=True) if d)
        )
        regenerated_ids = tuple(
            sorted(p.sample_id for p, d in zip(buffer.provenance, stale, strict=True) if d)
        )
        per_class: dict[int, int] = {}
        for p, d in zip(buffer.provenance, from_removed, strict=True):
            if d:
                per_class[p.class_id] = per_class.get(p.class_id, 0) + 1
        # Redraw the affected classes of every run that produced them, from
        # the remaining cells only, with the run's own seed.  This samples
        # (and may fail) before anything is changed.
        runs_touched = sorted(
            {p.run for p, d in zip(buffer.provenance, from_removed | stale, strict=True) if d}
        )
        parts = [buffer.select(~(from_removed | stale))] if len(buffer) else []
        next_id = self._next_sample_id
        replacement: list[int] = []
        for run in runs_touched:
            run_classes = {
                p.class_id
                for p, d in zip(buffer.provenance, from_removed | stale, strict=True)
                if d and p.run == run
            } & affected
            if not run_classes:
                continue
            seed, n_per_class = self._runs[run]
            redrawn = self._draw(remaining, seed, n_per_class, run_classes, run, next_id)
            replacement.extend(int(i) for i in redrawn.sample_ids)
            next_id += len(redrawn)
            parts.append(redrawn)
        new_buffer = _canonical(SyntheticDataset.concatenate(parts)) if parts else None
        touched_classes = {c for c, _ in cells}
        retrain = tuple(
            sorted(
                # A consumer is matched on the cells its training set came
                # from, so a cleared buffer does not hide what it used.
                name
                for name, used in self._consumers.items()
                if used & gone or {c for c, _ in used} & touched_classes
            )
        )
        # Mutation starts here; nothing below can fail on user input.
        for ck in cells:
            del self._cells[ck]
        self._buffer = new_buffer if new_buffer is not None and len(new_buffer) else None
        self._next_sample_id = next_id
        after = self.digest()
        return UnlearningCertificate(
            scope=scope,
            target=target,
            removed_cells=removed,
            dropped_sample_ids=dropped_ids,
            regenerated_sample_ids=regenerated_ids,
            replacement_sample_ids=tuple(sorted(replacement)),
            dropped_per_class=dict(sorted(per_class.items())),
            retrain=retrain,
            matrix_digest_before=before,
            matrix_digest_after=after,
            issued_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )

    def verify(self, certificate: UnlearningCertificate) -> bool:
        """Check that nothing named by ``certificate`` is still held.

        True iff no removed cell holds a factory with the removed weight
        digest and no dropped or regenerated sample id is in the buffer.  (A cell may be
        legitimately re-registered later with a newly trained factory.)
        """
        removed = {(c.class_id, c.client_id): c.weights_sha256 for c in certificate.removed_cells}
        for ck, sha in removed.items():
            cell = self._cells.get(ck)
            if cell is not None and tensors_sha256(cell.factory.state_tensors()) == sha:
                return False
        dropped = set(certificate.dropped_sample_ids) | set(certificate.regenerated_sample_ids)
        return not any(p.sample_id in dropped for p in self.buffer.provenance)


def _canonical(dataset: SyntheticDataset) -> SyntheticDataset:
    """Order samples by (run, class, canonical client, index): synthesis order."""
    order = sorted(
        range(len(dataset)),
        key=lambda i: (
            dataset.provenance[i].run,
            dataset.provenance[i].class_id,
            _client_order(dataset.provenance[i].client_id),
            dataset.provenance[i].index,
        ),
    )
    idx = torch.tensor(order, dtype=torch.int64)
    return SyntheticDataset(
        images=dataset.images[idx],
        labels=dataset.labels[idx],
        provenance=tuple(dataset.provenance[i] for i in order),
    )
