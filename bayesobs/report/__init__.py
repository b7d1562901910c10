"""Figures and the offline HTML report."""

from . import figures
from .html import build_report

__all__ = ["build_report", "figures"]
