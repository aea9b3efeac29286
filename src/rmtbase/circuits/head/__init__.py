"""The head-behaviour search, a front end of :mod:`..core`: heads labelled by behaviour on
repeated tokens or a text (:mod:`.labels`, :mod:`.sequences`), every earlier source screened
and path patched (:mod:`.run`, the rule's use: :mod:`.find`), the table of findings
(:mod:`.table`). Importing it does not import torch."""
