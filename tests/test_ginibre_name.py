"""The full-rank ensemble and the product-network kind are named "ginibre".

"gaussian" names only the Gaussian null. The old spelling is still accepted where the text
enters (Python: a DeprecationWarning; CLI: one line on stderr) and gives the same numbers; what
is written says "ginibre"; the PRNG keys keep the old name, so the draws did not change (the
key of draw i is pinned here by rebuilding it by hand).
"""

import json
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rmtbase.analytic import network_finite as nf
from rmtbase.analytic import product_network as pn
from rmtbase.analytic._network_kind import KINDS
from rmtbase.baseline.network_tables import network_cell_key, network_table
from rmtbase.baseline.null import null_draws
from rmtbase.baseline.table_contents import ENSEMBLES, check_ensemble
from rmtbase.baseline.tables import baseline
from rmtbase.cli import main
from rmtbase.ensembles import gaussian, ginibre, named_key
from rmtbase.errors import InputError

OLD = pytest.warns(DeprecationWarning, match='"gaussian" is deprecated: use "ginibre"')


def test_names():
    assert ENSEMBLES == ("lowrank", "ginibre", "residual")
    from rmtbase.cli.baseline import ENSEMBLES as CLI_ENSEMBLES

    assert CLI_ENSEMBLES == ENSEMBLES
    assert KINDS == ("ginibre", "residual")
    assert gaussian is ginibre                      # the documented sampler keeps its old name
    assert nf.lyapunov_gaussian is nf.lyapunov_ginibre
    assert check_ensemble("ginibre") == "ginibre"
    with pytest.warns(DeprecationWarning, match="ensemble"):
        assert check_ensemble("gaussian") == "ginibre"
    with pytest.raises(InputError, match="ensemble must be one of lowrank, ginibre, residual"):
        check_ensemble("normal")
    with pytest.raises(InputError, match="kind must be one of ginibre, residual"):
        pn.moments("normal", 2)


def test_null_draws_old_spelling_same_draws_and_a_warning():
    key = jax.random.key(3)  # the spectral program of the next test (one compile for both)
    kw = dict(stats="spectral", return_lambda=True)
    new = null_draws(key, 16, 4, 3, ensemble="ginibre", **kw)
    with OLD as caught:
        old = null_draws(key, 16, 4, 3, ensemble="gaussian", **kw)
    assert [w.filename for w in caught] == [__file__]   # shown at the caller's line, once
    assert new.keys() == old.keys()
    for k in new:
        # exact: the alias is normalised before any drawing: one jitted program, same inputs
        assert np.array_equal(new[k], old[k]), k
    assert new["qk.lambda"].shape == (3, 16)        # all d eigenvalues: the full-rank matrix


def test_ginibre_draw_keeps_the_key_named_gaussian():
    """Draw i's d x d matrix is N(0, (σ_Q σ_K)² d_h) from named_key(fold_in(key, i), "gaussian"),
    the key name before the rename: rebuilt by hand (another program: float32 tolerance; a key
    derived from "ginibre" gives another matrix, far outside it)."""
    key, d, d_h = jax.random.key(5), 16, 4
    lam = null_draws(key, d, d_h, 3, ensemble="ginibre", stats="spectral",
                     return_lambda=True)["qk.lambda"]
    for i in range(3):
        for name, same in (("gaussian", True), ("ginibre", False)):
            g = math.sqrt(d_h) * jax.random.normal(named_key(jax.random.fold_in(key, i), name),
                                                   (d, d), jnp.float32)
            ref = np.sort(np.linalg.svd(np.asarray(g, np.float64), compute_uv=False) ** 2)[::-1]
            assert np.allclose(lam[i], ref, rtol=1e-4, atol=1e-4 * ref[0]) == same, (i, name)


def test_table_old_spelling_writes_ginibre():
    kw = dict(draws=4, seed=1, stats="spectral", progress=False)
    new = baseline(16, 4, ensemble="ginibre", **kw)
    with OLD:
        old = baseline(16, 4, ensemble="gaussian", **kw)
    assert old.attrs["ensemble"] == new.attrs["ensemble"] == "ginibre"
    assert "gaussian" not in old.attrs["sampler"]
    for v in new.data_vars:
        # exact: the alias is normalised before any drawing: one jitted program, same inputs
        assert np.array_equal(new[v].values, old[v].values, equal_nan=True), v


def test_network_table_old_spelling_and_key():
    kw = dict(draws=3, seed=4, stats="spectral", progress=False)
    new = network_table(4, [1, 2], 1.0, kind="ginibre", **kw)
    with OLD:
        old = network_table(4, [1, 2], 1.0, kind="gaussian", **kw)
    assert old.attrs["network"] == new.attrs["network"] == "ginibre"
    assert old.attrs["ensemble"] == "ginibre product network"
    for v in new.data_vars:
        # exact: the alias is normalised before any drawing: one jitted program, same inputs
        assert np.array_equal(new[v].values, old[v].values), v
    pinned = jax.random.fold_in(named_key(jax.random.key(4), "gaussian"), 4)
    # exact: PRNG key data (integers)
    assert np.array_equal(jax.random.key_data(network_cell_key(4, "ginibre", 4)),
                          jax.random.key_data(pinned))


def test_analytic_old_spelling():
    with OLD:
        old = pn.moments_exact("gaussian", 3, 1, 4)
    assert old == pn.moments_exact("ginibre", 3, 1, 4)
    with OLD:
        assert nf.element_kurtosis("gaussian", 5, 2, 1) == nf.element_kurtosis("ginibre", 5, 2, 1)


def _cli(capsys, argv):
    assert main(argv) == 0
    return capsys.readouterr()


def test_cli_product_network_old_spelling(capsys):
    args = ["product-network", "--depth", "2", "--gain", "1.5", "--d", "6", "--json"]
    new = _cli(capsys, args + ["--kind", "ginibre"])
    old = _cli(capsys, args + ["--kind", "gaussian"])
    assert json.loads(old.out) == json.loads(new.out)
    assert json.loads(old.out)["kind"] == "ginibre"
    assert new.err == ""
    lines = old.err.strip().splitlines()
    assert len(lines) == 1 and '--kind "gaussian" is deprecated: use "ginibre"' in lines[0]


def test_cli_baseline_old_spelling(tmp_path, capsys):
    from rmtbase.baseline.table_file import read_table

    args = ["baseline", "--d", "16", "--dh", "4", "--draws", "4", "--stats", "spectral",
            "--no-progress"]
    _cli(capsys, args + ["--ensemble", "ginibre", "--out", str(tmp_path / "new.nc")])
    err = _cli(capsys, args + ["--ensemble", "gaussian", "--out", str(tmp_path / "old.nc")]).err
    assert '--ensemble "gaussian" is deprecated' in err
    new, old = read_table(tmp_path / "new.nc"), read_table(tmp_path / "old.nc")
    assert old.attrs["ensemble"] == "ginibre"
    for v in new.data_vars:
        # exact: one process, one program: the CLI normalises the alias before drawing
        assert np.array_equal(new[v].values, old[v].values, equal_nan=True), v


@pytest.mark.parametrize("command", ["baseline", "sweep", "product-network"])
def test_help_says_ginibre(capsys, command):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "ginibre,residual}" in out
    assert not re.search(r"\{[^}]*gaussian|gaussian:|--(kind|network|ensemble) gaussian", out)
