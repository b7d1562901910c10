"""The ten observer variants of METHOD §2 and their factor labels."""

from __future__ import annotations

from typing import NamedTuple


class Variant(NamedTuple):
    """Static description of one observer variant.

    Attributes
    ----------
    name : str
        Variant name as written to ``fits.csv``.
    family : str
        ``"linear"``, ``"static"`` or ``"kalman"``.
    log : bool
        Whether the variant lives in log (Weber) space.
    gain : bool
        Whether a gain ``g >= 0`` and offset ``delta`` follow the observer.
    k : int
        Number of free parameters, including ``sigma``.
    """

    name: str
    family: str
    log: bool
    gain: bool
    k: int

    @property
    def bayesian(self) -> bool:
        """Whether the variant weighs a prior (every family but ``linear``)."""
        return self.family != "linear"

    @property
    def weber(self) -> bool:
        """Whether noise grows with the magnitude (the log-space variants)."""
        return self.log

    @property
    def sequential(self) -> bool:
        """Whether the prior is updated trial by trial (the Kalman family)."""
        return self.family == "kalman"

    @property
    def param_names(self) -> tuple[str, ...]:
        """Names of the free parameters, in the order of the parameter vector."""
        if self.family == "linear":
            return ("w", "b", "sigma")
        core = ("w_prior",) if self.family == "static" else ("rho",)
        return core + (("g", "delta") if self.gain else ()) + ("sigma",)


VARIANTS: tuple[Variant, ...] = (
    Variant("linear", "linear", False, False, 3),
    Variant("static", "static", False, False, 2),
    Variant("static_gain", "static", False, True, 4),
    Variant("kalman", "kalman", False, False, 2),
    Variant("kalman_gain", "kalman", False, True, 4),
    Variant("linear_log", "linear", True, False, 3),
    Variant("static_log", "static", True, False, 2),
    Variant("static_log_gain", "static", True, True, 4),
    Variant("kalman_log", "kalman", True, False, 2),
    Variant("kalman_log_gain", "kalman", True, True, 4),
)
VARIANT_NAMES: tuple[str, ...] = tuple(v.name for v in VARIANTS)
BY_NAME: dict[str, Variant] = {v.name: v for v in VARIANTS}

FACTORS: tuple[str, ...] = ("bayesian", "weber", "sequential", "gain")
# Nuisance factors of each factor of interest (METHOD §3).
NUISANCE: dict[str, tuple[str, ...]] = {
    "bayesian": ("weber",),
    "weber": ("bayesian", "sequential", "gain"),
    "sequential": ("bayesian", "weber", "gain"),
    "gain": ("bayesian", "weber", "sequential"),
}


def get_variant(name: str) -> Variant:
    """Return the variant called ``name``; raise ``ValueError`` listing valid names.

    Parameters
    ----------
    name : str
        A variant name (``linear``, ``static``, ``kalman_gain_log`` ...).

    Returns
    -------
    Variant
        Its row of the variant table.
    """
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(
            f"unknown observer variant {name!r}; choose from {', '.join(VARIANT_NAMES)}"
        ) from None
