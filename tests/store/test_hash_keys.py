"""`hash_keys`: the uint64 a content hash is compared by when the grade stage's pending cells
are computed (a grade is current when its solution's key equals the solution's key now)."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa

from itemeval.store._content_keys import hash_keys


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_the_stores_16_digit_text_hash_is_its_own_key():
    from itemeval.store import text_hash

    hashes = [text_hash(f"answer {i}") for i in range(20)]
    assert all(len(h) == 16 for h in hashes)
    assert hash_keys(pa.array(hashes)).tolist() == [int(h, 16) for h in hashes]


def test_a_sha256_digest_keys_by_its_first_64_bits():
    digests = [_sha(str(i)) for i in range(50)]
    keys = hash_keys(pa.array(digests))
    assert keys.dtype == np.uint64
    assert keys.tolist() == [int(d[:16], 16) for d in digests]
    assert hash_keys(pa.array([d.upper() for d in digests])).tolist() == keys.tolist()
    assert len(set(keys.tolist())) == 50


def test_a_key_depends_only_on_its_text():
    digest = _sha("a")
    odd = ["not-a-hash", "", "z" * 64, digest[:15], digest + "0"]
    alone = hash_keys(pa.array([digest])).tolist() + hash_keys(pa.array(odd)).tolist()
    mixed = hash_keys(pa.array([digest, *odd])).tolist()
    assert alone == mixed  # neighbours do not change a key
    assert len(set(mixed)) == len(mixed)
    expected = int.from_bytes(hashlib.blake2b(b"not-a-hash", digest_size=8).digest(), "big")
    assert mixed[1] == expected


def test_slices_chunks_and_nulls():
    digests = [_sha(str(i)) for i in range(10)]
    whole = hash_keys(pa.array(digests)).tolist()
    assert hash_keys(pa.array(digests).slice(3, 4)).tolist() == whole[3:7]
    chunked = pa.chunked_array([pa.array(digests[:4]), pa.array(digests[4:])])
    assert hash_keys(chunked).tolist() == whole
    with_null = hash_keys(pa.array([digests[0], None]))
    assert with_null[0] == whole[0] and with_null[1] == hash_keys(pa.array([""]))[0]
    assert hash_keys(pa.array([], pa.string())).size == 0
    assert hash_keys(pa.array(["", ""])).tolist() == hash_keys(pa.array([""])).tolist() * 2
