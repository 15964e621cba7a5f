"""Short ids are a keyed permutation: stable under one key, meaningless without it (item 7).

Before, the ids were a fixed bijection whose constants are in the source, so anyone could
decode an id into the global sequence number and count the memories others created between
two of their own.
"""

from __future__ import annotations

import itertools
import secrets
from collections import Counter

from service.core.commands import ID_CHARS, IdCodec

SEQS = range(1, 2001)


def _codec() -> IdCodec:
    return IdCodec(secrets.token_bytes(32))


def test_ids_are_six_characters_stable_and_decodable_with_their_key():
    key = secrets.token_bytes(32)
    first, again = IdCodec(key), IdCodec(key)

    ids = [first.encode(seq) for seq in SEQS]

    assert {len(i) for i in ids} == {ID_CHARS}
    assert len(set(ids)) == len(SEQS)
    assert ids == [again.encode(seq) for seq in SEQS]
    assert [again.parse(i) for i in ids] == list(SEQS)
    assert again.parse(ids[41].upper().replace("0", "o").replace("1", "l")) == 42


def test_two_installations_give_the_same_memory_different_ids():
    one, other = _codec(), _codec()

    same = sum(one.encode(seq) == other.encode(seq) for seq in SEQS)
    decoded_elsewhere = sum(other.parse(one.encode(seq)) == seq for seq in SEQS)

    assert (same, decoded_elsewhere) == (0, 0)


def test_consecutive_memories_ids_show_no_fixed_difference():
    # Under a fixed bijection (a multiplication, an xor) consecutive numbers give values
    # a constant apart, or a few constants; here the differences are all but unique.
    codec = _codec()
    values = [codec.permute(seq) for seq in SEQS]

    differences = Counter((b - a) % (1 << 30) for a, b in itertools.pairwise(values))
    xors = Counter(a ^ b for a, b in itertools.pairwise(values))

    assert differences.most_common(1)[0][1] <= 2
    assert xors.most_common(1)[0][1] <= 2
    assert len(differences) >= len(values) - 10


def test_the_permutation_is_a_bijection_of_30_bits():
    codec = _codec()
    edges = [0, 1, (1 << 15) - 1, 1 << 15, (1 << 30) - 2, (1 << 30) - 1]

    assert [codec.unpermute(codec.permute(v)) for v in edges] == edges
    assert all(0 <= codec.permute(v) < 1 << 30 for v in edges)
    assert [codec.parse(t) for t in ("k7m2q", "k7m2qau", "k7m2q!")] == [None, None, None]


def _fixed_bijection_id(seq: int) -> str:
    """The id the versions before migration 0011 showed for `seq`."""
    mask = (1 << 30) - 1
    value = ((seq * (0x2C9277B5 & mask | 1)) & mask) ^ (0x1B873593 & mask)
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    return "".join(alphabet[(value >> shift) & 31] for shift in range(25, -1, -5))


def test_memories_made_before_the_keyed_ids_keep_theirs_and_no_id_collides():
    key = secrets.token_bytes(32)
    upgraded = IdCodec(key, legacy_through=300)

    ids = [upgraded.encode(seq) for seq in SEQS]

    assert ids[:300] == [_fixed_bijection_id(seq) for seq in range(1, 301)]
    assert len(set(ids)) == len(SEQS)
    assert [upgraded.parse(i) for i in ids] == list(SEQS)
    # ids of later memories are keyed: not the fixed bijection's, and unknown to another key
    later = list(SEQS)[300:]
    assert sum(upgraded.encode(s) == _fixed_bijection_id(s) for s in later) <= 1
    assert (
        sum(
            IdCodec(secrets.token_bytes(32), legacy_through=300).encode(s) == upgraded.encode(s)
            for s in later
        )
        <= 1
    )


def test_an_installation_without_old_memories_keeps_its_keyed_ids():
    key = secrets.token_bytes(32)
    assert [IdCodec(key, legacy_through=0).encode(s) for s in SEQS] == [
        IdCodec(key).encode(s) for s in SEQS
    ]
