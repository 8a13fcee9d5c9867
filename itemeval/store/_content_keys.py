"""`hash_keys`: a 64-bit key per content hash, so that hashes are compared without their text.

The pending sets keep, per cell, the key of the current solution's `text_hash` and compare the
grades' `solution_hash` keys with it; the response cache's index keeps the key of each request
hash. A key is exact for the store's own hashes (16 hex digits: the key is their value) and a
stable 64-bit digest of any other text.
"""

from __future__ import annotations

import contextlib
import hashlib

import numpy as np
import pyarrow as pa

#: ASCII code -> hex digit value (255: not a hex digit).
_HEX_DIGITS = np.full(256, 255, dtype=np.uint8)
for _value, _char in enumerate(b"0123456789abcdef"):
    _HEX_DIGITS[_char] = _value
    _HEX_DIGITS[bytes([_char]).upper()[0]] = _value
_KEY_DIGITS = 16  # 64 bits
#: ASCII code -> whether it is a lowercase hex digit (the store's `text_hash` alphabet).
_LOWER_HEX = np.zeros(256, dtype=bool)
_LOWER_HEX[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = True


def hash_keys(hashes: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A uint64 per content hash, so that hashes are compared without holding their text. A
    hex digest of 16 to 64 digits (the store's `text_hash` has 16) gives its first 16 digits;
    any other text the first 8 bytes of its blake2b digest, so a given text always gets the same
    key. Two different hashes of one cell agree on 64 bits with probability 2^-64."""
    array = hashes.combine_chunks() if isinstance(hashes, pa.ChunkedArray) else hashes
    n = len(array)
    keys = np.zeros(n, dtype=np.uint64)
    if n == 0:
        return keys
    array = array.cast(pa.string()).fill_null("")
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)[array.offset : array.offset + n + 1]
    buffer = array.buffers()[2]
    data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    if (lengths == _KEY_DIGITS).all():  # the store's own hashes: one hex decode of them all
        region = data[starts[0] : starts[0] + _KEY_DIGITS * n].tobytes()
        with contextlib.suppress(ValueError):
            return np.frombuffer(bytes.fromhex(region.decode("ascii")), dtype=">u8").astype(
                np.uint64
            )
    fast = (lengths >= _KEY_DIGITS) & (lengths <= 64)
    if fast.any():
        at = starts[fast][:, None] + np.arange(_KEY_DIGITS)
        digits = _HEX_DIGITS[data[at]]
        fast[fast] = (digits != 255).all(axis=1)
        digits = digits[(digits != 255).all(axis=1)]
        packed = np.zeros(len(digits), dtype=np.uint64)
        for column in range(_KEY_DIGITS):
            packed = (packed << np.uint64(4)) | digits[:, column].astype(np.uint64)
        keys[fast] = packed
    for index in np.flatnonzero(~fast):
        text = array[int(index)].as_py().encode("utf-8")
        keys[index] = int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")
    return keys


def are_key_texts(texts: pa.Array) -> bool:
    """Whether every text is 16 lowercase hex digits (so that its key gives it back)."""
    if texts.null_count:
        return False
    texts = texts.cast(pa.string())
    n = len(texts)
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int32)[texts.offset : texts.offset + n + 1]
    if not (np.diff(offsets) == _KEY_DIGITS).all():
        return False
    data = np.frombuffer(texts.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    return bool(_LOWER_HEX[data].all())


def key_texts(keys: np.ndarray) -> pa.Array:
    """The 16-digit lowercase hex text of each key (the inverse of `hash_keys` on them)."""
    n = len(keys)
    digits = keys.astype(">u8").tobytes().hex().encode("ascii")
    offsets = np.arange(0, _KEY_DIGITS * (n + 1), _KEY_DIGITS, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(digits))
