"""Where rmtbase keeps and writes files, below every other part: the user cache directory
(:mod:`.user_cache`), single files written all or nothing (:mod:`.atomic`) and all-or-nothing
output folders (:mod:`.output`)."""

from .output import OutputFolder, check_output_dir
from .user_cache import cache_dir

__all__ = ["OutputFolder", "cache_dir", "check_output_dir"]
