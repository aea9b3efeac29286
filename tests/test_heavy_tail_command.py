"""``rmtbase heavy-tail``: the heavy-tail table alone, every file parsed back (heavy_tail.nc passes
the CF check), the terminal block within its bounds, ``--json``, ``--describe``; the model's
means against an independent reading of the null tables; what the metrics cannot describe (all
zero, d ≤ 19, a 4-expert MoE router) reported per matrix with everything else written; GGUF
(each tensor's own storage in the null, α equal to the safetensors folder's); ``--base`` (a
fine-tune's ΔW); several checkpoints (a trajectory), in process and on Dask workers.

Cost: tiny GPT-2 / LLaMA models (d = 64, 2 layers) with 5 null draws per shape; (slow) one
loopback Dask cluster of 2 workers."""

from __future__ import annotations

import contextlib
import json
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from test_cf_compliance import _assert_cf

from rmtbase.cli import main

FAST = ["--draws", "5", "--quiet"]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("RMTBASE_CACHE", str(tmp_path_factory.getbasetemp() / "ht-cache"))


def _gpt2(folder, seed=0, n_embd=64, zero=()):
    """A random GPT-2 of 2 layers saved to ``folder``; ``zero``: module names whose weight is
    set to 0 in every layer (``attn.c_proj``, ``mlp.c_proj``)."""
    import torch
    import transformers as tf

    torch.manual_seed(seed)
    cfg = tf.GPT2Config(n_embd=n_embd, n_head=4, n_layer=2, vocab_size=50, n_positions=32,
                        bos_token_id=0, eos_token_id=0)
    model = tf.GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for block in model.transformer.h:
            for name in zero:
                block.get_submodule(name).weight.zero_()
    model.save_pretrained(folder)
    return str(folder)


def _run(capsys, argv):
    code = main(argv)
    got = capsys.readouterr()
    assert code == 0, got.err
    return got


def test_every_file_and_the_terminal(tmp_path, capsys):
    """The folder holds what the docs list; stdout is summary.txt (≤ 24 lines, each ≤ 200
    characters); the CSV's α is the table's; heavy_tail.nc passes the CF-1.10 check."""
    from rmtbase.report.heavy_tail_text import MAX_LINES

    out = tmp_path / "out"
    got = _run(capsys, ["heavy-tail", _gpt2(tmp_path / "g"), "--out", str(out), *FAST])
    files = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert files == {"heavy_tail.nc", "heavy_tail.csv", "summary.txt", "report.html",
                     "manifest.json", "figures/alpha_by_layer.png",
                     "figures/alpha_histogram.png", "figures/heavy_tail_esd.png"}
    summary = (out / "summary.txt").read_text()
    assert got.out == summary
    lines = summary.splitlines()
    assert len(lines) <= MAX_LINES and max(map(len, lines)) <= 200, lines
    assert lines[0].startswith("Heavy tails of g ") and "12 matrices with alpha" in lines[0]
    assert any(ln.startswith("q ") for ln in lines) and "'well trained'" in summary
    _assert_cf(out / "heavy_tail.nc")
    with xr.open_dataset(out / "heavy_tail.nc") as ds:
        ds = ds.load()
    csv = pd.read_csv(out / "heavy_tail.csv")
    assert len(csv) == 12
    for row in csv.itertuples():
        np.testing.assert_allclose(row.alpha, float(ds["value"].sel(
            layer=row.layer, component=row.component, metric="alpha")), rtol=1e-5)
    assert 'alt="alpha_by_layer.png"' in (out / "report.html").read_text()


def test_json_and_describe(tmp_path, capsys):
    """--json: the schema first, every matrix with its α and p, no NaN; --describe: the shapes
    of the same matrices, nothing written."""
    g = _gpt2(tmp_path / "g")
    got = _run(capsys, ["heavy-tail", g, "--out", str(tmp_path / "o"), "--json",
                        "--no-figures", *FAST])
    doc = json.loads(got.out, parse_constant=lambda c: pytest.fail(f"JSON holds {c}"))
    assert next(iter(doc)) == "schema" and doc["schema"] == "rmtbase.heavy-tail/1"
    (entry,) = doc["entries"]
    assert len(entry["matrices"]) == 12 and doc["fdr"] == 0.05 and doc["draws"] == 5
    assert all(m["alpha"] > 1 and 0 < m["alpha_p"] <= 1 for m in entry["matrices"])
    assert {k["kind"] for k in entry["kinds"]} == {"q", "k", "v", "o", "ffn_in", "ffn_out"}
    assert entry["summaries"]["log_norm"]["p"] is None  # conditioned on: no p
    desc = _run(capsys, ["heavy-tail", g, "--describe"]).out.splitlines()
    assert desc[-1] == "12 matrices" and len(desc) == 14
    assert desc[1].split() == ["0", "q", "64", "64", "64", "1.00", "float32", "float32"]
    # no MODEL: the embedded all-MiniLM-L6-v2 (6 layers of q, k, v, o, ffn_in, ffn_out)
    assert _run(capsys, ["heavy-tail", "--describe"]).out.splitlines()[-1] == "36 matrices"


def test_the_means_null_is_one_draw_per_matrix(tmp_path):
    """Mean α's null, recomputed from the null tables: replicate r takes draw (r + j) mod D of
    the j-th matrix of a table (the 8 matrices of 64 × 64 share one), the 4 of 256 × 64 another."""
    from rmtbase.baseline.heavy_tail_null import heavy_tail_null_table
    from rmtbase.scoring.matrices.heavy_tail import score_heavy_tail

    ds = score_heavy_tail(_gpt2(tmp_path / "g"), draws=9)
    tables = {shape: heavy_tail_null_table(*shape, draws=9)["metric_alpha"].values
              for shape in ((64, 64), (256, 64))}
    rows, seen = [], {}
    for layer in (0, 1):
        for comp in ds["component"].values:
            cell = ds.sel(layer=layer, component=comp)
            shape = (64, 64) if int(cell["rows"]) == int(cell["cols"]) else (256, 64)
            j = seen[shape] = seen.get(shape, -1) + 1
            rows.append([tables[shape][(r + j) % 9] for r in range(9)])
    null = np.mean(rows, axis=0)
    s = ds.sel(summary="alpha")
    np.testing.assert_allclose([float(s[f"summary_null_{q}"]) for q in ("lo", "median", "hi")],
                               np.quantile(null, [0.025, 0.5, 0.975]), rtol=1e-12)
    np.testing.assert_allclose(float(s["summary_value"]),
                               np.mean(ds["value"].sel(metric="alpha").values), rtol=1e-12)
    # the table's variables carry the one definition scores.nc's heavy_tail_* variables take
    from rmtbase.report.heavy_tail_report import scores_variables

    nc = scores_variables(ds, ds["layer"].values)
    for name in ("value", "p_value", "band_units", "xmin", "summary_p"):
        assert ds[name].attrs == nc[f"heavy_tail_{name}"].attrs and ds[name].attrs["long_name"]


def test_matrices_the_metrics_cannot_describe(tmp_path, capsys, tmp_path_factory):
    """All-zero attention outputs and MLP outputs (score --heavy-tail, after the head score),
    d = 16 (every matrix), a 4-expert Mixtral's router: NaN metrics, the reason per matrix in
    heavy_tail.csv and one summary line naming them; everything else written."""
    from test_models_zoo import saved

    from rmtbase.scoring.matrices.heavy_tail import score_heavy_tail

    out = tmp_path / "zero"
    _run(capsys, ["score", _gpt2(tmp_path / "z", zero=("attn.c_proj", "mlp.c_proj")), "--out",
                  str(out), "--stats", "spectral", "--draws", "300", "--growth-budget", "0",
                  "--no-figures", "--quiet", "--heavy-tail", "--heavy-tail-draws", "5"])
    csv = pd.read_csv(out / "heavy_tail.csv").set_index(["layer", "component"])
    zero = csv.loc[csv.index.get_level_values(1).isin(["o", "ffn_out"])]
    assert len(zero) == 4 and (zero["reason"] == "every entry zero").all()
    assert zero["alpha"].isna().all() and csv.drop(zero.index)["alpha"].notna().all()
    assert "No alpha for 4: L0 o (every entry zero), L0 ffn_out" in (out / "summary.txt").read_text()
    small = tmp_path / "small"
    got = _run(capsys, ["heavy-tail", _gpt2(tmp_path / "s", n_embd=16), "--out", str(small),
                        *FAST])
    assert "No alpha for 12: L0 q (16 eigenvalues, fewer than 20)" in got.out
    assert pd.read_csv(small / "heavy_tail.csv")["alpha"].isna().all()
    _, mixtral = saved("mixtral", tmp_path_factory)
    ds = score_heavy_tail(str(mixtral), draws=5)
    router = ds.sel(component="router")
    assert router["reason"].values.tolist() == ["4 eigenvalues, fewer than 20"] * 2
    assert np.isnan(router["value"].values).all()
    others = ds.drop_sel(component="router")["value"].sel(metric="alpha").values
    assert np.isfinite(others[ds.drop_sel(component="router")["rows"].values > 0]).all()


def _llama(folder):
    import torch
    import transformers as tf

    torch.manual_seed(0)
    model = tf.LlamaForCausalLM(tf.LlamaConfig(
        vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
    model.save_pretrained(folder)
    return model


def test_a_gguf_file_reads_each_tensors_storage(tmp_path, capsys):
    """A tiny LLaMA as a safetensors folder and as GGUF (F32, q in Q8_0): α of every F32 tensor
    equals the folder's (rtol 1e-9: the same float32 values, llama.cpp's row permutation undone);
    the null of the Q8_0 tensors is drawn at q8_0, the others' at float32."""
    import _gguf

    from rmtbase.scoring.matrices.heavy_tail import score_heavy_tail

    model = _llama(tmp_path / "hf")
    path = _gguf.write_hf(model, tmp_path / "m.gguf", "llama", qtypes={"attn_q": "Q8_0"})
    folder = score_heavy_tail(str(tmp_path / "hf"), draws=5)
    gguf = score_heavy_tail(str(path), draws=5)
    storage = gguf["null_storage"].to_series()
    assert set(storage[storage.index.get_level_values("component") == "q"]) == {"q8_0"}
    assert set(storage[storage.index.get_level_values("component") != "q"]) == {"float32"}
    same = gguf["component"].values[gguf["component"].values != "q"]
    np.testing.assert_allclose(gguf["value"].sel(component=same, metric="alpha"),
                               folder["value"].sel(component=same, metric="alpha"), rtol=1e-9)
    assert np.isfinite(gguf["p_value"].sel(component="q", metric="alpha")).all()


def test_a_fine_tunes_delta(tmp_path):
    """--base: ΔW = W − W_base per matrix; a matrix left unchanged is 'every entry zero'."""
    import torch
    import transformers as tf

    from rmtbase.scoring.matrices.heavy_tail import score_heavy_tail
    from rmtbase.stats.heavy_tail import heavy_tail_metrics

    base = _gpt2(tmp_path / "base")
    model = tf.GPT2LMHeadModel.from_pretrained(base)
    torch.manual_seed(3)
    with torch.no_grad():
        for block in model.transformer.h:
            block.mlp.c_fc.weight.add_(0.01 * torch.randn_like(block.mlp.c_fc.weight))
    model.save_pretrained(tmp_path / "tuned")
    ds = score_heavy_tail(str(tmp_path / "tuned"), base=base, draws=5)
    assert ds.attrs["model"] == "tuned vs base"
    reason = ds["reason"].to_series()
    assert set(reason[reason.index.get_level_values("component") != "ffn_in"]) == {
        "every entry zero"}
    w = model.transformer.h[1].mlp.c_fc.weight.detach().double().numpy().T
    w0 = tf.GPT2LMHeadModel.from_pretrained(base).transformer.h[1].mlp.c_fc.weight
    delta = w - w0.detach().double().numpy().T
    np.testing.assert_allclose(float(ds["value"].sel(layer=1, component="ffn_in",
                                                     metric="alpha")),
                               heavy_tail_metrics(delta)["alpha"], rtol=1e-9)
    assert set(ds["null_storage"].sel(component="ffn_in").values) == {"float32"}


def test_a_lora_adapters_delta(tmp_path):
    """A PEFT LoRA adapter over the tiny LLaMA: ΔW = (alpha/r) B A of q_proj (r = 24) is the
    matrix scored (its α that of the product); k_proj's rank 4 leaves no power-law fit (fewer
    than 20 eigenvalues above 1e-5); a matrix the adapter leaves alone is all zero."""
    from safetensors.numpy import save_file

    from rmtbase.scoring.matrices.heavy_tail import score_heavy_tail
    from rmtbase.stats.heavy_tail import heavy_tail_metrics

    _llama(tmp_path / "base")
    rng = np.random.default_rng(5)
    tensors, want = {}, {}
    for i in range(2):
        for m, r, rows in (("q", 24, 64), ("k", 4, 32)):
            a = (0.05 * rng.standard_normal((r, 64))).astype(np.float32)
            b = (0.05 * rng.standard_normal((rows, r))).astype(np.float32)
            pre = f"base_model.model.model.layers.{i}.self_attn.{m}_proj"
            tensors[f"{pre}.lora_A.weight"], tensors[f"{pre}.lora_B.weight"] = a, b
            want[(i, m)] = (16 / r) * (b.astype(np.float64) @ a)
    adapter = tmp_path / "lora"
    adapter.mkdir()
    save_file(tensors, str(adapter / "adapter_model.safetensors"))
    (adapter / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "r": 4, "lora_alpha": 16, "rank_pattern": {"q_proj": 24},
         "target_modules": ["q_proj", "k_proj"]}))
    ds = score_heavy_tail(str(adapter), base=str(tmp_path / "base"), draws=5)
    assert ds.attrs["model"] == "lora vs base"
    np.testing.assert_allclose(ds["value"].sel(layer=1, component="q", metric="alpha"),
                               heavy_tail_metrics(want[(1, "q")].astype(np.float32))["alpha"],
                               rtol=1e-6)
    reason = ds["reason"].to_series()
    assert set(reason.xs("k", level="component")) == {
        "4 eigenvalues above 1e-05: no power-law fit"}
    assert set(reason.xs("v", level="component")) == {"every entry zero"}
    assert np.isfinite(ds["value"].sel(component="k", metric="stable_rank")).all()


def _checkpoints(tmp_path) -> str:
    for k, step in enumerate((100, 200)):
        _gpt2(tmp_path / "ckpt" / f"step{step}", seed=k)
    return str(tmp_path / "ckpt" / "step*")


def test_refusals_name_what_to_do(tmp_path, capsys):
    """A LoRA adapter without --base, a 'fine-tune' of another architecture: one line each,
    naming models by their folder, before any work."""
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    _llama(tmp_path / "llama")
    g = _gpt2(tmp_path / "g")
    capsys.readouterr()  # transformers' save bars
    for argv, want in (([str(adapter)], "is a PEFT LoRA adapter: give its base model with "
                                        "--base"),
                       ([g, "--base", str(tmp_path / "llama")],
                        "g (gpt2, 2 layers) is not a fine-tune of llama (llama, 2 layers)")):
        assert main(["heavy-tail", *argv, "--out", str(tmp_path / "o"), *FAST]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and want in err[0], err
    assert not (tmp_path / "o").exists()


def test_checkpoints_make_a_trajectory(tmp_path, capsys):
    """Two checkpoints ``ckpt/step100``, ``ckpt/step200``: one table along ``checkpoint`` with
    steps 100, 200, each entry the table of its checkpoint alone (exact: one process), the
    trajectory figure."""
    from rmtbase.scoring.matrices.heavy_tail import score_heavy_tail

    out = tmp_path / "traj"
    got = _run(capsys, ["heavy-tail", _checkpoints(tmp_path), "--out", str(out), *FAST])
    assert "step200 (step 200): median alpha" in got.out
    assert (out / "figures" / "alpha_trajectory.png").stat().st_size > 5000
    with xr.open_dataset(out / "heavy_tail.nc") as ds:
        ds = ds.load()
    assert ds["step"].values.tolist() == [100.0, 200.0]
    alone = score_heavy_tail(str(tmp_path / "ckpt" / "step200"), draws=5)
    # exact: the same programs on the same matrices and cached null, one process
    np.testing.assert_array_equal(ds["value"].sel(checkpoint="step200").values,
                                  alone["value"].values)


@pytest.mark.slow
def test_score_heavy_tail_on_dask_workers(tmp_path, capsys):
    """``score CKPTS --heavy-tail --workers 2``: the heavy-tail tables as Dask tasks, the same α
    (rtol 1e-12: other processes) and p as ``rmtbase heavy-tail`` in process; the quick tier keeps
    the collection's claim (test_checkpoints_make_a_trajectory)."""
    glob = _checkpoints(tmp_path)
    here, dask = tmp_path / "here", tmp_path / "dask"
    _run(capsys, ["heavy-tail", glob, "--out", str(here), "--no-figures", *FAST])
    _run(capsys, ["score", glob, "--out", str(dask), "--workers", "2", "--stats", "spectral",
                  "--draws", "300", "--growth-budget", "0", "--no-figures", "--quiet",
                  "--heavy-tail", "--heavy-tail-draws", "5"])
    with xr.open_dataset(here / "heavy_tail.nc") as ds, \
            xr.open_dataset(dask / "heavy_tail.nc") as dds:
        np.testing.assert_allclose(dds["value"].values, ds["value"].values, rtol=1e-12)
        # exact: add-one p counts null draws of the same cached file on either side of alpha
        np.testing.assert_array_equal(dds["p_value"].values, ds["p_value"].values)
    assert "step200 (step 200): median alpha" in (dask / "summary.txt").read_text()


def test_fdr_and_the_deprecated_alpha(tmp_path, capsys, monkeypatch):
    """--fdr is the level; --alpha still works with one FutureWarning and means the same; both
    at once are refused in one line; the heavy-tail table records the level as fdr."""
    from rmtbase.cli import build_parser, score_modes
    from rmtbase.cli._fdr import DEPRECATED, fdr_level
    from rmtbase.errors import InputError

    args = build_parser().parse_args(["score", "m", "--alpha", "0.1"])
    with pytest.warns(FutureWarning, match="^--alpha is deprecated"):
        assert fdr_level(args) == 0.1
    assert str(DEPRECATED).startswith("--alpha is deprecated: it is the Benjamini-Hochberg")
    seen = {}

    def single(args, plan, show):
        seen["alpha"] = plan.settings.alpha
        raise InputError("stop here")

    monkeypatch.setattr(score_modes, "single", single)
    g = _gpt2(tmp_path / "g")
    for argv in (["--fdr", "0.2"], ["--alpha", "0.2"]):
        with pytest.warns(FutureWarning) if "--alpha" in argv else _no_warning():
            main(["score", g, "--out", str(tmp_path / "o"), "--quiet", *argv])
        assert seen.pop("alpha") == 0.2
    capsys.readouterr()
    assert main(["heavy-tail", g, "--fdr", "0.1", "--alpha", "0.1", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["rmtbase: error: give the level once: --fdr (--alpha is its deprecated "
                   "spelling)"]
    with pytest.warns(FutureWarning):
        _run(capsys, ["heavy-tail", g, "--alpha", "0.2", "--out", str(tmp_path / "h"),
                      "--no-figures", *FAST])
    with xr.open_dataset(tmp_path / "h" / "heavy_tail.nc") as ds:
        assert ds.attrs["fdr"] == 0.2 and "alpha" not in ds.attrs


@contextlib.contextmanager
def _no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        yield
