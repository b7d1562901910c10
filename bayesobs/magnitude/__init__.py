"""Magnitude estimation (paradigm ``magnitude``, BayesBench): its four task families, table tasks (your own stimuli) and simulated observers."""
