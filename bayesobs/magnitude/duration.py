"""Duration: how long a dialogue extract lasted, from word timings."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import BayesobsInputError
from ..stimuli.base import Stimulus, Task
from ..stimuli.distributions import draw_value

MAX_PAUSE_S = 3.0  # no silence longer than this inside an extract (it would be invisible in text)
NITE = "{http://nite.sourceforge.net/}"


@dataclass(frozen=True)
class Word:
    """One spoken word of a transcript: meeting, speaker and timing in seconds."""

    meeting: str
    speaker: str
    start: float
    end: float
    text: str
    punc: bool = False


def parse_words_xml(path: str | Path) -> list[Word]:
    """Words of one NXT ``*.words.xml`` file (``<w>`` elements, in file order)."""
    path = Path(path)
    parts = path.name.split(".")
    if len(parts) < 4 or parts[-2] != "words":
        raise BayesobsInputError(
            f"{path}: not an AMI words file (expected MEETING.SPEAKER.words.xml)"
        )
    meeting, speaker = parts[0], parts[1]
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise BayesobsInputError(f"{path}: malformed XML ({exc})") from None
    out = []
    for el in root:
        if el.tag != "w":
            continue
        start = float(el.get("starttime", "nan") or "nan")
        end = float(el.get("endtime", "nan") or "nan")
        out.append(Word(meeting, speaker, start, end, el.text or "", el.get("punc") == "true"))
    return out


def load_ami(folder: str | Path) -> dict[str, list[Word]]:
    """All meetings in an AMI folder (``words/*.words.xml`` or the files themselves)."""
    folder = Path(folder)
    files = sorted(folder.glob("words/*.words.xml")) or sorted(folder.glob("*.words.xml"))
    if not files:
        raise BayesobsInputError(f"{folder}: no AMI words files (words/*.words.xml) found")
    meetings: dict[str, list[Word]] = {}
    for f in files:
        for w in parse_words_xml(f):
            if np.isfinite(w.start) and np.isfinite(w.end):
                meetings.setdefault(w.meeting, []).append(w)
    for words in meetings.values():
        words.sort(key=lambda w: (w.start, w.end))
    return meetings


VOCAB = (
    "okay so we need to decide on the remote control design and um I think the "
    "buttons should be simple yeah right the budget is twelve euro fifty per unit "
    "what about the battery maybe solar or kinetic energy I'm not sure that's a good "
    "point let's look at the market research people want something fancy and easy "
    "to use the case could be rubber or plastic we also have to think about the logo "
    "and the colours of the company the user interface should have large buttons "
    "for volume and channels and maybe a speech recognition feature that would be "
    "nice but expensive so uh we should finish by the end of the meeting"
).split()


def synthetic_meeting(rng: np.random.Generator, seconds: float = 900.0) -> list[Word]:
    """A synthetic four-speaker dialogue with realistic timing (SYNTHETIC, not AMI)."""
    t = 0.0
    words: list[Word] = []
    speaker = "A"
    while t < seconds:
        speaker = str(rng.choice([s for s in "ABCD" if s != speaker]))
        for i in range(int(rng.integers(2, 26))):
            dur = float(np.clip(rng.lognormal(np.log(0.30), 0.35), 0.08, 1.2))
            text = str(rng.choice(VOCAB))
            words.append(Word("synthetic", speaker, round(t, 2), round(t + dur, 2), text))
            t += dur + (float(rng.uniform(0.0, 0.12)) if i else 0.0)
        t += float(rng.uniform(0.1, 1.2))
    return words


def transcript(words: list[Word]) -> str:
    """Speaker-labelled transcript; punctuation attaches to the previous word."""
    lines: list[list[str]] = []
    speakers: list[str] = []
    for w in words:
        if w.punc:
            if lines:
                lines[-1][-1] += w.text
            continue
        if not speakers or speakers[-1] != w.speaker:
            speakers.append(w.speaker)
            lines.append([])
        lines[-1].append(w.text)
    return "\n".join(f"{s}: {' '.join(ws)}" for s, ws in zip(speakers, lines, strict=True))


def extract(words: list[Word], start: int, target: float) -> tuple[float, int] | None:
    """Duration and end index (exclusive) of the extract from ``start`` closest to ``target``."""
    t0 = words[start].start
    best = None
    last_end = words[start].end
    for j in range(start, len(words)):
        w = words[j]
        if w.start - last_end > MAX_PAUSE_S and not w.punc:
            break
        last_end = max(last_end, w.end)
        d = last_end - t0
        if best is None or abs(d - target) < abs(best[0] - target):
            best = (d, j + 1)
        if d > target * 1.5 + 1:
            break
    return best


class Duration(Task):
    """Duration in seconds of a dialogue extract."""

    name = "duration"
    role = "dialogue duration estimator"
    person_task = (
        "read short extracts of meeting conversations and estimate how many seconds each took "
        "to say"
    )
    seconds_per_answer = 20.0  # an extract is read before it is judged
    instruction = (
        "Estimate how long, in seconds, this extract of a meeting conversation lasted when "
        "spoken, as a decimal number."
    )
    unit = "seconds"
    answer_range = (0.0, 600.0)
    value_range = answer_range  # a longer extract would be read as an invalid answer
    modalities = ("text",)

    def __init__(self, ami: str | Path | None = None):
        self.ami = ami
        self._meetings: dict[str, list[Word]] | None = None

    def meetings(self, rng: np.random.Generator) -> dict[str, list[Word]]:
        """The meetings to cut excerpts from: the AMI corpus if given, else a synthetic one."""
        if self.ami is not None:
            if self._meetings is None:
                self._meetings = load_ami(self.ami)
            return self._meetings
        return {"synthetic": synthetic_meeting(rng)}

    def generate(self, rng, low, high, n, options):
        """``n`` dialogue excerpts whose spoken duration lies in ``[low, high]`` seconds."""
        meetings = self.meetings(rng)
        names = sorted(meetings)
        source = "ami" if self.ami is not None else "synthetic"
        out = []
        for _ in range(n):
            for _attempt in range(500):
                target = draw_value(rng, low, high, options)
                name = names[int(rng.integers(len(names)))]
                words = meetings[name]
                start = int(rng.integers(len(words)))
                if words[start].punc:
                    continue
                got = extract(words, start, target)
                if got is None:
                    continue
                d, stop = got
                if low <= d <= high and abs(d - target) < 0.1 * target + 0.3:
                    span = words[start:stop]
                    params = {
                        "source": source,
                        "meeting": name,
                        "start_s": span[0].start,
                        "first_word": start,
                        "n_words": len(span),
                    }
                    out.append(Stimulus(self.name, round(d, 3), transcript(span), params))
                    break
            else:
                raise BayesobsInputError(
                    f"duration: no extract between {low} and {high} s could be drawn"
                )
        return out
