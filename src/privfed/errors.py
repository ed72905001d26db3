"""The one exception tree of privfed.

Every error the library raises on purpose derives from :class:`PrivfedError`.
The tree follows two rules taken from pyca/cryptography:

* A bad argument raises :class:`ParameterError` (also a :class:`ValueError`) or
  :class:`ParameterTypeError` (also a :class:`TypeError`).  The message names the
  parameter, states its domain and shows the value received -- except where the
  value is secret, in which case it is replaced by ``<redacted>``.
* A failed authentication check raises :class:`AuthenticationError`, which carries
  no detail at all, so that it cannot serve as an oracle.

Messages never contain keys, shares, seeds or unmasked values.  Functions
validate all of their inputs before changing any state, so a raised error leaves
every object as it was.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = [
    "REDACTED",
    "ArtifactIntegrityError",
    "AuditError",
    "AuthenticationError",
    "BudgetExceededError",
    "CalibrationError",
    "DeclarationError",
    "KeyAgreementError",
    "LedgerError",
    "MessageFormatError",
    "MissingDependencyError",
    "NonFiniteInputError",
    "ParameterError",
    "ParameterTypeError",
    "PrivacyError",
    "PrivfedError",
    "ProtocolAbort",
    "ProtocolError",
    "ReconstructionError",
    "RingOverflowError",
]

#: Stand-in for a secret value in an error message.
REDACTED: Final = "<redacted>"

_MAX_REPR = 80


def _short_repr(value: Any) -> str:
    text = repr(value)
    if len(text) > _MAX_REPR:
        text = text[: _MAX_REPR - 3] + "..."
    return text


class PrivfedError(Exception):
    """Base class of every error privfed raises on purpose."""


class ParameterError(PrivfedError, ValueError):
    """An argument has the right type but a value outside its domain.

    Args:
        name: The parameter's name as the caller spelled it (``"epsilon"``).
        domain: The domain in words (``"a finite float > 0"``).
        value: The value received.  Pass ``secret=True`` to keep it out of the
            message.
        secret: Replace the value by ``<redacted>`` in the message.
        detail: An optional extra sentence.
    """

    def __init__(
        self,
        name: str,
        domain: str,
        value: Any = None,
        *,
        secret: bool = False,
        detail: str | None = None,
    ) -> None:
        self.parameter = name
        self.domain = domain
        shown = REDACTED if secret else _short_repr(value)
        message = f"parameter {name!r} must be {domain}; got {shown}"
        if detail:
            message += f" ({detail})"
        super().__init__(message)


class ParameterTypeError(PrivfedError, TypeError):
    """An argument has the wrong type.

    Args:
        name: The parameter's name.
        expected: The expected type in words (``"bytes of length 32"``).
        value: The value received; only its type appears in the message.
    """

    def __init__(self, name: str, expected: str, value: Any = None) -> None:
        self.parameter = name
        self.expected = expected
        super().__init__(
            f"parameter {name!r} must be {expected}; got an object of type {type(value).__name__}"
        )


class NonFiniteInputError(ParameterError):
    """An array argument holds NaN or infinite values."""

    def __init__(self, name: str, *, count: int | None = None) -> None:
        detail = None if count is None else f"{count} non-finite values"
        super().__init__(name, "finite everywhere (no NaN or inf)", "array", detail=detail)


class RingOverflowError(ParameterError):
    """A fixed-point configuration could let a sum wrap around the ring."""


class KeyAgreementError(PrivfedError, ValueError):
    """Key agreement failed, e.g. because the peer's public key is a low-order point.

    The message never contains key material.

    Attributes:
        peer_id: The (public) id of the peer whose key failed, when the failing
            call worked on several peers at once; ``None`` otherwise.
    """

    def __init__(self, message: str, *, peer_id: int | None = None) -> None:
        super().__init__(message)
        self.peer_id = peer_id


class AuthenticationError(PrivfedError):
    """An authenticated decryption or signature check failed.

    Deliberately detail-free: the message is the same whatever went wrong, so the
    error cannot serve as an oracle.
    """

    def __init__(self) -> None:
        super().__init__("authentication failed")


# -- secure aggregation ---------------------------------------------------------


class ProtocolError(PrivfedError):
    """Base class of secure-aggregation protocol errors."""


class MessageFormatError(ProtocolError, ValueError):
    """A serialized message is truncated, altered, of an unknown version or malformed."""


class ProtocolAbort(ProtocolError):  # noqa: N818 -- the name is part of the public API
    """A party refuses to continue the protocol.

    Raised when continuing could reveal something it must not (a server asking for
    both share types of one client, a view below the threshold, a late input) or
    when the round cannot complete.  Attributes ``stage`` and ``reason`` are
    free of secrets.
    """

    def __init__(self, reason: str, *, stage: str | None = None) -> None:
        self.reason = reason
        self.stage = stage
        prefix = f"[{stage}] " if stage else ""
        super().__init__(f"{prefix}protocol aborted: {reason}")


class ReconstructionError(ProtocolError):
    """Shares are inconsistent, or a reconstructed secret fails its verification."""


# -- differential privacy -------------------------------------------------------


class PrivacyError(PrivfedError):
    """Base class of differential-privacy errors."""


class DeclarationError(PrivacyError):
    """A contribution's declared noise is missing or is not what the release's plan needs.

    Raised (and turned into a refusal of that contribution) when a node's
    noise declaration does not match the job's noise plan, and when a release
    would rest on such a contribution: a release never claims noise that its
    contributors did not declare.
    """


class CalibrationError(PrivacyError):
    """A noise calibration could not be solved to the required accuracy."""


class BudgetExceededError(PrivacyError):
    """A release would push the ledger past its declared privacy budget.

    Raised before anything is recorded.
    """


class LedgerError(PrivacyError, ValueError):
    """A privacy ledger is inconsistent, or its serialized form is invalid."""


# -- audits ---------------------------------------------------------------------


class AuditError(PrivfedError):
    """An audit cannot produce a valid result (e.g. too few samples for a bound)."""


# -- engines --------------------------------------------------------------------


class ArtifactIntegrityError(PrivfedError, ValueError):
    """A stored model artifact (e.g. a saved factory) is missing, malformed or fails its checksum.

    Attributes ``artifact`` (the file name) and ``reason`` never contain
    weights or secrets.  A checksum detects corruption and unsophisticated
    tampering; it is not a signature.
    """

    def __init__(self, artifact: str, reason: str) -> None:
        self.artifact = artifact
        self.reason = reason
        super().__init__(f"artifact {artifact!r} failed verification: {reason}")


class MissingDependencyError(PrivfedError, ImportError):
    """An optional dependency is not installed.

    The message names the feature that needs it and the extra that installs it,
    e.g. ``privfed run needs 'torch' (not installed): pip install 'privfed[engines]'``.

    Attributes:
        package: The missing import name (``"torch"``).
        extra: The privfed extra that provides it (``"engines"``).
        feature: What needed it (``"privfed run"``).
    """

    def __init__(self, package: str, extra: str, *, feature: str) -> None:
        self.package = package
        self.extra = extra
        self.feature = feature
        super().__init__(
            f"{feature} needs {package!r} (not installed): pip install 'privfed[{extra}]'",
            name=package,
        )
