"""`python -m ratiotune`: the same command as `ratiotune`."""

import sys

from ratiotune.cli import main

sys.exit(main())
