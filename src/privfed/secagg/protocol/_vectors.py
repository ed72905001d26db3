"""Ring vectors: the checked form of a client's input."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from privfed.errors import ParameterError, ParameterTypeError

if TYPE_CHECKING:  # pragma: no cover
    from privfed.secagg.protocol.config import SecAggConfig

__all__ = ["check_ring_vector", "client_input"]


def check_ring_vector(
    name: str, values: object, *, length: int, ring_bits: int
) -> npt.NDArray[np.uint64]:
    """Validate a ring vector and return it as a fresh C-contiguous ``uint64`` copy.

    Args:
        name: Parameter name for error messages.
        values: A 1-D numpy array of integers (any integer dtype), every entry in
            ``[0, 2**ring_bits)``.
        length: Required length.
        ring_bits: Ring width in bits.

    Raises:
        ParameterTypeError: Not a numpy integer array.
        ParameterError: Wrong shape, or an entry outside ``[0, 2**ring_bits)``
            (the offending values are not shown).
    """
    if not isinstance(values, np.ndarray) or not np.issubdtype(values.dtype, np.integer):
        raise ParameterTypeError(name, "a numpy array of integers", values)
    if values.shape != (length,):
        raise ParameterError(name, f"a 1-D array of length {length}", values.shape)
    if values.dtype != np.uint64 and values.size and int(values.min()) < 0:
        raise ParameterError(name, f"ring elements in [0, 2**{ring_bits})", "<redacted>")
    if ring_bits < 64 and values.size and int(values.max()) >> ring_bits:
        raise ParameterError(name, f"ring elements in [0, 2**{ring_bits})", "<redacted>")
    return np.array(values, dtype=np.uint64, order="C", copy=True)


def client_input(values: object, config: SecAggConfig) -> npt.NDArray[np.uint64] | None:
    """``values`` checked as this round's input vector, or ``None`` when not given."""
    if values is None:
        return None
    return check_ring_vector(
        "values", values, length=config.vector_length, ring_bits=config.ring_bits
    )
