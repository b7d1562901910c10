"""Command-line interface: argument parsing and printing over the library."""

from __future__ import annotations

from .fit import cmd_fit, fit_bootstrap_warnings
from .humans import cmd_export, cmd_export_dataset, cmd_serve
from .inspectai import cmd_export_inspect, cmd_import_inspect
from .parser import build_parser, main
from .report import cmd_compare, cmd_report
from .run import check_base_url, cmd_rescore, cmd_run, cmd_sweep
from .score import cmd_score, leaderboard
from .simulation import cmd_calibrate, cmd_design, cmd_simulate, design_summary

__all__ = [
    "build_parser",
    "check_base_url",
    "cmd_calibrate",
    "cmd_compare",
    "cmd_design",
    "cmd_export",
    "cmd_export_dataset",
    "cmd_export_inspect",
    "cmd_fit",
    "cmd_import_inspect",
    "cmd_report",
    "cmd_rescore",
    "cmd_run",
    "cmd_score",
    "cmd_serve",
    "cmd_simulate",
    "cmd_sweep",
    "design_summary",
    "fit_bootstrap_warnings",
    "leaderboard",
    "main",
]
