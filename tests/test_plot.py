"""rmtbase.plot: every function returns its Axes (or Axes array), draws what it is given."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.figure  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from rmtbase import plot  # noqa: E402

rng = np.random.default_rng(0)


def test_hist_density_integrates_to_fraction_inside_range():
    x = rng.standard_normal(10_000)
    ax = plot.hist_density(x, bins=50, range=(-1.0, 1.0))
    assert isinstance(ax, matplotlib.axes.Axes)
    (st,) = ax.patches
    dens = st.get_data().values
    edges = st.get_data().edges
    frac = np.mean(np.abs(x) <= 1.0)
    assert np.sum(dens * np.diff(edges)) == pytest.approx(frac, rel=1e-12)


def test_functions_draw_on_given_axes_and_return_it():
    fig = matplotlib.figure.Figure()
    ax = fig.add_subplot()
    assert plot.hist_density(rng.standard_normal(100), ax=ax, log=True) is ax
    assert plot.analytic_curve([0, 1], [1, 2], ax=ax) is ax
    assert plot.ordered_values(rng.random((5, 10)), ax=ax) is ax
    assert plot.vlines([0.5, 1.0], ax=ax, labels=["a", "b"]) is ax
    assert plot.null_band(rng.random(50), ax=ax) is ax
    assert plot.null_band(rng.random((4, 50)), x=np.arange(4), ax=ax) is ax
    assert plot.entropy_sigma([0.1, 0.2], [0.0, 0.5], ax=ax) is ax
    ax2 = fig.add_subplot(2, 1, 2)
    assert plot.per_head(rng.random((3, 4)), ax=ax2, null=rng.random(30), log=True) is ax2
    ax3 = matplotlib.figure.Figure().add_subplot()
    out = plot.density_heatmap([rng.standard_normal(500) for _ in range(6)],
                               edges=np.linspace(-3, 3, 31), ax=ax3, n_heads=3)
    assert out is ax3


def test_new_axes_when_none():
    for fn, args in [(plot.hist_density, (rng.standard_normal(10),)),
                     (plot.ordered_values, (rng.random(10),)),
                     (plot.per_head, (rng.random((2, 3)),))]:
        assert isinstance(fn(*args), matplotlib.axes.Axes)


def test_ordered_values_sorts_descending():
    ax = plot.ordered_values(np.array([1.0, 3.0, 2.0]))
    # exact: copies of stored values (slices, reshapes, transposes; no arithmetic) (plotted data)
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), [3.0, 2.0, 1.0])
    # exact: integers / booleans
    np.testing.assert_array_equal(ax.lines[0].get_xdata(), [1, 2, 3])


def test_corner_has_pearson_bound():
    data = {"mean": rng.random(20), "skewness": rng.standard_normal(20),
            "excess_kurtosis": rng.random(20) * 3}
    axes = plot.corner(data, pearson="excess", groups=np.arange(20) % 2)
    assert axes.shape == (3, 3)
    panel = axes[2, 1]
    bound = [ln for ln in panel.lines if ln.get_label() == "Pearson bound"][0]
    g = bound.get_xdata()
    np.testing.assert_allclose(bound.get_ydata(), g**2 - 2.0)  # κ_ex ≥ γ² − 2  ⇔  κ ≥ γ² + 1
    assert not axes[0, 2].get_visible()
