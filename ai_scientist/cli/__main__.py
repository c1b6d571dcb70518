"""``python -m ai_scientist.cli``: the same entry point as the ``ai-scientist`` script."""

import sys

from .main import main

sys.exit(main())
