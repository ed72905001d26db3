"""FactoryMatrix: quotas, registration, synthesis with provenance, exact unlearning."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from factory_stubs import StubFactory, tag_of
from hypothesis import given
from hypothesis import strategies as st

from privfed.engines.factory import (
    FactoryMatrix,
    SyntheticDataset,
    UnlearningCertificate,
    cell_seed,
    largest_remainder_quotas,
)
from privfed.errors import ParameterError, ParameterTypeError

# -- quotas -----------------------------------------------------------------------


def test_quota_known_answer() -> None:
    # Exact shares 10*20/27 = 7.41 and 10*7/27 = 2.59: floors 7 and 2, the
    # leftover unit goes to the larger remainder (70 mod 27 = 16 > 200 mod 27 = 11).
    assert largest_remainder_quotas({"a": 20, "b": 7}, 10) == {"a": 7, "b": 3}


def test_quota_tie_break_prefers_larger_count_then_client_order() -> None:
    # Shares 0.5 and 1.5 have equal remainders: the larger count wins the unit.
    assert largest_remainder_quotas({"x": 1, "y": 3}, 2) == {"x": 0, "y": 2}
    # Equal counts and remainders: ints before strs, ascending.
    assert largest_remainder_quotas({"b": 1, 0: 1, "a": 1}, 1) == {"b": 0, 0: 1, "a": 0}
    assert largest_remainder_quotas({3: 1, 1: 1, 2: 1}, 2) == {3: 0, 1: 1, 2: 1}


@given(
    counts=st.lists(st.integers(1, 10_000), min_size=1, max_size=12),
    n_target=st.integers(0, 5_000),
    order_seed=st.integers(0, 2**32 - 1),
)
def test_quota_properties(counts: list[int], n_target: int, order_seed: int) -> None:
    mapping = {k: c for k, c in enumerate(counts)}
    quotas = largest_remainder_quotas(mapping, n_target)
    total = sum(counts)
    assert sum(quotas.values()) == n_target
    for k, c in mapping.items():
        # Within one unit of the exact share (integer arithmetic: |Q*total - N*c| < total).
        assert abs(quotas[k] * total - n_target * c) < total
    for i in mapping:
        for j in mapping:
            if mapping[i] > mapping[j]:
                assert quotas[i] >= quotas[j]
    # The result does not depend on the order of the mapping.
    items = list(mapping.items())
    random.Random(order_seed).shuffle(items)
    assert largest_remainder_quotas(dict(items), n_target) == quotas


@pytest.mark.parametrize(
    ("counts", "n_target", "error"),
    [
        ({}, 5, ParameterError),
        ({"a": 0}, 5, ParameterError),
        ({"a": -2}, 5, ParameterError),
        ({"a": 2}, -1, ParameterError),
        ({"a": 2}, True, ParameterTypeError),
        ({"a": 2.0}, 3, ParameterError),
    ],
)
def test_quota_rejects_bad_input(counts: dict, n_target: object, error: type) -> None:
    with pytest.raises(error):
        largest_remainder_quotas(counts, n_target)  # type: ignore[arg-type]


# -- helpers ---------------------------------------------------------------------------


def build(cells: dict[tuple[int, int | str], int]) -> FactoryMatrix:
    matrix = FactoryMatrix()
    for (c, k), n in cells.items():
        matrix.register(c, k, StubFactory(tag_of(c, k)), n)
    return matrix


def sample_cells(dataset: SyntheticDataset) -> set[tuple[int, int | str]]:
    """Cells recovered from the IMAGES (not the provenance), via the stub tags."""
    tags = {}
    for p, img in zip(dataset.provenance, dataset.images, strict=True):
        tags[p.cell] = float(img[0, 1, 1])
        assert float(img[0, 1, 1]) == pytest.approx(tag_of(*p.cell))
    return set(tags)


CELLS = {(0, 0): 30, (0, 1): 10, (1, 1): 5, (1, "h"): 15, (2, 0): 8}


# -- registration ----------------------------------------------------------------------


def test_counts_show_empty_cells_explicitly() -> None:
    matrix = build(CELLS)
    table, classes, clients = matrix.counts()
    assert classes == (0, 1, 2)
    assert clients == (0, 1, "h")
    np.testing.assert_array_equal(table, [[30, 10, 0], [0, 5, 15], [8, 0, 0]])
    assert matrix.factory(2, 1) is None
    assert matrix.count(2, 1) == 0
    assert (2, 0) in matrix and (2, 1) not in matrix


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((0, 0, "factory", 3), ParameterTypeError),  # not a factory
        ((-1, 0, None, 3), ParameterError),
        ((True, 0, None, 3), ParameterTypeError),
        ((0, -4, None, 3), ParameterError),
        ((0, "", None, 3), ParameterError),
        ((0, 2.5, None, 3), ParameterTypeError),
        ((0, 2, None, 0), ParameterError),
        ((0, 2, None, -3), ParameterError),
        ((0, 2, None, 3.0), ParameterTypeError),
        ((0, 0, None, 3), ParameterError),  # duplicate of an occupied cell
    ],
)
def test_register_rejects_bad_input_and_leaves_matrix_unchanged(args: tuple, error: type) -> None:
    matrix = build(CELLS)
    matrix.synthesize(4, seed=1)
    before = (matrix.digest(), matrix.counts()[0].tolist(), len(matrix.buffer))
    c, k, factory, n = args
    with pytest.raises(error):
        matrix.register(c, k, StubFactory(0.5) if factory is None else factory, n)
    assert (matrix.digest(), matrix.counts()[0].tolist(), len(matrix.buffer)) == before


def test_register_rejects_other_image_shape() -> None:
    matrix = build(CELLS)
    with pytest.raises(ParameterError, match="image shape"):
        matrix.register(5, 5, StubFactory(0.5, shape=(1, 8, 8)), 3)
    assert (5, 5) not in matrix


# -- synthesis --------------------------------------------------------------------------


def test_quotas_sum_per_class_and_synthesis_is_balanced() -> None:
    matrix = build(CELLS)
    quotas = matrix.quotas(7)
    assert set(quotas) == set(CELLS)
    for c in (0, 1, 2):
        assert sum(q for (cc, _), q in quotas.items() if cc == c) == 7
    data = matrix.synthesize(7, seed=3)
    assert data.class_counts() == {0: 7, 1: 7, 2: 7}
    assert torch.equal(data.labels, torch.tensor([p.class_id for p in data.provenance]))
    assert sample_cells(data) == {ck for ck, q in quotas.items() if q}
    for p in data.provenance:
        assert p.cell_seed == cell_seed(3, p.class_id, p.client_id)
    assert len(set(data.sample_ids.tolist())) == len(data)


def test_synthesis_is_reproducible_and_cells_are_independent() -> None:
    first = build(CELLS).synthesize(9, seed=11)
    second = build(CELLS).synthesize(9, seed=11)
    assert torch.equal(first.images, second.images)
    other = build(CELLS).synthesize(9, seed=12)
    assert not torch.equal(first.images, other.images)
    # A cell's draw depends only on (seed, class, client): class 2 has a single
    # cell in both matrices, so its samples agree although class 0 differs.
    smaller = build({(0, 0): 1, (2, 0): 8}).synthesize(9, seed=11)
    a = first.images[first.labels == 2]
    b = smaller.images[smaller.labels == 2]
    assert torch.equal(a, b)


def test_synthesize_validates_before_sampling() -> None:
    matrix = build(CELLS)
    for bad in (0, -1, 2.0, True):
        with pytest.raises((ParameterError, ParameterTypeError)):
            matrix.synthesize(bad, seed=0)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        matrix.synthesize(3, seed=-1)
    with pytest.raises(ParameterError):
        matrix.synthesize(3, seed=0, classes=[7])
    with pytest.raises(ParameterError):
        FactoryMatrix().synthesize(3, seed=0)
    assert len(matrix.buffer) == 0


class _Broken(StubFactory):
    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        raise RuntimeError("factory failed")


def test_failed_synthesis_leaves_buffer_unchanged() -> None:
    matrix = build(CELLS)
    matrix.synthesize(5, seed=0)
    snapshot = matrix.buffer
    matrix.register(3, 0, _Broken(0.9), 4)
    with pytest.raises(RuntimeError):
        matrix.synthesize(5, seed=1)
    assert matrix.buffer is snapshot
    # Sample ids continue where they were: no id was consumed by the failure.
    new = matrix.synthesize(5, seed=1, classes=[0])
    assert int(new.sample_ids.min()) == len(snapshot)


# -- unlearning --------------------------------------------------------------------------


def _canonical_view(data: SyntheticDataset) -> list[tuple]:
    """Buffer content without sample ids: what must match a never-registered matrix."""
    return [
        (p.run, p.class_id, str(p.client_id), p.cell_seed, p.index, img.numpy().tobytes())
        for p, img in zip(data.provenance, data.images, strict=True)
    ]


def test_remove_client_drops_everything_it_produced() -> None:
    matrix = build(CELLS)
    matrix.synthesize(6, seed=5)
    matrix.synthesize(4, seed=6)
    before_ids = set(matrix.buffer.sample_ids.tolist())
    from_client = {p.sample_id for p in matrix.buffer.provenance if p.client_id == 1}
    cert = matrix.remove_client(1)
    assert cert.scope == "client" and cert.target == 1
    assert {(c.class_id, c.client_id) for c in cert.removed_cells} == {(0, 1), (1, 1)}
    assert set(cert.dropped_sample_ids) == from_client
    assert set(cert.dropped_sample_ids) <= before_ids
    buffer = matrix.buffer
    assert all(p.client_id != 1 for p in buffer.provenance)
    assert all(k != 1 for _, k in sample_cells(buffer))
    assert not set(buffer.sample_ids.tolist()) & set(cert.dropped_sample_ids)
    assert not set(buffer.sample_ids.tolist()) & set(cert.regenerated_sample_ids)
    assert buffer.class_counts() == {0: 10, 1: 10, 2: 10}  # still balanced
    assert matrix.verify(cert)
    assert 1 not in matrix.clients
    assert cert.matrix_digest_after == matrix.digest() != cert.matrix_digest_before


def test_certificate_is_json_and_round_trips() -> None:
    matrix = build(CELLS)
    matrix.synthesize(5, seed=0)
    cert = matrix.remove_cell(1, "h")
    text = cert.to_json()
    data = json.loads(text)
    assert data["scope"] == "cell" and data["target"] == [1, "h"]
    assert len(data["removed_cells"][0]["weights_sha256"]) == 64
    again = UnlearningCertificate.from_dict(data)
    assert again == cert


CELL_SPACE = [(c, k) for c in range(3) for k in (0, 1, 2, "s")]


@given(seed=st.integers(0, 2**32 - 1))
def test_unlearning_is_exact(seed: int) -> None:
    """After any removal the buffer equals that of a matrix that never held the cells."""
    rng = random.Random(seed)
    cells = {ck: rng.randint(1, 50) for ck in rng.sample(CELL_SPACE, rng.randint(2, 8))}
    calls = [(rng.randint(1, 9), rng.randint(0, 999)) for _ in range(rng.randint(1, 3))]
    matrix = build(cells)
    for n, s in calls:
        matrix.synthesize(n, seed=s)
    kind = rng.choice(["client", "class", "cell"])
    victim = rng.choice(sorted(cells, key=str))
    if kind == "client":
        cert = matrix.remove_client(victim[1])
        gone = {ck for ck in cells if ck[1] == victim[1]}
    elif kind == "class":
        cert = matrix.remove_class(victim[0])
        gone = {ck for ck in cells if ck[0] == victim[0]}
    else:
        cert = matrix.remove_cell(*victim)
        gone = {victim}
    assert {(c.class_id, c.client_id) for c in cert.removed_cells} == gone
    assert matrix.verify(cert)
    assert not {p.cell for p in matrix.buffer.provenance} & gone
    reference = build({ck: n for ck, n in cells.items() if ck not in gone})
    if len(reference):
        for n, s in calls:
            reference.synthesize(n, seed=s)
    assert _canonical_view(matrix.buffer) == _canonical_view(reference.buffer)
    assert torch.equal(matrix.buffer.labels, reference.buffer.labels)


def test_consumers_that_used_removed_cells_must_retrain() -> None:
    matrix = build(CELLS)
    everything = matrix.synthesize(4, seed=0)
    only_class_2 = matrix.synthesize(4, seed=1, classes=[2])
    matrix.record_consumer("model-all", everything)
    matrix.record_consumer("model-2", only_class_2)
    matrix.clear_buffer()  # a cleared buffer must not hide what consumers used
    cert = matrix.remove_client("h")
    assert cert.retrain == ("model-all",)
    assert cert.dropped_sample_ids == ()  # nothing buffered any more
    with pytest.raises(ParameterError):
        matrix.record_consumer("", everything)


def test_removing_last_cell_of_a_class_removes_the_class() -> None:
    matrix = build(CELLS)
    matrix.synthesize(3, seed=0)
    cert = matrix.remove_cell(2, 0)
    assert 2 not in matrix.classes
    assert cert.dropped_per_class == {2: 3}
    assert cert.regenerated_sample_ids == ()
    assert matrix.buffer.class_counts() == {0: 3, 1: 3}


def test_remove_class_drops_row() -> None:
    matrix = build(CELLS)
    matrix.synthesize(3, seed=0)
    cert = matrix.remove_class(0)
    assert {(c.class_id, c.client_id) for c in cert.removed_cells} == {(0, 0), (0, 1)}
    assert matrix.classes == (1, 2)
    assert matrix.buffer.class_counts() == {1: 3, 2: 3}
    assert matrix.verify(cert)


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.remove_client(9),
        lambda m: m.remove_client("nobody"),
        lambda m: m.remove_client(-1),
        lambda m: m.remove_class(7),
        lambda m: m.remove_class(-1),
        lambda m: m.remove_cell(2, 1),
        lambda m: m.remove_cell(0, ""),
    ],
)
def test_bad_removal_leaves_matrix_unchanged(call: object) -> None:
    matrix = build(CELLS)
    matrix.synthesize(3, seed=0)
    before = (matrix.digest(), _canonical_view(matrix.buffer))
    with pytest.raises(ParameterError):
        call(matrix)  # type: ignore[operator]
    assert (matrix.digest(), _canonical_view(matrix.buffer)) == before


def test_cell_can_be_re_registered_after_removal() -> None:
    matrix = build(CELLS)
    cert = matrix.remove_cell(0, 0)
    matrix.register(0, 0, StubFactory(0.77), 30)
    # The new factory has other weights, so the certificate still verifies.
    assert matrix.verify(cert)
    matrix.remove_cell(0, 0)
    matrix.register(0, 0, StubFactory(tag_of(0, 0)), 30)
    assert not matrix.verify(cert)


def test_certificate_rejects_malformed_fields() -> None:
    matrix = build(CELLS)
    data = matrix.remove_cell(0, 0).to_dict()
    for key, value in (
        ("scope", "everything"),
        ("removed_cells", []),
        ("matrix_digest_after", "abc"),
        ("dropped_sample_ids", [-1]),
    ):
        with pytest.raises(ParameterError):
            UnlearningCertificate.from_dict({**data, key: value})
