"""Ready to upload: the npm build of an exported study, and its JATOS study archive (``.jzip``)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
import zipfile
from pathlib import Path

NPM_STEPS = (("install", "--no-audit", "--no-fund", "--prefer-offline"), ("run", "build"))
NPM_TIMEOUT_S = 600


def npm_build(out: Path) -> str | None:
    """``npm install && npm run build`` in ``out``; None when built, else why not (one line)."""
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed here"
    for step in NPM_STEPS:
        try:
            done = subprocess.run(
                [npm, *step], cwd=out, capture_output=True, text=True, timeout=NPM_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return f"npm {step[0]} took over {NPM_TIMEOUT_S} s"
        if done.returncode:
            said = (done.stderr.strip() or done.stdout.strip() or "no message").splitlines()
            return f"npm {step[0]} failed: {said[-1]}"
    return None


def write_jzip(out: Path, task: str) -> Path:
    """Zip ``out/dist`` as JATOS imports a study: one ``.jas`` file beside one assets folder."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", f"bayesobs_{task}_{out.resolve().name}")
    key = f"bayesobs/{out.resolve()}/{task}"  # the same folder, the same ids: re-import updates
    ids = {k: str(uuid.uuid5(uuid.NAMESPACE_URL, f"{key}/{k}")) for k in ("study", "comp", "batch")}
    study = {
        "version": "3",
        "data": {
            "uuid": ids["study"],
            "title": f"bayesobs {task} ({out.resolve().name})",
            "description": f"bayesobs {task} estimation study (jsPsych 8), saved trial by trial",
            "groupStudy": False,
            "linearStudy": False,
            "dirName": name,
            "comments": "",
            "jsonData": None,
            "endRedirectUrl": None,
            "componentList": [
                {
                    "uuid": ids["comp"],
                    "title": "jsPsych timeline",
                    "htmlFilePath": "index.html",
                    "reloadable": False,
                    "active": True,
                    "comments": "",
                    "jsonData": None,
                }
            ],
            "batchList": [
                {
                    "uuid": ids["batch"],
                    "title": "Default",
                    "active": True,
                    "maxActiveMembers": None,
                    "maxTotalMembers": None,
                    "maxTotalWorkers": None,
                    "allowedWorkerTypes": None,
                    "comments": None,
                    "jsonData": None,
                }
            ],
        },
    }
    path = out / f"{name}.jzip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{name}.jas", json.dumps(study, indent=2))
        for f in sorted((out / "dist").rglob("*")):
            if f.is_file():
                z.write(f, f"{name}/{f.relative_to(out / 'dist').as_posix()}")
    return path


def ready_to_upload(out: Path, task: str) -> str:
    """Build ``out`` and write its ``.jzip``; the line that says what was done, or what to do."""
    why = npm_build(out)
    if why:
        return (
            f"not built ({why}): run `cd {out} && npm install && npm run build`, then upload "
            f"{out}/dist (or export again where npm runs, for the JATOS archive .jzip)"
        )
    return f"built {out}/dist; JATOS study archive {write_jzip(out, task)} (Import study in JATOS)"
