"""``docs/extending.md``'s examples run as written: its ``toml`` block is the package's
pyproject and its ``python`` blocks, in order, the module ``my_rmtbase/__init__.py``; the
package is installed as pip leaves one (tests/test_plugins.py's ``_install``) and a fresh process
imports the module first, then finds each plugin by its entry point's name, with no warning.
The module imports from ``rmtbase.extend`` only.

Cost: one fresh process (a few seconds).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from test_plugins import _install

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", PAGE.read_text("utf-8"), flags=re.S)


def test_the_examples_import_from_rmtbase_extend_only():
    module = "\n".join(_blocks("python"))
    imports = re.findall(r"^(?:from|import) (rmtbase\S*)", module, flags=re.M)
    assert imports and set(imports) == {"rmtbase.extend"}, imports


def test_the_examples_run_as_written_in_a_fresh_process(tmp_path):
    (toml,) = _blocks("toml")
    module = "\n\n".join(_blocks("python"))
    root = _install(tmp_path / "site", module, toml, name="my_rmtbase")
    code = textwrap.dedent('''
        import warnings
        warnings.simplefilter("error")  # a plugin that fails to load warns: fail instead
        import my_rmtbase  # the plugin module first, as a user's script does
        import jax.numpy as jnp
        from rmtbase.decision.axes import REGISTRY as AXES
        from rmtbase.models.registry import ADAPTERS
        from rmtbase.stats.null_kind import Null
        from rmtbase.stats.precision import round_trip
        from rmtbase.stats.spectral import spectral_stats
        from rmtbase.stats.statistic import statistic
        from rmtbase.stats.storage import storage_record

        assert type(Null.parse("toy-null")) is my_rmtbase.ToyNull
        assert isinstance(ADAPTERS["toygpt"], my_rmtbase.ToyAdapter)
        assert statistic("qk.top_share") is my_rmtbase.TOP_SHARE
        assert AXES["top_share"] is my_rmtbase.TOP_SHARE_AXIS
        assert storage_record("toy_t3p") is my_rmtbase.TOY_T3
        w = jnp.asarray([[0.5, -0.2, 0.05, -0.5] * 8])
        r = round_trip(w, "toy_t3p")  # ternary: -d, 0, d with d = max|x| = 0.5
        assert sorted(set(float(x) for x in r.ravel())) == [-0.5, 0.0, 0.5], r
        lam = jnp.asarray([[4.0, 2.0, 1.0, 1.0]])
        assert "top_share" not in spectral_stats(lam)  # a default set: the shipped ones
        top = spectral_stats(lam, (my_rmtbase.TOP_SHARE,))["top_share"]
        assert float(top[0]) == 0.5  # exact: 4 / 8
        print("ok")
    ''')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(ROOT / "src")])}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]
