"""``python -m privfed.cli``."""

import sys

from privfed.cli import main

sys.exit(main())
