"""Magnitude estimation (paradigm ``magnitude``, BayesBench): its four task families and simulated observers."""
