"""How privfed's protocol messages travel inside Flower messages.

Message types are privfed's own (``query.privfed_secagg_<stage>``), so nothing
collides with Flower's ``secaggplus_mod`` (which acts on ``train`` messages).
Keys, ciphertexts and shares travel as bytes in a ``ConfigRecord``; the masked
input vector travels as a Flower array in an ``ArrayRecord`` (chunked on the
wire by Flower).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator
from typing import Final

import numpy as np
import numpy.typing as npt
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict

from privfed.errors import MessageFormatError
from privfed.secagg import MaskedInput, Stage

#: The record every privfed message keeps its fields in.
RECORD: Final = "privfed"
#: The array record of a masked input.
ARRAYS: Final = "privfed_values"
#: Header field of a masked input carrying the node's noise declaration.
DECLARATION: Final = "noise-declaration"

#: Flower action (``query.<action>``) of each stage.
ACTIONS: Final = {
    Stage.ADVERTISE_KEYS: "privfed_secagg_advertise",
    Stage.SHARE_KEYS: "privfed_secagg_share",
    Stage.MASKED_INPUT: "privfed_secagg_mask",
    Stage.CONSISTENCY_CHECK: "privfed_secagg_consist",
    Stage.UNMASKING: "privfed_secagg_unmask",
}
#: Flower action of the hello round.
HELLO_ACTION: Final = "privfed_hello"
#: Flower action of the committee's reveals (active SecAgg+, end of ADVERTISE_KEYS).
REVEAL_ACTION: Final = "privfed_secagg_reveal"
#: The full Flower message type of each stage.
MESSAGE_TYPES: Final = {stage: f"query.{action}" for stage, action in ACTIONS.items()}
#: The Flower message type of the committee's reveals.
REVEAL_MESSAGE_TYPE: Final = f"query.{REVEAL_ACTION}"
#: The stage of each Flower message type (a reveal belongs to ADVERTISE_KEYS).
STAGE_OF_TYPE: Final = {
    **{kind: stage for stage, kind in MESSAGE_TYPES.items()},
    REVEAL_MESSAGE_TYPE: Stage.ADVERTISE_KEYS,
}


def config_record(content: RecordDict) -> ConfigRecord:
    """The privfed record of ``content``.

    Raises:
        MessageFormatError: ``content`` has no privfed record.
    """
    try:
        return content.config_records[RECORD]
    except KeyError:
        raise MessageFormatError("the Flower message carries no privfed record") from None


def answered_records(
    replies: Iterable[Message], asked: Container[int]
) -> Iterator[tuple[int, ConfigRecord]]:
    """``(node, privfed record)`` of each reply from an asked node that carries one.

    Replies from other nodes, error replies and replies without a privfed
    record are passed over.
    """
    for reply in replies:
        node = int(reply.metadata.src_node_id)
        if node not in asked or reply.has_error():
            continue
        try:
            record = config_record(reply.content)
        except MessageFormatError:
            continue
        yield node, record


def get_bytes(record: ConfigRecord, key: str) -> bytes:
    """A bytes field of ``record``.

    Raises:
        MessageFormatError: Missing, or not bytes.
    """
    value = record.get(key)
    if not isinstance(value, bytes):
        raise MessageFormatError(f"the privfed record lacks the bytes field {key!r}")
    return value


def get_int(record: ConfigRecord, key: str) -> int:
    """An int field of ``record``.

    Raises:
        MessageFormatError: Missing, or not an int.
    """
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MessageFormatError(f"the privfed record lacks the int field {key!r}")
    return value


def bytes_content(data: bytes, **extra: int | str | bytes) -> RecordDict:
    """A RecordDict holding one protocol message's bytes (plus small public fields)."""
    return RecordDict({RECORD: ConfigRecord({"message": data, **extra})})


def masked_input_content(message: MaskedInput, *, declaration: bytes | None = None) -> RecordDict:
    """A masked input: header fields as config, the vector as a Flower array.

    ``declaration`` (a :class:`~privfed.flower.declaration.NoiseDeclaration`'s
    wire form) travels in the header next to the session it is bound to.
    """
    fields: dict[str, int | bytes] = {
        "session": message.session_id,
        "round": message.round_index,
        "sender": message.sender,
        "ring-bits": message.ring_bits,
    }
    if declaration is not None:
        fields[DECLARATION] = declaration
    header = ConfigRecord(fields)  # type: ignore[arg-type]
    values = np.ascontiguousarray(message.values, dtype=np.uint64)
    return RecordDict({RECORD: header, ARRAYS: ArrayRecord({"values": Array(values)})})


def _uint64_vector(array: object) -> npt.NDArray[np.uint64]:
    """The 1-D ``uint64`` vector of a Flower array from a peer (never trusted).

    The ``.npy`` header is read and checked against the buffer's size before
    any value is, so a header claiming 10**11 values, an ``.npz``, an empty
    buffer or a pickle is a :class:`MessageFormatError`, not a MemoryError or
    EOFError.
    """
    import io

    data = getattr(array, "data", None)
    if not isinstance(data, bytes) or getattr(array, "stype", None) != "numpy.ndarray":
        raise MessageFormatError("the masked input's values are not a numpy array")
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(version)
    except Exception:
        raise MessageFormatError("the masked input's values are not an .npy array") from None
    if dtype != np.dtype("<u8") or len(shape) != 1 or fortran:
        raise MessageFormatError("the masked input's values are not a 1-D uint64 array")
    offset = stream.tell()
    if len(data) - offset != 8 * int(shape[0]):
        raise MessageFormatError("the masked input's array header does not match its size")
    return np.frombuffer(data, dtype="<u8", offset=offset).astype(np.uint64, copy=True)


def parse_masked_input(content: RecordDict) -> MaskedInput:
    """Rebuild a :class:`MaskedInput` from :func:`masked_input_content` (validated).

    Raises:
        MessageFormatError: A field is missing or malformed.
    """
    header = config_record(content)
    try:
        array = content.array_records[ARRAYS]["values"]
    except (KeyError, TypeError, AttributeError):
        raise MessageFormatError("the masked input carries no value array") from None
    values = _uint64_vector(array)
    try:
        return MaskedInput(
            session_id=get_bytes(header, "session"),
            round_index=get_int(header, "round"),
            sender=get_int(header, "sender"),
            ring_bits=get_int(header, "ring-bits"),
            values=values,
        )
    except (ValueError, TypeError) as exc:
        raise MessageFormatError(f"malformed masked input: {exc}") from None


def parse_declaration(content: RecordDict) -> bytes | None:
    """The raw noise declaration of a masked input's content (``None``: the node sent none).

    Raises:
        MessageFormatError: The field is present but not bytes.
    """
    header = config_record(content)
    if DECLARATION not in header:
        return None
    return get_bytes(header, DECLARATION)


def content_bytes(content: RecordDict) -> int:
    """Bytes of payload in ``content`` (bytes fields and array buffers), for cost reports."""
    total = 0
    for record in content.config_records.values():
        for value in record.values():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, bytes):
                    total += len(item)
                elif isinstance(item, str):
                    total += len(item.encode())
                else:
                    total += 8
    for arrays in content.array_records.values():
        for array in arrays.values():
            total += len(array.data)
    return total
