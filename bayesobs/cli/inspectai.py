"""inspect_ai logs both ways: ``bayesobs import inspect`` and ``bayesobs export inspect``."""

from __future__ import annotations


def cmd_import_inspect(args) -> int:
    """``bayesobs import inspect``: inspect eval logs of bayesobs tasks into an experiment folder."""
    from ..inspectai.logs import import_logs

    n = import_logs(args.logs, args.out)
    extra = f"; {n['already']} already there" if n["already"] else ""
    if n["errors"]:
        extra += f"; {n['errors']} sample(s) ended in an error (their earlier trials are imported)"
    print(f"imported {n['trials']} trial(s) of {n['samples']} sample(s) -> {args.out}{extra}")
    return 0


def cmd_export_inspect(args) -> int:
    """``bayesobs export inspect``: an experiment folder as inspect eval logs."""
    from ..inspectai.logs import export_logs

    logs = export_logs(args.folder, args.out)
    print(f"{len(logs)} inspect log(s) -> {args.out}  (view: inspect view --log-dir {args.out})")
    return 0
