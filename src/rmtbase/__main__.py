"""``python -m rmtbase``: the same as the ``rmtbase`` executable."""

import sys

try:
    from .cli import console_main
except KeyboardInterrupt:  # Ctrl-C during the first imports: no traceback
    sys.stderr.write("rmtbase: interrupted\n")
    sys.exit(130)

sys.exit(console_main())
