"""``python -m infertop`` is the ``infertop`` command."""

import sys

from infertop.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
