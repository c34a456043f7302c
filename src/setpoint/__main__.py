"""``python -m setpoint``."""

import sys

from setpoint.cli.main import main

sys.exit(main())
