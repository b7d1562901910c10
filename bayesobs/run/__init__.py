"""The run wing: specs and plans, the runner and its engine, subjects, presentation, the store.

It writes the trial table (``trials.jsonl``); the fit wing (:mod:`bayesobs.fits`)
reads it.  Neither imports the other.
"""
