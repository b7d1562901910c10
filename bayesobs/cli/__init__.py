"""Command-line interface: argument parsing and printing over the library.

Each command parses its arguments, calls the library function a notebook
would call (``fit``: :func:`bayesobs.fits.fitting.fit_batch` and
:func:`bayesobs.report.posterior.write_outputs`; ``score``: :func:`bayesobs.score`
and :meth:`bayesobs.Scores.to_folder`; ``run``/``sweep``:
:func:`bayesobs.run.runner.run_task`/:func:`bayesobs.run.runner.sweep`; ``rescore``:
:func:`bayesobs.rescore_folder`; ``report``:
:func:`bayesobs.report.build_report`; ``compare``:
:func:`bayesobs.compare.run_compare`; ``calibrate``:
:func:`bayesobs.calibration.calibrate`; ``serve``, ``export``, ``simulate``)
and prints a summary.  Bad input exits with status 2 and a one-line message,
never a traceback.

One module per command family: ``parser`` (every command's options and
:func:`main`), ``options`` (the options several commands share), ``fit``,
``score``, ``run`` (``run``, ``sweep``, ``rescore``), ``report`` (``report``,
``compare``), ``humans`` (``serve``, ``export``) and ``simulation``
(``simulate``, ``design``, ``calibrate``).  This package only re-exports them.
"""

from __future__ import annotations

from .fit import cmd_fit, fit_bootstrap_warnings
from .humans import cmd_export, cmd_export_dataset, cmd_serve
from .options import WORKER_INPUT_BYTES, _input_bytes  # noqa: F401 (tests/test_workers.py)
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
    "cmd_fit",
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
