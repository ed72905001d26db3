"""What the client and the server state machines share."""

from __future__ import annotations

from privfed.errors import ProtocolAbort
from privfed.secagg.protocol.config import SecAggConfig
from privfed.secagg.protocol.stages import Stage


def refusal(reason: str, stage: Stage | None) -> ProtocolAbort:
    """The error for one refused message (the party's state is unchanged)."""
    return ProtocolAbort(f"message refused: {reason}", stage=stage.name if stage else None)


class Party:
    """Base of :class:`~privfed.secagg.SecAggClient` and :class:`~privfed.secagg.SecAggServer`.

    A party holds its round's configuration and aborts the round (wiping its
    secrets) through :meth:`_abort`.
    """

    _config: SecAggConfig

    def _abort(self, reason: str, stage: Stage) -> ProtocolAbort:
        """Enter the aborted state and return the error to raise."""
        raise NotImplementedError

    def _require_quorum(self, count: int, what: str, stage: Stage) -> None:
        """Abort at ``stage`` unless ``count`` (of ``what``) reaches the threshold."""
        threshold = self._config.threshold
        if count < threshold:
            raise self._abort(f"only {count} {what}; threshold is {threshold}", stage)
