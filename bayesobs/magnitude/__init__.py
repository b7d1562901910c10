"""Magnitude estimation (paradigm ``magnitude``, BayesBench): its four task families.

Line ratio and marker location (:mod:`bayesobs.magnitude.lines`), maze
distance (:mod:`bayesobs.magnitude.maze`), duration
(:mod:`bayesobs.magnitude.duration`) and numerosity
(:mod:`bayesobs.magnitude.numerosity`).  The simulated observers
(``bayesobs.run.subjects.sim``) and the analysis (the observer fits and scores
of :mod:`bayesobs.scores`, which need the fit wing) stay in their layers; the
registry (:mod:`bayesobs.paradigms`) names each part.
"""
