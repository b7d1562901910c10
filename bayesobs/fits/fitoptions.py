"""The options of a maximum-likelihood fit, built and checked once.

:class:`FitOptions` is what the CLI (``fit``, ``score``) or a library caller
builds once and hands down to :func:`bayesobs.api.fit_result`,
:func:`bayesobs.scores.score` and :func:`bayesobs.fits.fitting.fit_batch`, instead
of threading ``bootstrap``, ``seed``, ``progress``, ``resample``,
``interleaved`` and ``lapse`` through every signature.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from ..bootstrap import check_resample
from ..errors import BayesobsInputError
from ..limits import check


@dataclass(frozen=True)
class FitOptions:
    """How to fit: bootstrap, seed, progress bar, resampling scheme, interleaved column, lapse.

    Parameters
    ----------
    bootstrap : int
        Session-run bootstrap replicates (METHOD §7), 0 or more.
    seed : int
        Seed of the bootstrap draws, 0 or more.
    progress : bool
        Show a progress bar.
    resample : {"pooled", "stratified"}
        Bootstrap scheme (:func:`bayesobs.bootstrap.run_draws`).
    interleaved : str, optional
        A column whose level changes trial by trial inside a run (METHOD §10).
    lapse : bool
        Add a uniform lapse rate to every variant (METHOD §11).

    Raises
    ------
    BayesobsInputError
        On construction, for a value that is none of these.
    """

    bootstrap: int = 0
    seed: int = 0
    progress: bool = False
    resample: str = "pooled"
    interleaved: str | None = None
    lapse: bool = False

    def __post_init__(self):
        for name in ("bootstrap", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
                raise BayesobsInputError(f"{name} must be a whole number >= 0, not {value!r}")
            object.__setattr__(self, name, int(value))
        check("bootstrap", self.bootstrap, "bootstrap asks for")
        for name in ("progress", "lapse"):
            if not isinstance(getattr(self, name), bool):
                raise BayesobsInputError(
                    f"{name} must be True or False, not {getattr(self, name)!r}"
                )
        check_resample(self.resample)
        if self.interleaved is not None and (
            not isinstance(self.interleaved, str) or not self.interleaved
        ):
            raise BayesobsInputError(
                f"interleaved must be a column name or None, not {self.interleaved!r}"
            )


def fit_options(options: FitOptions | None = None, **keywords) -> FitOptions:
    """``options`` if given, else the :class:`FitOptions` that the keyword arguments name.

    The library functions keep their keyword arguments (``bootstrap=30``,
    ``seed=1``...) and build their options here, once; ``options``, when
    given, replaces them all.

    Parameters
    ----------
    options : FitOptions, optional
        Options built by the caller; when given, ``keywords`` are ignored.
    **keywords
        The fields of :class:`FitOptions` (``bootstrap``, ``seed``, ``progress``,
        ``resample``, ``interleaved``, ``lapse``), used when ``options`` is None.

    Returns
    -------
    FitOptions
        ``options``, or a new one built from ``keywords``.

    Raises
    ------
    BayesobsInputError
        When a keyword value is invalid (see :class:`FitOptions`).
    """
    return options if options is not None else FitOptions(**keywords)
