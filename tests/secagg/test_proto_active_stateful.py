"""An adversarial server against one active-mode client: a Hypothesis state machine.

The server (the machine) may send any sequence of ConsistencyCheck and
unmasking requests: any survivor sets, any dropped lists, forwarded
signatures of honest and colluding clients on any sets (honest peers sign
one set each, chosen by the adversary; colluders sign anything), tampered
signatures, repeats.  After every step the invariants are checked
independently of the client's code:

* the client never reveals both share kinds for one peer, over all its answers;
* every request it answered carried at least ``t`` valid signatures, from
  distinct survivors of its neighbourhood, on the one set it signed -- and it
  signed at most one set.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from secagg_helpers import deliver

from privfed.errors import ProtocolAbort
from privfed.secagg import (
    ConsistencyRequest,
    EncryptedSharesBundle,
    IdentityKey,
    IdentityRegistry,
    SecAggClient,
    SecAggConfig,
    SecAggServer,
    SurvivorSignature,
    UnmaskRequest,
    UnmaskResponse,
)
from privfed.secagg.protocol.identity import survivor_set_payload

N, T, CORRUPTED = 7, 5, 2  # 2t = 10 > n + n_C = 9
TARGET = 1
COLLUDERS = (6, 7)
IDS = tuple(range(1, N + 1))

_subsets = st.sets(st.sampled_from(IDS)).map(lambda s: tuple(sorted(s)))


class AdversarialServer(RuleBasedStateMachine):
    @initialize(
        left_out=st.sets(st.sampled_from(IDS[1:]), max_size=2),
        loyal=st.lists(st.booleans(), min_size=N, max_size=N),
    )
    def start(self, left_out: set[int], loyal: list[bool]) -> None:
        """An honest round up to the masked inputs, then a first survivor set to sign.

        ``loyal[j]``: whether honest peer ``j + 1`` signs the set the target
        is asked to sign (else the adversary gets it to sign one other set).
        """
        self.setup()
        self.loyal = loyal
        self.consistency_with_a_plausible_set(left_out)

    def setup(self) -> None:
        self.identity = {c: IdentityKey.generate() for c in IDS}
        registry = IdentityRegistry.of(self.identity, assumed_corrupted=CORRUPTED)
        self.cfg = SecAggConfig(
            client_ids=IDS,
            threshold=T,
            vector_length=2,
            mode="active",
            corrupted=CORRUPTED,
            identities=registry,
        )
        clients = {
            c: SecAggClient(self.cfg, c, np.zeros(2, np.uint64), identity=self.identity[c])
            for c in IDS
        }
        server = SecAggServer(self.cfg)
        for c in clients.values():
            deliver(server, c.advertise_keys())
        roster = server.roster()
        for c in clients.values():
            deliver(server, EncryptedSharesBundle.from_shares(c.share_keys(roster)))
        routed = server.routed_shares()
        for cid, c in clients.items():
            deliver(server, c.masked_input(routed[cid]))
        self.client = clients[TARGET]
        self.hdr = {"session_id": self.cfg.bound_session_id, "round_index": 0}
        self.honest_choice: dict[int, tuple[int, ...]] = {}
        self.signed: list[tuple[int, ...]] = []
        self.answered: list[tuple[UnmaskRequest, UnmaskResponse]] = []
        self.own: dict[tuple[int, ...], bytes] = {}  # the target's own signatures

    def _payload(self, survivors: tuple[int, ...]) -> bytes:
        return survivor_set_payload(
            session=self.cfg.bound_session_id, config_digest=self.cfg.digest, survivors=survivors
        )

    def _signature(self, signer: int, survivors: tuple[int, ...]) -> bytes | None:
        """What the adversary can get: colluders sign anything, honest peers one set each.

        The target's own signature is forwarded too, on the set it signed.
        """
        if signer == TARGET:
            return self.own.get(survivors)
        if signer not in COLLUDERS:
            target_set = self.signed[0] if self.signed else None
            if self.loyal[signer - 1] and survivors != target_set:
                return None
            if not self.loyal[signer - 1]:
                if survivors == target_set:
                    return None
                chosen = self.honest_choice.setdefault(signer, survivors)
                if chosen != survivors:
                    return None
        return self.identity[signer].sign(self._payload(survivors))

    @rule(survivors=_subsets)
    def consistency(self, survivors: tuple[int, ...]) -> None:
        request = ConsistencyRequest(**self.hdr, recipient=TARGET, survivors=survivors)
        try:
            answer = self.client.consistency_check(request)
        except ProtocolAbort:
            return
        assert self.identity[TARGET].public_key == self.cfg.identities.public_key(TARGET)  # type: ignore[union-attr]
        assert self.cfg.identities.verify(TARGET, self._payload(survivors), answer.signature)  # type: ignore[union-attr]
        if survivors not in self.signed:
            self.signed.append(survivors)
        self.own[survivors] = answer.signature

    @rule(left_out=st.sets(st.sampled_from(IDS[1:]), max_size=2))
    def consistency_with_a_plausible_set(self, left_out: set[int]) -> None:
        self.consistency(tuple(c for c in IDS if c not in left_out))

    @rule(
        survivors=_subsets,
        signed_set=_subsets,
        signers=_subsets,
        tamper=st.booleans(),
        use_signed=st.booleans(),
    )
    def unmask(
        self,
        survivors: tuple[int, ...],
        signed_set: tuple[int, ...],
        signers: tuple[int, ...],
        tamper: bool,
        use_signed: bool,
    ) -> None:
        if use_signed and self.signed:
            signed_set = self.signed[0]
        dropped = tuple(c for c in IDS if c not in survivors)
        signatures = []
        for signer in signers:
            signature = self._signature(signer, signed_set)
            if signature is None:
                continue
            if tamper and not signatures:
                signature = bytes([signature[0] ^ 1]) + signature[1:]
            signatures.append(SurvivorSignature(signer, signature))
        request = UnmaskRequest(
            **self.hdr,
            recipient=TARGET,
            survivors=survivors,
            dropped=dropped,
            signatures=tuple(signatures),
        )
        try:
            response = self.client.unmask(request)
        except ProtocolAbort:
            return
        self.answered.append((request, response))

    @rule(keep=st.integers(0, N), survivors_extra=_subsets)
    def unmask_on_the_signed_set(self, keep: int, survivors_extra: tuple[int, ...]) -> None:
        """The adversary's best shot: real signatures on the signed set, a view of its choice."""
        if not self.signed:
            return
        signed = self.signed[0]
        signers = list(signed)[:keep]
        self.unmask(survivors_extra or signed, signed, tuple(signers), False, True)
        self.unmask(signed, signed, tuple(signers), False, True)

    @invariant()
    def at_most_one_signed_set(self) -> None:
        if hasattr(self, "signed"):
            assert len(self.signed) <= 1

    @invariant()
    def never_both_share_kinds(self) -> None:
        if not hasattr(self, "answered"):
            return
        seeds = {s.owner for _, r in self.answered for s in r.self_mask_shares}
        key_owners = {s.owner for _, r in self.answered for s in r.key_shares}
        assert not seeds & key_owners

    @invariant()
    def unmasking_only_with_t_valid_signatures_on_the_signed_set(self) -> None:
        if not hasattr(self, "answered"):
            return
        registry = self.cfg.identities
        assert registry is not None
        for request, _ in self.answered:
            assert len(self.signed) == 1
            signed = self.signed[0]
            assert set(request.survivors) == set(signed)  # complete graph: view = roster
            payload = self._payload(signed)
            valid = {
                s.signer
                for s in request.signatures
                if s.signer in signed and registry.verify(s.signer, payload, s.signature)
            }
            assert len(valid) >= T
            assert len(valid) == len(request.signatures)


AdversarialServer.TestCase.settings = settings(
    max_examples=40, stateful_step_count=12, deadline=None
)
TestAdversarialServer = AdversarialServer.TestCase
TestAdversarialServer.pytestmark = [pytest.mark.slow]  # 40 examples of 12 steps: seconds
