"""``python -m rmtbase``: the same as the ``rmtbase`` executable."""

import sys

from .cli import console_main

sys.exit(console_main())
