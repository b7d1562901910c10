"""Stable seeds: one derivation of a seed from a key, used wherever a seed is derived.

A seed is the first bytes (little-endian) of the SHA-256 of ``repr(key)``:
stable across processes and Python versions (unlike ``hash``), so a run, a
simulated subject or a bootstrap group draws the same numbers wherever and
whenever it is recomputed.
"""

from __future__ import annotations

import hashlib

import numpy as np


def key_digest(key) -> bytes:
    """SHA-256 digest of ``repr(key)``."""
    return hashlib.sha256(repr(key).encode()).digest()


def stable_seed(key, nbytes: int = 8) -> int:
    """A non-negative integer seed from the first ``nbytes`` of :func:`key_digest`."""
    return int.from_bytes(key_digest(key)[:nbytes], "little")


def stable_rng(key) -> np.random.Generator:
    """A generator seeded by :func:`stable_seed` of ``key``."""
    return np.random.default_rng(stable_seed(key))
