"""The fit wing: run tables, the fitting kernel, batched fits, observers, controls, posteriors.

It reads the trial table the run wing (:mod:`bayesobs.run`) writes; neither
imports the other.
"""
