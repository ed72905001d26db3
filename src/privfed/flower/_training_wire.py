"""How a training round's update enters the ring, and what travels with it (private).

One node's contribution to a round is one ring vector in ``Z_{2**64}``:

    ``[w, w * q(x_1), ..., w * q(x_D), w * q_m(m_1), ..., w * q_m(m_K), 0, ...]``

* ``w`` is the node's example count, rounded to a whole number and capped at
  ``floor(max_weight)``;
* ``q(x) = round(clip(x, -c, c) * Q / (2c))`` for every value ``x`` of every
  float array of the update (``c = clipping_range``, ``Q =
  quantization_range``, as Flower names them), so ``|q(x)| <= ceil(Q / 2)``
  and the grid step is ``2c / Q``;
* ``q_m`` is the same map with the metric ranges, for each numeric train
  metric (``metric_slots`` slots, zero-padded).

``round`` is stochastic (unbiased: ``floor(s) + 1`` with probability
``s - floor(s)``) or to the nearest integer.  The server decodes the ring sum
as signed integers and divides by the sum of the weights: the weighted average
of the clipped values, off by less than one grid step ``2c / Q`` per
coordinate (half a step with nearest rounding), whatever the number of nodes.

No wrap-around: :meth:`TrainingEncoding.check_no_wrap` refuses ``n`` nodes
unless ``n * floor(max_weight) * max(ceil(Q / 2), ceil(Q_m / 2)) < 2**63``, so
every sum of ``n`` contributions lies in the signed range and decodes to itself.
Both sides run it before any key is made.

Everything here is public (sent in the clear): the encoding parameters, the
array layout of the round (names and shapes, from the server's train
instructions) and a node's *structure* (its reply's record names, array dtypes
and metric names).  Values never are.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import secrets
from collections.abc import Mapping
from typing import Final, Literal

import numpy as np
import numpy.typing as npt
from flwr.app import Array, ArrayRecord, RecordDict

from privfed._checks import check_choice, check_float, check_int, check_str
from privfed.dp.training import TrainingNoisePlan
from privfed.errors import (
    MessageFormatError,
    NonFiniteInputError,
    ParameterError,
    ParameterTypeError,
    RingOverflowError,
)
from privfed.flower._log import LOG
from privfed.flower._wire import RECORD as RECORD_NAME
from privfed.secagg.protocol.config import MAX_VECTOR_LENGTH

__all__ = [
    "ENCODING_FIELD",
    "FITRES_ARRAYS",
    "FITRES_METRICS",
    "FITRES_WEIGHT",
    "INSTRUCTIONS_FIELD",
    "NONCE_FIELD",
    "STAGE_FIELD",
    "STRUCTURE_FIELD",
    "ArraySpec",
    "ReplyFormat",
    "Rounding",
    "Structure",
    "TrainingEncoding",
    "array_layout",
    "dtype_and_shape",
    "instructions_digest",
    "training_session_id",
]

#: Field of the privfed record naming the stage of a training round.
STAGE_FIELD: Final = "train-stage"
#: Field of the privfed record carrying a :class:`TrainingEncoding`.
ENCODING_FIELD: Final = "encoding"
#: Advertise-stage fields that the round's session id commits to (with the encoding).
NONCE_FIELD: Final = "session-nonce"
INSTRUCTIONS_FIELD: Final = "instructions-sha256"
#: Header field of a masked input carrying the node's :class:`Structure`.
STRUCTURE_FIELD: Final = "structure"
#: Where Flower's legacy ``FitRes`` keeps its parts (``flwr.compat`` record names).
FITRES_ARRAYS: Final = "fitres.parameters"
FITRES_METRICS: Final = "fitres.metrics"
FITRES_WEIGHT: Final = ("fitres.num_examples", "num_examples")

Rounding = Literal["stochastic", "nearest"]
ReplyFormat = Literal["fitres", "message"]
_FLOATS: Final = ("float32", "float64")
_MAX_NAME: Final = 256
_MAX_SLOTS: Final = 1024
_HALF_RING: Final = 1 << 63


@dataclasses.dataclass(frozen=True)
class ArraySpec:
    """One float array of the round's layout: its name and shape (public).

    Attributes:
        name: The array's key in its ``ArrayRecord`` (legacy parameters: ``"0"``, ``"1"``, ...).
        shape: Its shape; ``()`` for a scalar array.
    """

    name: str
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        _check_name("name", self.name)
        if not isinstance(self.shape, tuple) or len(self.shape) > 32:
            raise ParameterTypeError("shape", "a tuple of at most 32 ints", self.shape)
        for dim in self.shape:
            check_int("shape", dim, minimum=0, maximum=MAX_VECTOR_LENGTH)

    @property
    def size(self) -> int:
        """Number of values."""
        return math.prod(self.shape)


def _check_name(name: str, value: object) -> str:
    text = check_str(name, value, domain=f"a non-empty str of at most {_MAX_NAME} characters")
    if len(text) > _MAX_NAME:
        raise ParameterError(name, f"a str of at most {_MAX_NAME} characters", len(text))
    return text


def array_layout(content: RecordDict) -> tuple[ArraySpec, ...]:
    """The float arrays of a train instruction, in record order: the round's layout.

    Args:
        content: What the strategy sends one node (its ArrayRecord(s) hold the model).

    Raises:
        ParameterError: An array is not float32/float64: privfed averages
            float arrays only (an integer buffer such as a batch-norm counter
            has no weighted average; keep it out of the ArrayRecord).
            Two ArrayRecords hold arrays of the same name.
    """
    specs: list[ArraySpec] = []
    seen: set[str] = set()
    for record in content.array_records.values():
        for name, array in record.items():
            dtype, shape = dtype_and_shape(array)
            if dtype not in _FLOATS:
                raise ParameterError(
                    f"array {name!r}",
                    "of dtype float32 or float64 (privfed securely averages float arrays only)",
                    dtype,
                )
            if name in seen:
                raise ParameterError("arrays", "distinct array names across ArrayRecords", name)
            seen.add(name)
            specs.append(ArraySpec(name, shape))
    return tuple(specs)


def dtype_and_shape(array: Array) -> tuple[str, tuple[int, ...]]:
    """An array's dtype name and shape, read from its ``.npy`` header if Flower left them out.

    (Legacy ``Parameters`` become Arrays without dtype and shape.)  Only the
    header is read.  Anything that is not a numpy array reads as dtype ``"?"``.
    """
    if array.dtype:
        return array.dtype, tuple(int(d) for d in array.shape)
    if array.stype != "numpy.ndarray":
        return "?", ()
    stream = io.BytesIO(array.data)
    try:
        version = np.lib.format.read_magic(stream)
        read = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read(stream)
    except Exception:  # not an .npy buffer: not an array privfed can average
        return "?", ()
    return str(np.dtype(dtype)), tuple(int(d) for d in shape)


@dataclasses.dataclass(frozen=True)
class TrainingEncoding:
    """The public encoding of one round: ranges, weight cap, layout, reply format.

    Attributes:
        arrays: The float arrays every node returns, in order (:func:`array_layout`).
        clipping_range: ``c``: values are clipped to ``[-c, c]``; finite ``> 0``.
        quantization_range: ``Q``: ``[-c, c]`` maps onto ``Q`` grid steps of
            ``2c / Q``; an int ``>= 2``.
        max_weight: A node's example count is capped at ``floor(max_weight)``;
            finite ``>= 1``.
        metric_clipping_range: ``c`` for train metrics; finite ``> 0``.
        metric_quantization_range: ``Q`` for train metrics; an int ``>= 2``.
        metric_slots: Ring slots for numeric train metrics; an int in ``[0, 1024]``.
        rounding: ``"stochastic"`` (unbiased) or ``"nearest"`` (deterministic).
        reply_format: ``"fitres"`` (a legacy ``NumPyClient``'s ``FitRes``) or
            ``"message"`` (a Message-API train handler's reply).
        weight_key: Message format: the metric holding the example count (the
            strategy's ``weighted_by_key``).
        privacy: ``None`` (the encoding above), or the run's distributed-DP
            plan: then a node's vector is its clipped, rotated, rounded and
            noised update (``privacy.dimension`` slots mod ``2**ring_bits``;
            no example count, no metrics; :mod:`privfed.flower.dp_training`).
        clip_scale: DP with adaptive clipping: the round's public clip over
            the plan's, ``C_t / C_0`` (1 otherwise), in ``[2**-20, 2**20]``.

    Raises:
        ParameterError, ParameterTypeError: A value outside its domain.
    """

    arrays: tuple[ArraySpec, ...]
    clipping_range: float = 8.0
    quantization_range: int = 2**22
    max_weight: float = 1000.0
    metric_clipping_range: float = 2.0**16
    metric_quantization_range: int = 2**36
    metric_slots: int = 8
    rounding: Rounding = "stochastic"
    reply_format: ReplyFormat = "message"
    weight_key: str = "num-examples"
    privacy: TrainingNoisePlan | None = None
    clip_scale: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.arrays, tuple) or not all(
            isinstance(a, ArraySpec) for a in self.arrays
        ):
            raise ParameterTypeError("arrays", "a tuple of ArraySpec", self.arrays)
        if len({a.name for a in self.arrays}) != len(self.arrays):
            raise ParameterError("arrays", "distinct array names", "duplicates")
        for name in ("clipping_range", "metric_clipping_range"):
            check_float(name, getattr(self, name), low=0.0, open_low=True)
        for name in ("quantization_range", "metric_quantization_range"):
            check_int(name, getattr(self, name), minimum=2, maximum=2**62)
        check_float("max_weight", self.max_weight, low=1.0)
        check_int("metric_slots", self.metric_slots, minimum=0, maximum=_MAX_SLOTS)
        check_choice("rounding", self.rounding, ("stochastic", "nearest"))
        check_choice("reply_format", self.reply_format, ("fitres", "message"))
        _check_name("weight_key", self.weight_key)
        check_float("clip_scale", self.clip_scale, low=2.0**-20, high=2.0**20)
        if self.privacy is not None:
            if not isinstance(self.privacy, TrainingNoisePlan):
                raise ParameterTypeError("privacy", "a TrainingNoisePlan or None", self.privacy)
            if self.privacy.model_size != self.model_size:
                raise ParameterError(
                    "privacy", f"a plan for {self.model_size} values", self.privacy.model_size
                )
        if self.vector_length > MAX_VECTOR_LENGTH:
            raise ParameterError(
                "arrays", f"at most {MAX_VECTOR_LENGTH} values in all", self.vector_length
            )

    # -- sizes and bounds ----------------------------------------------------------

    @property
    def model_size(self) -> int:
        """Values of all arrays."""
        return sum(a.size for a in self.arrays)

    @property
    def vector_length(self) -> int:
        """Ring slots of one contribution: weight, array values, metric slots (DP: ``d``)."""
        if self.privacy is not None:
            return self.privacy.vector_length
        return 1 + self.model_size + self.metric_slots

    @property
    def weight_cap(self) -> int:
        """The largest weight one node contributes: ``floor(max_weight)``."""
        return math.floor(self.max_weight)

    @property
    def step(self) -> float:
        """Grid step of array values, ``2c / Q`` (same unit as the values)."""
        return 2.0 * self.clipping_range / self.quantization_range

    @property
    def metric_step(self) -> float:
        """Grid step of metric values."""
        return 2.0 * self.metric_clipping_range / self.metric_quantization_range

    def max_slot_magnitude(self) -> int:
        """The largest ``|value|`` of one node's slot: ``floor(max_weight) * ceil(Q / 2)``."""
        half = max(-(-self.quantization_range // 2), -(-self.metric_quantization_range // 2), 1)
        return self.weight_cap * half

    def check_no_wrap(self, nodes: int) -> None:
        """Refuse ``nodes`` contributions whose sum could leave the signed 64-bit range.

        Raises:
            RingOverflowError: ``nodes * max_slot_magnitude() >= 2**63``.
        """
        n = check_int("nodes", nodes, minimum=1)
        if self.privacy is not None:
            if n > self.privacy.num_clients:
                raise RingOverflowError(
                    "nodes", f"at most the plan's {self.privacy.num_clients} nodes", n,
                    detail="the plan's wrap bound holds for that many noisy updates",
                )  # fmt: skip
            return
        if n * self.max_slot_magnitude() >= _HALF_RING:
            raise RingOverflowError(
                "(nodes, max_weight, quantization_range, metric_quantization_range)",
                "values with nodes * floor(max_weight) * ceil(quantization_range / 2) < 2**63",
                (n, self.max_weight, self.quantization_range, self.metric_quantization_range),
                detail="a sum could wrap around the ring; lower max_weight or a quantization range",
            )

    # -- wire ----------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Canonical JSON (public)."""
        fields = dataclasses.asdict(self)
        fields["arrays"] = [[a.name, list(a.shape)] for a in self.arrays]
        fields["privacy"] = None if self.privacy is None else self.privacy.to_dict()
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: object) -> TrainingEncoding:
        """Parse and validate :meth:`to_bytes` (from the server: never trusted).

        Raises:
            MessageFormatError: Not the JSON of a valid encoding.
        """
        try:
            if not isinstance(data, bytes) or len(data) > 64 * 2**20:
                raise ValueError("not bytes")
            fields = json.loads(data)
            if not isinstance(fields, dict) or set(fields) != {
                f.name for f in dataclasses.fields(cls)
            }:
                raise ValueError("fields")
            plan = fields.pop("privacy")
            if plan is not None:
                fields["privacy"] = TrainingNoisePlan.from_dict(plan)
            raw = fields.pop("arrays")
            if not isinstance(raw, list):
                raise ValueError("arrays")
            arrays = []
            for item in raw:
                name, shape = item
                if not isinstance(shape, list):
                    raise ValueError("shape")
                arrays.append(ArraySpec(name, tuple(shape)))
            return cls(arrays=tuple(arrays), **fields)
        except (ValueError, TypeError, RecursionError) as exc:
            raise MessageFormatError(f"malformed training encoding: {exc}") from None

    # -- node side -----------------------------------------------------------------

    def encode(self, reply: RecordDict) -> tuple[npt.NDArray[np.uint64], Structure]:
        """A node's ring vector and public structure from its train handler's reply.

        Args:
            reply: The handler's reply content (``reply_format``).

        Returns:
            The 1-D ``uint64`` vector of :attr:`vector_length` slots, and the
            reply's :class:`Structure`.

        Raises:
            ParameterError: The reply's float arrays differ from the layout
                (names, shapes), a weight is missing, negative or not finite.
            NonFiniteInputError: An array or metric holds NaN or infinity.
        """
        weight, weight_at = self._weight(reply)
        arrays = self._arrays(reply)
        metrics = self._metrics(reply, weight_at)
        w = min(weight, self.weight_cap)
        if weight > self.weight_cap:
            LOG.info("weight %d capped at max_weight %d", weight, self.weight_cap)
        out = np.zeros(self.vector_length, dtype=np.int64)
        out[0] = w
        rng = np.random.default_rng(secrets.randbits(128))
        start = 1
        for spec, (_, array) in zip(self.arrays, arrays, strict=True):
            stop = start + spec.size
            out[start:stop] = self._quantize(
                array, self.clipping_range, self.quantization_range, rng
            )
            start = stop
        values = np.asarray([v for _, v in metrics], dtype=np.float64)
        if values.size:
            out[start : start + values.size] = self._quantize(
                values, self.metric_clipping_range, self.metric_quantization_range, rng
            )
        # |q| <= ceil(Q/2) and w <= floor(max_weight): the product stays in int64.
        np.multiply(out[1:], w, out=out[1:])
        structure = Structure(
            arrays=tuple((record, str(a.dtype)) for record, a in arrays),
            metrics=tuple(name for name, _ in metrics),
            weight=weight_at,
        )
        return out.view(np.uint64), structure

    def _quantize(
        self, values: npt.NDArray[np.floating], clip: float, levels: int, rng: np.random.Generator
    ) -> npt.NDArray[np.int64]:
        x = np.asarray(values, dtype=np.float64).reshape(-1)
        if not np.isfinite(x).all():
            raise NonFiniteInputError("update", count=int(np.count_nonzero(~np.isfinite(x))))
        scaled = np.clip(x, -clip, clip) * (levels / (2.0 * clip))
        if self.rounding == "nearest":
            return np.rint(scaled).astype(np.int64)
        low = np.floor(scaled)
        return (low + (rng.random(scaled.shape) < scaled - low)).astype(np.int64)

    def _weight(self, reply: RecordDict) -> tuple[int, tuple[str, str]]:
        if self.reply_format == "fitres":
            record_name, key = FITRES_WEIGHT
            record = reply.metric_records.get(record_name)
            raw = None if record is None else record.get(key)
        else:
            key = self.weight_key
            found = [(n, r[key]) for n, r in reply.metric_records.items() if key in r]
            if len(found) != 1:
                raise ParameterError(
                    "reply", f"exactly one MetricRecord holding {key!r}", f"{len(found)} records"
                )
            record_name, raw = found[0]
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise ParameterError("weight", f"a number in the reply's {record_name!r}", None)
        value = check_float("weight", raw, low=0.0)
        return round(value), (record_name, key)

    def _arrays(self, reply: RecordDict) -> list[tuple[str, npt.NDArray[np.floating]]]:
        records = (
            {FITRES_ARRAYS: reply.array_records.get(FITRES_ARRAYS, ArrayRecord())}
            if self.reply_format == "fitres"
            else dict(reply.array_records)
        )
        found: dict[str, tuple[str, Array]] = {}
        for record_name, record in records.items():
            for name, array in record.items():
                if dtype_and_shape(array)[0] not in _FLOATS:
                    continue  # never sent: only the layout's float arrays travel, masked
                if name in found:
                    raise ParameterError("reply", "distinct float array names", name)
                found[name] = (record_name, array)
        if set(found) != {a.name for a in self.arrays}:
            raise ParameterError(
                "reply",
                "the float arrays of the train instructions (same names)",
                f"{len(found)} float arrays",
            )
        out = []
        for spec in self.arrays:
            record_name, array = found[spec.name]
            values = _numpy(array)
            if values.shape != spec.shape:
                raise ParameterError(f"array {spec.name!r}", f"shape {spec.shape}", values.shape)
            out.append((record_name, values))
        return out

    def _metrics(
        self, reply: RecordDict, weight_at: tuple[str, str]
    ) -> list[tuple[tuple[str, str], float]]:
        if self.reply_format == "fitres":
            sources: Mapping[str, Mapping[str, object]] = {
                FITRES_METRICS: reply.config_records.get(FITRES_METRICS, {})
            }
        else:
            sources = dict(reply.metric_records)
        found = sorted(
            ((record, key), float(value))
            for record, values in sources.items()
            for key, value in values.items()
            if (record, key) != weight_at
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
        )
        if len(found) > self.metric_slots:
            LOG.warning(
                "the train handler returned %d numeric metrics; privfed aggregates the first "
                "%d by name (metric_slots) and sends none of the others",
                len(found),
                self.metric_slots,
            )
            found = found[: self.metric_slots]
        return found

    # -- server side ---------------------------------------------------------------

    def decode(
        self, total: npt.NDArray[np.uint64], structure: Structure
    ) -> tuple[int, list[npt.NDArray[np.floating]], list[float]]:
        """The total weight, weighted-average arrays and weighted-average metrics of a sum.

        Args:
            total: The ring sum (``uint64``, :attr:`vector_length` slots).
            structure: The survivors' common structure (array dtypes, metric count).

        Returns:
            ``(total_weight, arrays, metrics)``; arrays in layout order with
            the structure's dtypes and the layout's shapes.  With a total weight
            of 0 the arrays and metrics are empty lists.
        """
        signed = np.asarray(total, dtype=np.uint64).view(np.int64)
        weight = int(signed[0])
        if weight <= 0:
            return weight, [], []
        arrays: list[npt.NDArray[np.floating]] = []
        start = 1
        for spec, (_, dtype) in zip(self.arrays, structure.arrays, strict=True):
            stop = start + spec.size
            mean = signed[start:stop].astype(np.float64) * (self.step / weight)
            arrays.append(mean.reshape(spec.shape).astype(dtype))
            start = stop
        count = len(structure.metrics)
        metrics = signed[start : start + count].astype(np.float64) * (self.metric_step / weight)
        return weight, arrays, [float(v) for v in metrics]


def _numpy(array: Array) -> npt.NDArray[np.floating]:
    return np.asarray(array.numpy())


@dataclasses.dataclass(frozen=True)
class Structure:
    """The public shape of one node's reply: where its parts came from (no values).

    Attributes:
        arrays: Per layout array: ``(record name, dtype)``.
        metrics: ``(record name, metric name)`` of each metric slot used, sorted.
        weight: ``(record name, key)`` of the example count.
    """

    arrays: tuple[tuple[str, str], ...]
    metrics: tuple[tuple[str, str], ...]
    weight: tuple[str, str]

    def to_bytes(self) -> bytes:
        """Canonical JSON."""
        fields = {"arrays": self.arrays, "metrics": self.metrics, "weight": self.weight}
        return json.dumps(fields, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: object, encoding: TrainingEncoding) -> Structure:
        """Parse a node's structure and check it against the round's ``encoding``.

        Raises:
            MessageFormatError: Malformed, or not a structure of this round.
        """
        try:
            if not isinstance(data, bytes) or len(data) > 16 * 2**20:
                raise ValueError("not bytes")
            fields = json.loads(data)
            if not isinstance(fields, dict) or set(fields) != {"arrays", "metrics", "weight"}:
                raise ValueError("fields")
            arrays = tuple(_pair(item) for item in fields["arrays"])
            metrics = tuple(_pair(item) for item in fields["metrics"])
            weight = _pair(fields["weight"])
        except (ValueError, TypeError, RecursionError) as exc:
            raise MessageFormatError(f"malformed reply structure: {exc}") from None
        if len(arrays) != len(encoding.arrays) or any(d not in _FLOATS for _, d in arrays):
            raise MessageFormatError("the reply structure does not match the round's arrays")
        if len(metrics) > encoding.metric_slots or list(metrics) != sorted(set(metrics)):
            raise MessageFormatError("the reply structure's metrics are not a sorted, short list")
        array_records = {record for record, _ in arrays}
        metric_records = {record for record, _ in metrics} | {weight[0]}
        if array_records & metric_records or weight in metrics:
            # One record name cannot hold both arrays and metrics in the aggregate's reply.
            raise MessageFormatError("the reply structure's record names overlap")
        return cls(arrays, metrics, weight)


def _pair(item: object) -> tuple[str, str]:
    if not isinstance(item, list) or len(item) != 2:
        raise ValueError("pair")
    first, second = item
    return _check_name("record", first), _check_name("name", second)


def instructions_digest(content: RecordDict) -> bytes:
    """SHA-256 of a round's train instructions (every record but privfed's own), canonical.

    Array records hash their arrays' dtype, shape, serialization type and bytes;
    config and metric records their values' ``repr``; all in sorted order.
    """
    h = hashlib.sha256(b"privfed.flower.training/instructions/v1")

    def put(item: bytes) -> None:
        h.update(len(item).to_bytes(8, "big"))
        h.update(item)

    for name in sorted(content.array_records):
        put(b"arrays:" + name.encode())
        arrays = content.array_records[name]
        for key in sorted(arrays):
            array = arrays[key]
            put(key.encode())
            put(f"{array.dtype}|{tuple(array.shape)}|{array.stype}".encode())
            put(bytes(array.data))
    for kind, records in (("config", content.config_records), ("metric", content.metric_records)):
        for name in sorted(records):
            if kind == "config" and name == RECORD_NAME:
                continue
            put(f"{kind}:{name}".encode())
            record = records[name]
            for key in sorted(record):
                put(key.encode())
                put(repr(record[key]).encode())
    return h.digest()


def training_session_id(nonce: bytes, encoding: bytes, instructions: bytes) -> bytes:
    """The round's session id: a commitment to its encoding and its train instructions.

    Every node checks it at ADVERTISE_KEYS (encoding) and at MASKED_INPUT
    (instructions): two nodes given different ranges, layouts or models hold
    different sessions, so their masks cannot cancel and their messages are
    refused (in active mode their signatures cover it too).
    """
    h = hashlib.sha256(b"privfed.flower.training/session/v1")
    for part in (nonce, hashlib.sha256(encoding).digest(), instructions):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()
