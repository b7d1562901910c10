"""Magnitude estimation (paradigm ``magnitude``, BayesBench): its four task families and simulated observers.

Line ratio and marker location (:mod:`bayesobs.magnitude.lines`), maze
distance (:mod:`bayesobs.magnitude.maze`), duration
(:mod:`bayesobs.magnitude.duration`) and numerosity
(:mod:`bayesobs.magnitude.numerosity`); the simulated observers
(:mod:`bayesobs.magnitude.subject`).  The analysis (the observer fits and
scores of :mod:`bayesobs.scores`, which need the fit wing) stays in its
layer; the registry (:mod:`bayesobs.paradigms`) names each part.
"""
