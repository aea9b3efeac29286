"""Draw the profile nulls shipped in ``src/rmtbase/data/profile``
(:data:`rmtbase.scoring.profile_cache.SHIPPED_PROFILES`), so that the default model's first
score draws nothing. Each file is what :func:`rmtbase.scoring.profile_cache.cached_profile_null`
writes to the user cache, under the same name; ``tests/test_profile_cache.py`` checks that the
shipped draws equal a fresh ``profile_null`` with the same seed.

    OPENBLAS_NUM_THREADS=1 python sims/ship_profile.py
"""

import os
import tempfile
from pathlib import Path

from rmtbase.scoring.profile_cache import SHIPPED_PROFILES, cached_profile_null, profile_path

OUT = Path(__file__).resolve().parents[1] / "src" / "rmtbase" / "data" / "profile"


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["RMTBASE_CACHE"] = cache
        for d, d_h, storage in SHIPPED_PROFILES:
            if (OUT / profile_path(d, d_h, storage, _draws(), 0).name).exists():
                continue  # shipped already (cached_profile_null would read it back)
            cached_profile_null(d, d_h, storage)
            src = profile_path(d, d_h, storage, _draws(), 0)
            target = OUT / src.name
            os.replace(src, target)
            print(f"{target} ({target.stat().st_size} bytes)")


def _draws():
    from rmtbase.scoring.profile import PROFILE_DRAWS

    return PROFILE_DRAWS


if __name__ == "__main__":
    main()
