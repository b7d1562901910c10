"""bayesobs inside inspect_ai: every task an inspect task, and inspect logs both ways (issue 51).

``registry`` holds the ``@task`` functions inspect finds through its entry
point (``inspect eval bayesobs/line_ratio``); ``tasks`` builds them, ``solver``
asks a run's trials through the bayesobs runner, ``scorer`` records them in
the sample, and ``logs`` reads and writes inspect eval logs.  Importing this
package loads nothing of inspect_ai; its modules need the ``inspect`` extra.
"""
