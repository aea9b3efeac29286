"""``rmtbase compare``: layer profiles of the four spectral statistics across scored models,
each against its own null band, and per-model flag fractions (no weights are loaded)."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from _checkpoints import gpt2, trajectory  # noqa: E402

from rmtbase.analytic import product  # noqa: E402
from rmtbase.cli import main  # noqa: E402
from rmtbase.report import collection_figures, profiles, write_report  # noqa: E402
from rmtbase.scoring.collection.combine import entry  # noqa: E402
from rmtbase.scoring.collection.trajectory import score_collection  # noqa: E402
from rmtbase.scoring.score import score_model  # noqa: E402

OPTS = dict(stats="spectral", draws=300, max_draws=2000, progress=False)


@pytest.fixture(scope="module")
def cache(score_cache):
    return score_cache


@pytest.fixture(scope="module")
def scored(tmp_path_factory, cache):
    """A 3-checkpoint trajectory (d = 64, d_h = 16) and a 3-layer model with d_h = 32, each
    written as a score output folder."""
    root = tmp_path_factory.mktemp("cmp")
    steps = trajectory(root / "ckpt", strengths=(0.0, 1.5, 6.0))
    traj = score_collection([str(p) for p in steps], **OPTS)
    write_report(traj, root / "traj", figures=False)
    other = score_model(str(gpt2(root / "wide", seed=9, n_layer=3, n_head=2)), **OPTS)
    write_report(other, root / "wide-score", figures=False)
    return root, traj, other


def test_compare_writes_the_four_profiles_and_the_flag_table(scored, capsys):
    root, traj, other = scored
    out = root / "cmp"
    code = main(["compare", str(root / "traj"), str(root / "wide-score"), "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "rmtbase compare"
    for name in ("flags.csv", "profiles.csv", "summary.txt", "report.html", "figures/profiles.png",
                 *(f"figures/profile_{s}.png" for s in profiles.PROFILE_STATS)):
        assert name in manifest["files"], name
    flags = pd.read_csv(out / "flags.csv")
    assert list(flags["model"]) == ["traj:step0", "traj:step1", "traj:step2", "wide"]
    want = [float(entry(traj, i)["head_flag"].mean()) for i in range(3)]
    want.append(float(other["head_flag"].mean()))
    np.testing.assert_allclose(flags["fraction"], want)
    assert list(flags["d_h"]) == [16, 16, 16, 32] and flags["fraction"].iloc[0] == 0
    assert flags["fraction_spectrum"].iloc[2] == flags["fraction"].iloc[2] == 1
    prof = pd.read_csv(out / "profiles.csv")
    wide = prof[(prof["model"] == "wide") & (prof["stat"] == "npr")]
    np.testing.assert_allclose(wide["depth"], [0, 0.5, 1])
    np.testing.assert_allclose(wide["mean"], other["value"].sel(stat="qk.npr").mean("head"))
    # the same main() again: refused without --overwrite, then replaces its own earlier output
    assert main(["compare", str(root / "traj"), "--out", str(out)]) == 2
    capsys.readouterr()
    assert main(["compare", str(root / "traj"), "--out", str(out), "--overwrite",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["command"] == "rmtbase compare" and len(doc["models"]) == 3  # traj: 3 entries
    assert "flags.csv" in doc["files"] and "fraction" in doc["models"][0]


def test_profiles_are_self_normalised_and_bands_follow_each_models_null(scored):
    _, traj, other = scored
    x = profiles.head_values(other, "lambda_max")
    np.testing.assert_allclose(x, other["qk_spectrum"].values[..., 0], rtol=1e-4)
    for ds, c in ((entry(traj, 0), 16 / 64), (other, 32 / 64)):
        lo, med, hi = profiles.band_of(ds, "npr")
        assert lo < med < hi
        assert med == pytest.approx(1 / (1 + 2 * c), abs=0.05)  # NPR's MP⊠MP limit
        lo, med, hi = profiles.band_of(ds, "lambda_max")
        assert med == pytest.approx(float(product.edges(c)[1]), rel=0.3)  # near the edge x₊
    step0, step2 = entry(traj, 0), entry(traj, 2)
    for stat in profiles.PROFILE_STATS:  # the random init sits in its band, layer by layer
        lo, _, hi = profiles.band_of(step0, stat)
        m = np.nanmean(profiles.head_values(step0, stat), axis=1)
        assert ((m > lo) & (m < hi)).all(), (stat, m, lo, hi)
    assert (np.nanmean(profiles.head_values(step2, "lambda_max"), 1)
            > profiles.band_of(step2, "lambda_max")[2]).all()
    assert (np.nanmean(profiles.head_values(step2, "npr"), 1)
            < profiles.band_of(step2, "npr")[0]).all()


def test_plots_take_ax_none_and_return_axes(scored):
    import matplotlib.pyplot as plt

    _, traj, other = scored
    ax = profiles.plot_layer_profile([("wide", other), ("step0", entry(traj, 0))], "npr")
    assert len(ax.lines) >= 2
    ax2 = collection_figures.plot_trajectory(traj, "condition_number")
    assert ax2.get_yscale() == "log" and ax2.get_xlabel() == "training step"
    assert ax2.get_title().startswith("gpt2, d 64, d_h 16: condition_number")
    assert collection_figures.plot_flag_trajectory(traj).get_ylabel().startswith("fraction")
    fig = collection_figures.verdict_grid(traj)
    assert len(fig.axes) == 3 + 1
    plt.close("all")


def test_inputs_must_be_score_outputs(scored, capsys, tmp_path):
    root, _, _ = scored
    for argv, word in ((["compare", str(root / "wide"), "--out", str(tmp_path / "a")],
                        "score it first"),
                       (["compare", str(tmp_path / "nope"), "--out", str(tmp_path / "b")],
                        "does not exist"),
                       (["compare", str(root / "traj"), "--out", str(root / "wide-score")],
                        "not empty")):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and word in err[0], err


def test_collection_figures_name_what_their_entries_share():
    """A title names the one model, else the hub organisation, else the architecture and
    shape every entry shares (local checkpoints carry only their folder names)."""
    import xarray as xr

    from rmtbase.report._labels import collection_label

    def coll(models, **common):
        return xr.Dataset({"entry_attrs": (("checkpoint",), [json.dumps({"model": m})
                                                            for m in models])}, attrs=common)

    assert collection_label(xr.Dataset(attrs={"model": "/abs/path/ckpt-7"})) == "ckpt-7"
    assert collection_label(coll(["EleutherAI/pythia-70m"] * 3)) == "EleutherAI/pythia-70m"
    assert collection_label(coll(["meta-llama/A", "meta-llama/B"])) == "meta-llama"
    assert collection_label(coll(["step0", "step1"], architecture="gpt2", d=64, d_h=16)) == \
        "gpt2, d 64, d_h 16"
    assert collection_label(coll(["step0", "gpt2"], architecture="gpt2")) == ""
