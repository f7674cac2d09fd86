import sys

from ratiotune.cli import main

sys.exit(main())
