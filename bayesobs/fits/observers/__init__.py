"""Observer models (METHOD §2): variant table and pure model functions."""

from .models import (
    KalmanParams,
    LinearParams,
    StaticParams,
    kalman_gains,
    kalman_means,
    log_epsilon,
    loglik,
    predict_mean,
    predict_response,
    simulate,
    transform,
)
from .variants import FACTORS, NUISANCE, VARIANT_NAMES, VARIANTS, Variant, get_variant

__all__ = [
    "FACTORS",
    "NUISANCE",
    "VARIANTS",
    "VARIANT_NAMES",
    "KalmanParams",
    "LinearParams",
    "StaticParams",
    "Variant",
    "get_variant",
    "kalman_gains",
    "kalman_means",
    "log_epsilon",
    "loglik",
    "predict_mean",
    "predict_response",
    "simulate",
    "transform",
]
