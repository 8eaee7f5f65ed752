"""``python -m kbatch.cli``: the ``kbatch`` command."""

import sys

from kbatch.cli.main import main

sys.exit(main())
