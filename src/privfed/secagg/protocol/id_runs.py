"""A round's client ids held as runs of consecutive ids: ``O(runs)`` memory, not ``O(n)``.

A config names every client of the round.  Held as a tuple, a million ids cost
a phone about 36 MB of Python ints and seconds of parsing, though a server
usually numbers its clients ``1..n`` (:class:`~privfed.secagg.ClientIds`) and
a round's ids are one run, or a few.  :class:`IdRuns` keeps only where each
run starts and stops: membership and the position of an id cost
``O(log runs)``, the ``i``-th id as much, and the wire form is 8 bytes a run.
"""

from __future__ import annotations

import bisect
import itertools
import numbers
import operator
import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, overload

import numpy as np

from privfed.errors import MessageFormatError, ParameterError, ParameterTypeError

__all__ = ["IdRuns"]

_RUN: Final = struct.Struct(">II")
_COUNT: Final = struct.Struct(">I")
#: Largest id a run may hold (ids travel as unsigned 32-bit integers).
_MAX_ID: Final = 2**32 - 1


class IdRuns(Sequence[int]):
    """Distinct client ids in increasing order, stored as maximal runs of consecutive ids.

    A read-only sequence: it compares equal to another ``IdRuns`` or a tuple
    holding the same ids (as the tuple a config held before did), and hashes
    as that tuple.  Build one with :meth:`from_sorted` (validated ids, strictly
    increasing) or :meth:`from_range`; :class:`~privfed.secagg.SecAggConfig`
    does so from whatever ids it is given.
    """

    __slots__ = ("_hash", "_offsets", "_starts", "_stops")

    def __init__(self, runs: Iterable[tuple[int, int]]) -> None:
        """Runs ``(start, stop)`` of ints (``stop`` exclusive): non-empty, increasing, with gaps.

        Raises:
            ParameterTypeError: A bound is not an int.
            ParameterError: An empty run, or a run that does not start after
                the previous one's stop plus one (overlapping, touching or
                out of order: one set of ids has one form).
        """
        starts: list[int] = []
        stops: list[int] = []
        offsets = [0]
        for start, stop in runs:
            for bound in (start, stop):
                if type(bound) is not int:
                    raise ParameterTypeError("runs", "(start, stop) pairs of ints", bound)
            if stop <= start or (stops and start <= stops[-1]):
                raise ParameterError(
                    "runs",
                    "non-empty runs (start, stop), each starting past the previous stop",
                    (start, stop),
                )
            starts.append(start)
            stops.append(stop)
            offsets.append(offsets[-1] + stop - start)
        self._starts = tuple(starts)
        self._stops = tuple(stops)
        self._offsets = tuple(offsets)
        self._hash: int | None = None

    @classmethod
    def from_sorted(cls, ids: Sequence[int]) -> IdRuns:
        """The runs of ``ids``, ints in strictly increasing order.

        Raises:
            ParameterTypeError: An id is not an int.
            ParameterError: The ids are not strictly increasing.
        """
        runs: list[list[int]] = []
        for i in ids:
            if type(i) is not int:
                raise ParameterTypeError("ids", "ints", i)
            if runs and i <= runs[-1][1] - 1:
                raise ParameterError(
                    "ids", "strictly increasing ints", "an id not above the previous"
                )
            if runs and i == runs[-1][1]:
                runs[-1][1] = i + 1
            else:
                runs.append([i, i + 1])
        return cls((start, stop) for start, stop in runs)

    @classmethod
    def from_range(cls, ids: range) -> IdRuns:
        """One run: a ``range`` of step 1.

        Raises:
            ParameterError: A step other than 1.
        """
        if ids.step != 1:
            raise ParameterError("ids", "a range of step 1", ids)
        return cls(((ids.start, ids.stop),) if len(ids) else ())

    @property
    def runs(self) -> tuple[range, ...]:
        """The runs, each a ``range`` of consecutive ids, in increasing order."""
        return tuple(map(range, self._starts, self._stops))

    def __len__(self) -> int:
        return self._offsets[-1]

    def __iter__(self) -> Iterator[int]:
        return itertools.chain.from_iterable(self.runs)

    def __reversed__(self) -> Iterator[int]:
        return itertools.chain.from_iterable(reversed(r) for r in reversed(self.runs))

    def __contains__(self, value: object) -> bool:
        key = _as_id(value)
        if key is None:
            return False
        run = bisect.bisect_right(self._starts, key) - 1
        return run >= 0 and key < self._stops[run]

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[int, ...]: ...

    def __getitem__(self, index: int | slice) -> int | tuple[int, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        index = operator.index(index)  # a TypeError for a float, as a tuple's
        size = len(self)
        position = index + size if index < 0 else index
        if not 0 <= position < size:
            raise IndexError("IdRuns index out of range")
        run = bisect.bisect_right(self._offsets, position) - 1
        return self._starts[run] + position - self._offsets[run]

    def index(self, value: object, start: int = 0, stop: int | None = None) -> int:
        """The position of ``value`` (``ValueError`` when absent), in ``O(log runs)``."""
        key = _as_id(value)
        if key is not None and key in self:
            run = bisect.bisect_right(self._starts, key) - 1
            position = self._offsets[run] + key - self._starts[run]
            low, high, _ = slice(start, stop).indices(len(self))  # as a tuple bounds them
            if low <= position < high:
                return position
        raise ValueError(f"{value!r} is not in IdRuns")

    def count(self, value: object) -> int:
        return 1 if value in self else 0

    def __eq__(self, other: object) -> bool:
        # Equal where the tuple of the same ids is (so the hash below stays consistent).
        if isinstance(other, IdRuns):
            return self._starts == other._starts and self._stops == other._stops
        if isinstance(other, tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self))
        return self._hash

    def __repr__(self) -> str:
        return f"IdRuns({list(self.runs)!r})"

    def to_bytes(self) -> bytes:
        """The wire form: a 4-byte run count, then 8 bytes a run (start, length)."""
        return _COUNT.pack(len(self._starts)) + b"".join(
            _RUN.pack(start, stop - start)
            for start, stop in zip(self._starts, self._stops, strict=True)
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> IdRuns:
        """Parse :meth:`to_bytes`; only the canonical form is accepted.

        Raises:
            MessageFormatError: Truncated or trailing bytes, an empty run, a
                run starting at 0, past ``2**32 - 1``, or not after the
                previous one with a gap (so one set has one encoding).
        """
        if len(data) < _COUNT.size:
            raise MessageFormatError("client-id runs are truncated")
        (count,) = _COUNT.unpack_from(data)
        if len(data) != _COUNT.size + count * _RUN.size:
            raise MessageFormatError("client-id runs have the wrong length")
        runs = []
        previous_stop = 0
        for start, length in _RUN.iter_unpack(data[_COUNT.size :]):
            stop = start + length
            if length == 0 or start <= previous_stop or stop - 1 > _MAX_ID:
                raise MessageFormatError("client-id runs are not canonical")
            runs.append((start, stop))
            previous_stop = stop
        return cls(runs)


def _as_id(value: object) -> int | None:
    """``value`` as the int a tuple of ints would find it equal to, or ``None``."""
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        pass
    if isinstance(value, (numbers.Real, np.generic)):  # floats, numpy scalars, fractions
        try:
            whole = int(value)  # type: ignore[arg-type]
        except (OverflowError, TypeError, ValueError):  # infinities, NaN, numpy non-numbers
            return None
        return whole if whole == value else None
    return None
