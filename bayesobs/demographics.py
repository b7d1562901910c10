"""A participant export (Prolific's, or any) joined onto the trial table by participant id."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pandas as pd

from .errors import BayesobsInputError

PARTICIPANT_ID = "PROLIFIC_PID"


def _read_table(path: Path) -> pd.DataFrame:
    """The participant export, every field as text (CSV, or TSV by its suffix)."""
    if not path.is_file():
        raise BayesobsInputError(f"{path}: no such participant file")
    sep = "\t" if path.suffix.lower() == ".tsv" else ","
    try:
        return pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        msg = str(exc).strip().splitlines()[-1] if str(exc).strip() else "empty file"
        raise BayesobsInputError(f"{path}: cannot read the participant file: {msg}") from None


def join_participants(
    trials: pd.DataFrame, path: str | Path, id_column: str = PARTICIPANT_ID
) -> pd.DataFrame:
    """Add a participant export's columns to every trial of that participant.

    Column names become identifiers (``Ethnicity simplified`` ->
    ``Ethnicity_simplified``) so that ``--exclude`` and expressions can name
    them; a name the trial table already has gets a ``participant_`` prefix;
    columns that are numbers throughout become numbers. Trials whose
    subject has no row in the file keep empty values, with a warning that
    names how many participants that is.

    Parameters
    ----------
    trials : DataFrame
        A trial table with its ``subject`` column.
    path : str or Path
        The participant export (CSV, or TSV by its suffix).
    id_column : str
        The export's participant-id column, matched to ``subject``
        (default ``PROLIFIC_PID``).

    Returns
    -------
    DataFrame
        The trials with the export's other columns added.

    Raises
    ------
    BayesobsInputError
        When the file cannot be read, lacks ``id_column`` or repeats an id.
    """
    path = Path(path)
    people = read_participants(path, id_column, trials.columns)
    subjects = trials["subject"].astype(str)
    lost = sorted(set(subjects) - set(people.index))
    if lost:
        warnings.warn(
            f"{len(lost)} of {subjects.nunique()} participant(s) in the trials have no row in "
            f"{path} (by {id_column}; e.g. {lost[0]!r}): their {', '.join(people.columns[:4])}"
            f"{' ...' if len(people.columns) > 4 else ''} stay empty",
            stacklevel=2,
        )
    joined = people.reindex(subjects.to_numpy())
    joined.index = trials.index
    return pd.concat([trials, joined], axis=1)


def read_participants(path: Path, id_column: str = PARTICIPANT_ID, taken=()) -> pd.DataFrame:
    """The participant export indexed by id, names as identifiers (``participant_`` if taken)."""
    people = _read_table(path)
    if id_column not in people.columns:
        shown = ", ".join(list(people.columns)[:12])
        raise BayesobsInputError(
            f"{path}: no participant-id column {id_column!r} (columns: {shown}); "
            "name it with --participants-id"
        )
    people = people.dropna(subset=[id_column])
    twice = people[id_column].duplicated()
    if twice.any():
        raise BayesobsInputError(
            f"{path}: participant {people[id_column][twice].iloc[0]!r} has more than one row"
        )
    names = {}
    for c in people.columns.drop(id_column):
        name = re.sub(r"\W+", "_", str(c)).strip("_") or "column"
        names[c] = f"participant_{name}" if name in taken or name[0].isdigit() else name
    people = people.rename(columns=names).set_index(id_column)
    for c in people.columns:
        as_number = pd.to_numeric(people[c], errors="coerce")
        if as_number.notna().sum() == people[c].notna().sum():
            people[c] = as_number
    return people
