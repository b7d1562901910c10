"""The parser of every ``bayesobs`` command, and ``main``: the exit codes and one-line errors."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import BayesobsInputError, FatalSubjectError, missing_extra
from ..logprobs import RESPONSES
from ..run.imagecost import IMAGE_MODES
from .fit import cmd_fit
from .humans import _add_stimulus_options, cmd_export, cmd_export_dataset, cmd_serve
from .inspectai import cmd_export_inspect, cmd_import_inspect
from .options import (
    _add_participants_options,
    _add_scheduler_option,
    _add_trial_options,
    _positive_int,
    _probability,
)
from .report import cmd_compare, cmd_compare_trials, cmd_report
from .run import _add_run_options, cmd_rescore, cmd_run, cmd_sweep
from .score import cmd_psychometric, cmd_score
from .simulation import cmd_calibrate, cmd_design, cmd_simulate


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked (start-up time)."""

    def __init__(
        self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None
    ):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from .. import __version__  # start-up time: importlib.metadata only for --version

        print(f"bayesobs {__version__}")  # on stdout, as argparse's own version action
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every ``bayesobs`` command."""
    parser = argparse.ArgumentParser(
        prog="bayesobs",
        description="Bayesian psychophysics of language models and people.",
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="show program's version number and exit"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("fit", help="fit the ten observer variants; write fits.csv and evidence.csv")
    _add_trial_options(p)
    p.add_argument(
        "--method",
        choices=("mle", "posterior"),
        default="mle",
        help="mle (default): exact maximum likelihood with AIC; posterior: also NumPyro NUTS fits, "
        "diagnostics, PSIS-LOO, posterior BCS",
    )
    p.add_argument(
        "--hierarchical",
        action="store_true",
        help="posterior: pool subjects through a population prior",
    )
    p.add_argument(
        "--variant",
        action="append",
        help="posterior: fit only these variants (repeatable; default all ten)",
    )
    p.add_argument(
        "--response",
        choices=RESPONSES,
        default="sampled",
        help="sampled (default): the answers as written; expected: the mean of each answer's "
        "distribution (response_expected, logged by runs with --logprobs)",
    )
    p.add_argument(
        "--prior-predictive",
        action="store_true",
        help="posterior: also draw responses from the priors and write prior_predictive.csv "
        "(whether they cover the observed response range, per cell and variant)",
    )
    p.add_argument("--chains", type=int, default=4, help="posterior: chains (default 4)")
    p.add_argument(
        "--warmup", type=int, default=500, help="posterior: warm-up draws per chain (default 500)"
    )
    p.add_argument(
        "--draws", type=int, default=500, help="posterior: draws per chain (default 500)"
    )
    p.add_argument(
        "--transfer",
        metavar="A:B",
        help="cross-condition transfer: apply each variant's parameters fitted on condition A "
        "to condition B's stimuli; write transfer.csv (predicted vs observed slope, LL on B)",
    )
    _add_scheduler_option(p)
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser(
        "calibrate",
        help="simulation-based calibration of the posterior fits; write sbc.csv (exit 1 when a "
        "parameter's ranks are not uniform)",
    )
    p.add_argument(
        "--variant",
        action="append",
        help="calibrate only these variants (repeatable; default all ten)",
    )
    p.add_argument(
        "--sims", type=_positive_int, default=100, help="simulations per variant (default 100)"
    )
    p.add_argument(
        "--draws",
        type=_positive_int,
        default=99,
        help="thinned posterior draws per simulation (default 99: ranks 0..99 in 10 equal bins)",
    )
    p.add_argument("--chains", type=_positive_int, default=2, help="chains (default 2)")
    p.add_argument(
        "--warmup", type=_positive_int, default=300, help="warm-up draws per chain (default 300)"
    )
    p.add_argument(
        "--bins", type=_positive_int, default=10, help="rank bins of the chi-square (default 10)"
    )
    p.add_argument(
        "--alpha",
        type=_probability,
        default=0.05,
        help="family-wise level, Bonferroni over the parameters tested (default 0.05)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument(
        "--prior-scale",
        type=float,
        default=1.0,
        help="fit with every Normal/half-Normal prior scale multiplied by this (default 1); "
        "anything else is a deliberately wrong prior, to see the check fail",
    )
    p.add_argument("--out", required=True, type=Path, help="output folder (created)")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser(
        "run", help="run one task on subjects; append every trial to DIR/trials.jsonl"
    )
    p.add_argument("task", metavar="TASK", help="task name (tasks/TASK.toml) or a spec file")
    p.add_argument(
        "--modality",
        action="append",
        choices=("text", "image", "multimodal"),
        help="repeatable (default: the spec's modalities)",
    )
    p.add_argument(
        "--condition",
        action="append",
        metavar="CONDITION",
        help="repeatable (default: the spec's conditions)",
    )
    p.add_argument("--trials", type=int, help="trials per session run (default: the spec's)")
    p.add_argument("--runs", type=int, help="runs of each session type (default: the spec's)")
    p.add_argument("--out", type=Path, metavar="DIR", help="experiment folder (default runs/TASK)")
    _add_run_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "sweep", help="run a whole protocol (e.g. tasks/bayesbench.toml) on subjects"
    )
    p.add_argument("protocol", metavar="PROTOCOL", help="protocol file, e.g. tasks/bayesbench.toml")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="experiment folder")
    p.add_argument("--trials", type=int, help="trials per session run (default: each spec's)")
    p.add_argument("--runs", type=int, help="runs of each session type (default: each spec's)")
    _add_run_options(p)
    p.add_argument(
        "--adaptive",
        action="store_true",
        help="ask runs in rounds, only for cells whose conclusion is still open (docs/protocol.md)",
    )
    p.add_argument(
        "--first-runs", type=int, help="--adaptive: runs per session type in round 1 (default 2)"
    )
    p.add_argument(
        "--sign-level", type=float, help="--adaptive: |s_p| that settles a BCS sign (default 0.9)"
    )
    p.add_argument(
        "--risk",
        type=float,
        help="--adaptive: a question stays open while the protocol's runs would conclude "
        "otherwise with at least this probability (default 0.1)",
    )
    p.add_argument(
        "--place-width",
        type=float,
        help="--adaptive: a right/wrong threshold's 95%% interval, as a share of its level range, "
        "that settles it (default 0.2)",
    )
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser(
        "score",
        help="accuracy, cue combination, BCS and the BayesBench score with bootstrap intervals",
    )
    _add_trial_options(p)
    p.set_defaults(bootstrap=30)
    p.add_argument(
        "--non-oracle",
        choices=("response", "error"),
        default="response",
        help="variances behind the non-oracle Bayes weights: of responses (paper, default) or errors",
    )
    p.add_argument("--no-probe", action="store_true", help="skip the random-forest cue probe")
    p.add_argument(
        "--no-references",
        action="store_true",
        help="leave out the leaderboard's reference rows (random responder, ideal observer)",
    )
    p.add_argument(
        "--humans",
        action="append",
        default=[],
        metavar="PATTERN",
        help="subjects whose id matches this glob (repeatable, e.g. 'P*') are human participants: "
        "shown as references, never ranked, and pooled into the row reference:humans",
    )
    _add_scheduler_option(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser(
        "psychometric",
        help="Bayesian psychometric functions (psignifit 4's model) of a level,correct,total table",
    )
    p.add_argument(
        "table",
        type=Path,
        metavar="TABLE",
        help="CSV of level, correct[, total] per row, or an experiment folder (its right/wrong trials)",
    )
    p.add_argument(
        "--guess", type=float, help="the guess rate (chance), in [0, 1); a table needs it"
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    p.add_argument("--by", action="append", default=[], metavar="COLUMN", help="fit groups apart")
    p.add_argument(
        "--direction",
        choices=("increasing", "decreasing"),
        help="accuracy rises with the level (a table's default) or falls (a folder's default)",
    )
    p.add_argument("--sigmoid", choices=("norm", "logistic"), default="norm")
    p.add_argument("--bootstrap", type=_positive_int, default=200, help="the ML fit's intervals")
    p.set_defaults(func=cmd_psychometric)

    p = sub.add_parser(
        "rescore", help="re-read every logged reply of an experiment folder with today's parsers"
    )
    p.add_argument("folder", type=Path, metavar="DIR", help="experiment folder")
    p.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help="rescored trials (.jsonl, .csv or .parquet; default DIR/rescored.jsonl); "
        "trials.jsonl is never rewritten",
    )
    p.set_defaults(func=cmd_rescore)

    p = sub.add_parser("report", help="figures, tables and provenance as an offline HTML report")
    p.add_argument(
        "inputs",
        nargs="+",
        type=Path,
        metavar="DIR_OR_TRIALS",
        help="trial files, experiment folders, or a `bayesobs score` output folder",
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="report folder")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=30,
        help="replicates when scores must be computed (default 30)",
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--resample",
        choices=("pooled", "stratified"),
        default="pooled",
        help="bootstrap scheme when scores must be computed (default pooled)",
    )
    _add_participants_options(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "compare",
        help="mixed models of per-task scores on model features, and a leaderboard across folders",
    )
    p.add_argument(
        "folders", nargs="+", type=Path, metavar="SCOREDIR", help="`bayesobs score` output folders"
    )
    p.add_argument(
        "--features",
        type=Path,
        metavar="FILE",
        help="CSV (or .tsv): `subject` plus one column per model feature (numeric or categorical)",
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    p.add_argument(
        "--feature",
        action="append",
        metavar="COLUMN",
        help="repeatable: use only these feature columns (default: every column but subject)",
    )
    p.add_argument(
        "--report",
        action="store_true",
        help="also write the cross-model page DIR/report/index.html",
    )
    _add_participants_options(p)  # instead of --features: the participants' columns
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser(
        "compare-trials",
        help="trial-level agreement of two folders on the same trials (error consistency, "
        "paired correlations, w_prior and Kalman gain differences)",
    )
    p.add_argument("a", type=Path, metavar="A", help="experiment folder or trial table")
    p.add_argument("b", type=Path, metavar="B", help="experiment folder or trial table")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    p.add_argument(
        "--bootstrap", type=_positive_int, default=200, help="bootstrap replicates (default 200)"
    )
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--human-range",
        action="store_true",
        help="A holds people: is each model's w_prior inside their hierarchical posterior's "
        "population (human_range.csv; needs the [posterior] extra)",
    )
    p.set_defaults(func=cmd_compare_trials)

    p = sub.add_parser("serve", help="run a task on human participants in the browser")
    p.add_argument(
        "spec", metavar="SPEC", help="task name or spec file, e.g. tasks/line_ratio.toml"
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="experiment folder")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only)",
    )
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    _add_stimulus_options(p)
    p.add_argument("--token", help="experimenter page token (default: random, printed)")
    p.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        help="repeatable: a host name participants reach the server by (besides --host, "
        "localhost and IP addresses), e.g. the name of a reverse proxy; other Host headers "
        "are refused (DNS rebinding)",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "export",
        help="export a task as a jsPsych 8 experiment, or an experiment folder as an open data set",
    )
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    d = formats.add_parser(
        "dataset",
        help="an experiment folder as a Hugging Face-loadable data set (Parquet per paradigm, "
        "scores, dataset card)",
    )
    d.add_argument("folder", type=Path, metavar="DIR", help="experiment folder (run, sweep, serve)")
    d.add_argument(
        "--out", type=Path, required=True, metavar="OUT", help="data set folder (new or empty)"
    )
    d.add_argument(
        "--scores",
        type=Path,
        metavar="SCOREDIR",
        help="score folder of bayesobs score (default: DIR/scores when it exists)",
    )
    d.add_argument(
        "--images",
        choices=IMAGE_MODES,
        default="paths",
        help="image stimuli: paths into DIR (default), copy the PNGs into OUT/stimuli, or omit",
    )
    d.add_argument(
        "--license",
        default="cc-by-4.0",
        help="licence id stated in the dataset card for the trials and stimuli (default cc-by-4.0)",
    )
    d.set_defaults(func=cmd_export_dataset)
    p = formats.add_parser("jspsych", help="a self-contained jsPsych 8 experiment")
    p.add_argument("spec", metavar="SPEC", help="task name or spec file")
    p.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="experiment folder to write"
    )
    _add_stimulus_options(p)
    p.add_argument(
        "--platform",
        choices=("jatos", "pavlovia", "cognition", "prolific", "local"),
        default="local",
        help="where dist/ runs, which decides how data are saved as they come: jatos (each answer "
        "appended to the result), pavlovia (Pavlovia's jsPsych plugin), cognition (Cognition.run "
        "saves jsPsych data), prolific (DataPipe to the OSF a file per block, then back to "
        "Prolific), local (kept in the browser, a download at the end; default, for piloting)",
    )
    p.add_argument("--break-every", type=int, metavar="N", help="a break page after every N trials")
    p.add_argument(
        "--completion-code",
        metavar="CODE",
        help="code shown on the final page (default: --prolific-code, else a random code)",
    )
    p.add_argument(
        "--prolific-code",
        metavar="CODE",
        help="Prolific completion code: the final page returns the participant to Prolific",
    )
    p.add_argument("--datapipe", metavar="ID", help="DataPipe experiment id (--platform prolific)")
    p.add_argument(
        "--no-build",
        action="store_true",
        help="--platform jatos: write the project only (default: npm install && npm run build "
        "where npm runs, and the JATOS study archive DIR/*.jzip)",
    )
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "simulate",
        help="write a BayesBench-shaped trial table whose responses come from known observer models",
    )
    p.add_argument("--out", required=True, type=Path, help="output file (.csv, .parquet or .jsonl)")
    p.add_argument(
        "--subjects", type=int, default=3, help="number of simulated subjects (default 3)"
    )
    p.add_argument("--trials", type=int, default=40, help="trials per session (default 40)")
    p.add_argument("--runs", type=int, default=1, help="runs per session type (default 1)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser(
        "design",
        help="before running: model recovery, factor calibration and BCS power of a spec or protocol",
    )
    p.add_argument("spec", metavar="SPEC_OR_PROTOCOL", help="e.g. tasks/bayesbench.toml")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="output folder")
    p.add_argument(
        "--reps", type=int, default=50, help="simulated observers per model (default 50)"
    )
    p.add_argument(
        "--trials",
        metavar="N[,N...]",
        help="trials per session run, e.g. 20,40,80 (default: each spec's)",
    )
    p.add_argument("--runs", type=int, help="runs of each session type (default: each spec's)")
    p.add_argument(
        "--noise",
        type=float,
        default=0.1,
        help="response noise SD as a fraction of the mean session width (default 0.1)",
    )
    p.add_argument(
        "--missing",
        type=float,
        default=0.0,
        help="fraction of responses missing at random (default 0)",
    )
    p.add_argument(
        "--shifts",
        default="0,0.05,0.1,0.2",
        help="true w_prior shifts under the ablations for the BCS power (default 0,0.05,0.1,0.2)",
    )
    p.add_argument("--bootstrap", type=int, default=30, help="replicates behind s_p (default 30)")
    p.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    p.add_argument(
        "--cost-for",
        metavar="MODEL",
        help="print power against cost: each trial count's calls, tokens and dollars on this "
        "model, e.g. gpt-4o or openai:gpt-4o (costs.csv)",
    )
    p.add_argument(
        "--price",
        action="append",
        metavar="MODEL=IN,OUT",
        help="with --cost-for: dollars per million input and output tokens (over the shipped table)",
    )
    _add_scheduler_option(p)
    p.add_argument(
        "--adaptive",
        metavar="SUBJECT",
        action="append",
        help="simulate sweep --adaptive against the fixed protocol on this sim: subject (repeatable)",
    )
    p.set_defaults(func=cmd_design)

    # inspect_ai logs both ways (issue 51)
    p = formats.add_parser("inspect", help="an experiment folder as inspect_ai eval logs")
    p.add_argument("folder", type=Path, metavar="DIR", help="experiment folder")
    p.add_argument("--out", type=Path, required=True, metavar="LOGDIR", help="log folder")
    p.set_defaults(func=cmd_export_inspect)
    p = sub.add_parser("import", help="read another harness's logs into an experiment folder")
    kinds = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    p = kinds.add_parser("inspect", help="inspect_ai eval logs (.eval, .json) of bayesobs tasks")
    p.add_argument("logs", nargs="+", type=Path, metavar="LOG", help="inspect eval logs")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="experiment folder")
    p.set_defaults(func=cmd_import_inspect)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit code (2 for bad input, with a one-line message)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        from ..distributed import local_workers, use_scheduler

        local_workers()  # a bad BAYESOBS_WORKERS is refused before any work, whatever the command
        with use_scheduler(getattr(args, "scheduler", None)):
            return args.func(args)
    except BayesobsInputError as exc:
        print(f"bayesobs: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "bayesobs: interrupted; everything logged so far is kept (run the same command to resume)",
            file=sys.stderr,
        )
        return 130
    except FatalSubjectError as exc:
        print(f"bayesobs: error: {exc} (everything logged so far is kept)", file=sys.stderr)
        return 1
    except ImportError as exc:  # an optional part not installed: name its extra
        if (line := missing_extra(exc, args.command)) is None:
            raise
        print(f"bayesobs: error: {line}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a read-only folder: one line, never a traceback
        where = f" {exc.filename}" if exc.filename else ""
        print(f"bayesobs: error: cannot access{where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
