"""One seed derivation (bayesobs.seeds): the numbers every run, simulation and bootstrap drew before."""

import hashlib
import pathlib

from bayesobs.seeds import key_digest, stable_rng, stable_seed

KEY = (1234, "magnitude", "short", 0)


def test_stable_seed_is_the_sha256_of_the_repr():
    # pinned: the seeds the runner, the simulated subjects and search drew from before
    assert stable_seed(KEY) == 11270061916292862784
    assert stable_seed(KEY, nbytes=4) == 4249572160
    assert key_digest(KEY) == hashlib.sha256(repr(KEY).encode()).digest()
    assert stable_rng(KEY).integers(0, 10**9) == 653572347
    assert stable_seed((*KEY, 1)) != stable_seed(KEY)


def test_no_module_derives_a_seed_from_a_repr_on_its_own():
    """sha256-of-repr is written once, in bayesobs/seeds.py."""
    root = pathlib.Path(__file__).resolve().parents[1] / "bayesobs"
    hits = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "sha256(repr(" in p.read_text(encoding="utf-8").replace(" ", "")
    ]
    assert hits == ["seeds.py"], hits
