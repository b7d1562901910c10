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
    """SHA-256 digest of ``repr(key)``.

    Parameters
    ----------
    key : object
        Any value whose ``repr`` is stable (a tuple of strings and numbers, typically).

    Returns
    -------
    bytes
        The 32-byte SHA-256 digest of ``repr(key)`` encoded as UTF-8.
    """
    return hashlib.sha256(repr(key).encode()).digest()


def stable_seed(key, nbytes: int = 8) -> int:
    """A non-negative integer seed from the first ``nbytes`` of :func:`key_digest`.

    Parameters
    ----------
    key : object
        The key to derive the seed from (see :func:`key_digest`).
    nbytes : int, default 8
        How many leading bytes of the digest to read (little-endian), 1 to 32.

    Returns
    -------
    int
        A seed in ``[0, 256**nbytes)``.
    """
    return int.from_bytes(key_digest(key)[:nbytes], "little")


def stable_rng(key) -> np.random.Generator:
    """A generator seeded by :func:`stable_seed` of ``key``.

    Parameters
    ----------
    key : object
        The key to derive the seed from (see :func:`key_digest`).

    Returns
    -------
    numpy.random.Generator
        ``numpy.random.default_rng(stable_seed(key))``.
    """
    return np.random.default_rng(stable_seed(key))
