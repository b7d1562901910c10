"""What a batch run says on stderr: its plan and saving, then each poll (a bar, or one line)."""

from __future__ import annotations

import sys


def plan_line(est: dict, rounds: int, sessions: list, dependent: int, earlier: int) -> str:
    """The requests, rounds and estimated saving of a run, and the batches of an earlier run."""
    return (
        f"batch: {est['calls']} request(s) in {rounds} round(s) "
        f"({dependent} session(s) with a rolling context ask one trial per round; "
        f"{len(sessions) - dependent} without one ask all theirs in the first round); "
        f"estimated saving 50% of the live price: about {est['input_tokens'] // 2:,} of "
        f"{est['input_tokens']:,} input tokens and up to {est['output_tokens'] // 2:,} of "
        f"{est['output_tokens']:,} output tokens"
        + (f"; {earlier} batch(es) of an earlier run collected first" if earlier else "")
    )


def progress_bar(total: int):
    """A progress bar of the trials on stderr."""
    from tqdm.auto import tqdm  # start-up time: tqdm loads only when a bar is shown

    return tqdm(total=total, unit="trial", desc="round 0", file=sys.stderr)


def show(states: list, rnd: int, planned: int, bar) -> None:
    """The round and the batches' status and request counts (on the bar, else one line on stderr)."""
    total = sum(s.total for s in states)
    done = sum(s.completed for s in states)
    failed = sum(s.failed for s in states)
    status = ",".join(sorted({s.status for s in states}))
    if bar is not None:
        bar.set_description(f"round {rnd}/{planned}")
        bar.set_postfix_str(f"{status} {done}/{total} done {failed} failed")
    else:
        print(
            f"batch: round {rnd}/{planned}: {len(states)} batch(es) {status}, "
            f"{done}/{total} requests done, {failed} failed",
            file=sys.stderr,
        )
