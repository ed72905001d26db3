"""The primitives composed as the protocol composes them: masks cancel, secrets come back."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from privfed.secagg.primitives import (
    FixedPointConfig,
    KeyPair,
    Purpose,
    Share,
    combine,
    derive_self_mask_seed,
    expand,
    pairwise_key,
    ring_add,
    ring_sub,
    ring_sum,
    seal,
    share_associated_data,
    split,
    unseal,
)


@given(
    seed=st.integers(min_value=0, max_value=2**64 - 1),
    n_clients=st.integers(min_value=2, max_value=5),
    ring_bits=st.sampled_from([64, 48, 32]),
)
def test_double_masking_round_recovers_the_exact_sum(
    seed: int, n_clients: int, ring_bits: int
) -> None:
    rng = random.Random(seed)
    ids = sorted(rng.sample(range(1, 1000), n_clients))
    session, rnd, length = b"integration", rng.randrange(10), 33
    cfg = FixedPointConfig.for_bounds(1.0, n_clients, ring_bits=ring_bits)
    pairs = {i: KeyPair.from_private_bytes(rng.randbytes(32)) for i in ids}
    self_seeds = {i: rng.randbytes(32) for i in ids}
    values = {i: np.array([rng.uniform(-1, 1) for _ in range(length)]) for i in ids}

    masked = []
    for u in ids:
        y = cfg.encode(values[u])
        b_u = derive_self_mask_seed(self_seeds[u], session_id=session, round_index=rnd, client_id=u)
        y = ring_add(y, expand(b_u, length, modulus_bits=ring_bits), ring_bits=ring_bits)
        for v in ids:
            if v == u:
                continue
            s_uv = pairwise_key(
                pairs[u].private_key,
                pairs[v].public_key,
                purpose=Purpose.MASK,
                session_id=session,
                round_index=rnd,
                client_id=u,
                peer_id=v,
            )
            mask = expand(s_uv, length, modulus_bits=ring_bits)
            y = (ring_add if u < v else ring_sub)(y, mask, ring_bits=ring_bits)
        masked.append(y)

    # The server: pairwise masks cancel in the sum; self-masks are removed
    # after their seeds are rebuilt from Shamir shares.
    total = ring_sum(masked, ring_bits=ring_bits)
    threshold = max(2, n_clients - 1)
    for u in ids:
        shares = split(self_seeds[u], threshold=threshold, num_shares=n_clients, indices=ids)
        rebuilt = combine(shares, threshold=threshold)
        b_u = derive_self_mask_seed(rebuilt, session_id=session, round_index=rnd, client_id=u)
        total = ring_sub(total, expand(b_u, length, modulus_bits=ring_bits), ring_bits=ring_bits)

    exact = ring_sum([cfg.encode(values[u]) for u in ids], ring_bits=ring_bits)
    assert np.array_equal(total, exact)
    real = np.sum([values[u] for u in ids], axis=0)
    assert np.all(np.abs(cfg.decode(total) - real) <= n_clients * cfg.resolution / 2 + 1e-12)


def test_shares_travel_encrypted_between_two_clients() -> None:
    alice, bob = KeyPair.generate(), KeyPair.generate()
    ctx = {"purpose": Purpose.SHARE_ENCRYPTION, "session_id": b"s", "round_index": 0}
    k_ab = pairwise_key(alice.private_key, bob.public_key, client_id=1, peer_id=2, **ctx)
    k_ba = pairwise_key(bob.private_key, alice.public_key, client_id=2, peer_id=1, **ctx)
    share = split(bytes(range(32)), threshold=2, num_shares=3)[1]
    ad = share_associated_data(session_id=b"s", round_index=0, sender=1, recipient=2)
    received = unseal(k_ba, seal(k_ab, share.to_bytes(), associated_data=ad), associated_data=ad)
    assert Share.from_bytes(received) == share
