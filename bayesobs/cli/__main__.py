"""``python -m bayesobs.cli``: the ``bayesobs`` console script."""

import sys

from .parser import main

if __name__ == "__main__":  # importing this module (pkgutil.walk_packages) runs nothing
    sys.exit(main())
