"""Human studies: ``bayesobs serve`` (the web app) and ``export`` (jsPsych, an open data set)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import BayesobsInputError


def _add_stimulus_options(p: argparse.ArgumentParser) -> None:
    """Which stimuli a participant sees (``serve`` and ``export``)."""
    p.add_argument(
        "--condition",
        action="append",
        help="repeatable, e.g. base, noise_constant (default: the spec's)",
    )
    p.add_argument(
        "--modality", action="append", choices=("text", "image", "multimodal"), help="repeatable"
    )
    p.add_argument("--trials", type=int, help="trials per session (default: the spec's)")
    p.add_argument("--ami", type=Path, metavar="DIR", help="AMI annotations for the duration task")
    p.add_argument(
        "--order",
        default="counterbalanced",
        help="block order: counterbalanced (default: a Latin square over modalities and session "
        "types, one row per participant, logged) or fixed (the spec's order for everyone)",
    )
    p.add_argument(
        "--minutes",
        type=float,
        help="duration stated on the consent page (default: estimated from the number of trials)",
    )
    p.add_argument(
        "--catch-every",
        type=int,
        metavar="N",
        help="an attention-check (catch) trial after every N trials, logged with catch = true "
        "and never fitted (a number to type as stated, or the only item of a picture to tap)",
    )


def cmd_serve(args) -> int:
    """``bayesobs serve``: the web app for human participants."""
    if not 1 <= args.port <= 65535:
        raise BayesobsInputError(f"--port must be a port number from 1 to 65535, not {args.port}")
    from ..run.runner import load_spec
    from ..run.store import lock_folder

    load_spec(args.spec)  # a bad spec is refused before the folder is made
    # the folder's one writer for the server's whole life: no run, sweep, rescore or second
    # server writes beside the participants
    with lock_folder(args.out, "serve"):
        return _serve(args)


def _serve(args) -> int:
    import uvicorn

    from ..web import ParticipantServer
    from ..web.security import listen, uvicorn_config

    sock = listen(args.host, args.port)  # a busy port or a bad address: one line, no links
    with sock:
        server = ParticipantServer(
            args.spec,
            args.out,
            args.modality,
            args.condition,
            args.trials,
            token=args.token,
            ami=str(args.ami) if args.ami else None,
            order=args.order,
            minutes=args.minutes,
            catch_every=args.catch_every,
            hosts=[*(args.allow_host or []), args.host],
        )
        base = f"http://{args.host}:{args.port}"
        print(f"participants: {base}/   (or {base}/?pid=ID)")
        print(f"experimenter: {base}/experimenter?token={server.token}")
        minutes, basis = server.expected_minutes()
        print(
            f"{server.study.total} trials per participant (about {minutes} min, {basis}); block order "
            f"{args.order}; answers are appended to {args.out}/trials.jsonl"
        )
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print(f"note: listening on {args.host}, reachable from other machines", file=sys.stderr)
        uvicorn.Server(uvicorn_config(server.app(), log_level="warning")).run(sockets=[sock])
    return 0


def cmd_export(args) -> int:
    """``bayesobs export jspsych``: a jsPsych study folder for an online platform."""
    from ..web.jspsych import export_jspsych

    out = export_jspsych(
        args.spec,
        args.out,
        args.modality,
        args.condition,
        args.trials,
        ami=str(args.ami) if args.ami else None,
        platform=args.platform,
        order=args.order,
        break_every=args.break_every,
        completion_code=args.completion_code,
        prolific_code=args.prolific_code,
        datapipe_id=args.datapipe,
        minutes=args.minutes,
        catch_every=args.catch_every,
    )
    manifest = json.loads((out / "bayesobs_manifest.json").read_text())
    build = args.platform == "jatos" and not args.no_build  # ready to upload: built and zipped
    hint = "" if build else f"  (cd {out} && npm install && npm run build; then upload {out}/dist)"
    print(f"jsPsych experiment for {args.platform} -> {out}{hint}")
    print(
        f"completion code {manifest['completion_code']}; block order {args.order} "
        f"({len(manifest['orders'])} Latin-square row(s)); about {manifest['minutes']} min"
    )
    if build:
        from ..web.jatos import ready_to_upload

        print(ready_to_upload(out, manifest["spec"]["task"]))
    if args.platform == "pavlovia":
        print(
            "Pavlovia: save Pavlovia's jsPsych plugin as "
            f"{out}/jspsych-pavlovia.js before building (it is not on the npm registry)"
        )
    return 0


def cmd_export_dataset(args) -> int:
    """``bayesobs export dataset``: an experiment folder as an open data set."""
    from ..dataset import export_dataset

    summary = export_dataset(
        args.folder, args.out, scores=args.scores, images=args.images, license=args.license
    )
    parts = ", ".join(f"{name} {n}" for name, n in summary.rows.items())
    extra = f"; {len(summary.scores)} score file(s)" if summary.scores else "; no scores"
    if summary.images:
        extra += f"; {summary.images} image(s)"
    print(f"data set -> {summary.out}  (trials: {parts}{extra}; card {summary.out}/README.md)")
    return 0
