"""``python -m rmtbase``: the same as the ``rmtbase`` executable (:mod:`rmtbase._entry`)."""

import sys

from ._entry import main

sys.exit(main())
