"""The attention probe (rmtbase.probe): behaviour statistics, windows, encoder and decoder
(GQA) models, errors, the CLI and the join to a score. The behaviour numbers are checked
against a direct loop over ``output_attentions`` written here, independently of
``rmtbase.probe.behaviour``."""

import json
import math
import shutil

import _probe_models as pm
import numpy as np
import pytest
import xarray as xr

from rmtbase.cli import main
from rmtbase.errors import InputError, ModelError
from rmtbase.probe import behaviours, join, probe_model, read_text, windows
from rmtbase.probe.behaviour import BEHAVIOURS
from rmtbase.probe.text import default_text, special_template

WINDOW = 16


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return pm.bert(tmp_path_factory.mktemp("probe") / "tiny-bert")


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return pm.llama(tmp_path_factory.mktemp("probe") / "tiny-llama")


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("text") / "prose.txt"
    p.write_text(pm.TEXT, encoding="utf-8")
    return p


def direct(folder, text, window):
    """Behaviours by a plain loop over output_attentions (independent of rmtbase.probe)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    net = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    specials = set(tok.all_special_ids)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    x_full = tok("x")["input_ids"]  # "x" is one token for both tokenizers
    pre, post = x_full[:x_full.index(tok("x", add_special_tokens=False)["input_ids"][0])], \
        x_full[x_full.index(tok("x", add_special_tokens=False)["input_ids"][0]) + 1:]
    n_text = window - len(pre) - len(post)
    sums, counts, causal = {}, {}, None
    for s in range(0, len(ids), n_text):
        chunk = ids[s:s + n_text]
        full = pre + chunk + post
        with torch.no_grad():
            att = net(input_ids=torch.tensor([full]), output_attentions=True).attentions
        T = len(full)
        if causal is None:
            causal = all(float(a[0][:, i, j].abs().max()) == 0 for a in att
                         for i in range(T) for j in range(i + 1, T))
        text_pos = [i for i in range(T) if full[i] not in specials]
        for li, a in enumerate(att):
            a = a[0].double().numpy()
            for h in range(a.shape[0]):
                for i in text_pos:
                    if i == 0:
                        continue
                    row = a[h, i]
                    add = {"entropy": -sum(p * math.log(p) for p in row if p > 0),
                           "first_token": row[0], "self": row[i],
                           "mean_distance": sum(row[j] * abs(i - j) for j in range(T))}
                    if i - 1 in text_pos:
                        add["prev_token"] = row[i - 1]
                    if not causal and i + 1 in text_pos:
                        add["next_token"] = row[i + 1]
                    for k, v in add.items():
                        sums[li, h, k] = sums.get((li, h, k), 0.0) + v
                        counts[li, h, k] = counts.get((li, h, k), 0) + 1
    return {k: sums[k] / counts[k] for k in sums}, causal


def test_behaviours_of_known_matrices():
    T = 6
    shift = np.zeros((T, T))
    shift[0, 0] = 1
    for i in range(1, T):
        shift[i, i - 1] = 1
    ahead = np.zeros((T, T))
    ahead[T - 1, T - 1] = 1
    for i in range(T - 1):
        ahead[i, i + 1] = 1
    uniform = np.full((T, T), 1 / T)
    b = behaviours(np.stack([shift, ahead, uniform]), causal=False)
    np.testing.assert_allclose(b["prev_token"], [1, 0, 1 / T])
    np.testing.assert_allclose(b["entropy"], [0, 0, math.log(T)])
    np.testing.assert_allclose(b["self"], [0, 1 / (T - 1), 1 / T])  # query T-1 of `ahead`
    np.testing.assert_allclose(b["mean_distance"][:2], [1, (T - 2) / (T - 1)])
    # queries 1..T-1 on a uniform row: mean of mean |i-j|
    exp = np.mean([np.mean(np.abs(i - np.arange(T))) for i in range(1, T)])
    assert b["mean_distance"][2] == pytest.approx(exp)
    np.testing.assert_allclose(b["first_token"], [1 / (T - 1), 0, 1 / T])
    causal = behaviours(shift[None], causal=True)
    assert np.isnan(causal["next_token"]).all()


def test_special_positions_are_not_queries():
    T = 5
    a = np.full((1, T, T), 1 / T)
    content = np.array([False, True, True, True, False])  # [CLS] a b c [SEP]
    a[0, 4] = 0
    a[0, 4, 4] = 1  # the [SEP] row would change `self` if it were a query
    b = behaviours(a, content, causal=False)
    assert b["self"][0] == pytest.approx(1 / T)
    # prev_token: queries 2, 3 (query 1's previous is [CLS]); next_token: 1, 2
    assert b["prev_token"][0] == pytest.approx(1 / T)
    with pytest.raises(ValueError):
        behaviours(np.ones((2, 3, 4)), causal=False)


def test_default_text_and_windows():
    from transformers import AutoTokenizer

    from rmtbase.models import default_model_path

    t = default_text()
    assert t.sha256 == "c22a45ba71cd2fc74f5ca627e9f7ce011e188f866fdbda3bc771a11541731921"
    tok = AutoTokenizer.from_pretrained(default_model_path())
    ids = tok(t.text, add_special_tokens=False, verbose=False)["input_ids"]
    assert len(ids) >= 5000
    wins = windows(tok, t.text, 256)
    assert special_template(tok) == ([tok.cls_token_id], [tok.sep_token_id])
    assert all(w.size <= 256 and w[0] == tok.cls_token_id and w[-1] == tok.sep_token_id
               for w, _ in wins)
    assert all(w.size == 256 for w, _ in wins[:-1]) and wins[-1][0].size < 256
    joined = np.concatenate([w[c] for w, c in wins])
    # exact: integers / booleans (token ids)
    np.testing.assert_array_equal(joined, ids)  # every token once, in order, nothing padded
    with pytest.raises(InputError, match="fewer than 2 text tokens"):
        windows(tok, t.text, 3)


def test_read_text_errors(tmp_path):
    with pytest.raises(InputError, match="no such text file"):
        read_text(tmp_path / "absent.txt")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe\x00abc")
    with pytest.raises(InputError, match="not UTF-8"):
        read_text(bad)
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    with pytest.raises(InputError, match="holds no text"):
        read_text(empty)


@pytest.mark.parametrize("which", ["bert", "llama"])
def test_probe_matches_direct_computation(which, bert_dir, llama_dir, text_file):
    folder = bert_dir if which == "bert" else llama_dir
    ds = probe_model(folder, text=text_file, window=WINDOW, progress=False)
    want, causal = direct(folder, pm.TEXT, WINDOW)
    assert ds.attrs["attention"] == ("causal" if causal else "bidirectional")
    assert ds.attrs["probe_source"] == "text"  # rmtbase.circuits' probe says "repeated_..."
    assert causal == (which == "llama")
    assert ds.sizes["layer"] == 2 and ds.sizes["head"] == 4  # GQA: 4 query heads, 2 kv
    assert ds.attrs["n_windows"] > 2
    for (li, h, k), v in want.items():
        assert float(ds[k][li, h]) == pytest.approx(v, rel=1e-5, abs=1e-7), (li, h, k)
    if causal:
        assert np.isnan(ds["next_token"]).all()
    else:
        assert np.isfinite(ds["next_token"]).all()
    assert set(BEHAVIOURS) <= set(ds.data_vars)
    assert ds.attrs["model"] == folder.name


def test_llama_windows_start_with_bos(llama_dir, text_file):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(llama_dir)
    assert special_template(tok) == ([1], [])
    wins = windows(tok, pm.TEXT, WINDOW)
    assert all(w[0] == 1 and not c[0] and c[1:].all() for w, c in wins)


def test_missing_tokenizer_is_one_line(tmp_path, bert_dir, capsys):
    bare = tmp_path / "no-tok"
    bare.mkdir()
    for f in ("config.json", "model.safetensors"):
        shutil.copy(bert_dir / f, bare / f)
    with pytest.raises(ModelError, match="no tokenizer in .*tokenizer.json"):
        probe_model(bare, progress=False)
    assert main(["probe", str(bare), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no tokenizer" in err[0]
    assert not (tmp_path / "o").exists()
    assert main(["probe", str(tmp_path / "absent"), "--out", str(tmp_path / "o")]) == 2


def test_window_checks(bert_dir, text_file):
    with pytest.raises(InputError, match="max_position_embeddings"):
        probe_model(bert_dir, text=text_file, window=65, progress=False)


def test_cli_writes_folder(tmp_path, llama_dir, text_file, capsys):
    out = tmp_path / "probe-out"
    assert main(["probe", str(llama_dir), "--text", str(text_file), "--window", str(WINDOW),
                 "--out", str(out), "--quiet"]) == 0
    assert {p.name for p in out.iterdir()} == {"probe.nc", "probe.csv", "probe.png",
                                              "manifest.json"}
    assert json.loads((out / "manifest.json").read_text())["kind"] == "rmtbase probe"
    ds = xr.open_dataset(out / "probe.nc")
    assert ds.attrs["model"] == "tiny-llama" and "/" not in ds.attrs["model"]
    assert ds.attrs["window"] == WINDOW and ds.attrs["text_name"] == "prose.txt"
    import hashlib
    assert ds.attrs["text_sha256"] == hashlib.sha256(text_file.read_bytes()).hexdigest()
    import pandas as pd
    df = pd.read_csv(out / "probe.csv")
    assert len(df) == 8 and list(df.columns) == ["layer", "head", *BEHAVIOURS]
    assert "prev_token" in capsys.readouterr().out
    # a second run is refused without --overwrite, then replaces the folder (--json: one
    # document on stdout); a foreign folder is refused before any work
    assert main(["probe", str(llama_dir), "--text", str(text_file), "--window", str(WINDOW),
                 "--out", str(out), "--quiet", "--no-figures"]) == 2
    capsys.readouterr()
    assert main(["probe", str(llama_dir), "--text", str(text_file), "--window", str(WINDOW),
                 "--out", str(out), "--quiet", "--no-figures", "--overwrite", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"] == "tiny-llama" and len(doc["heads"]) == 8
    assert set(BEHAVIOURS) <= set(doc["heads"][0]) and "probe.nc" in doc["files"]
    assert not (out / "probe.png").exists()
    assert main(["probe", "--out", str(text_file.parent)]) == 2


def test_join():
    layer, head = np.arange(2), np.arange(3)
    scores = xr.Dataset({"head_p_value": (("layer", "head"), np.ones((2, 3)))},
                        coords={"layer": layer, "head": head})
    probe = xr.Dataset({b: (("layer", "head"), np.full((2, 3), i, float))
                        for i, b in enumerate(BEHAVIOURS)},
                       coords={"layer": layer, "head": head},
                       attrs={"text_sha256": "abc", "window": 16})
    out = join(scores, probe)
    assert "behaviour_prev_token" not in scores
    # exact: a stored constant 1.0, copied
    np.testing.assert_array_equal(out["behaviour_prev_token"], 1.0)
    assert out.attrs["probe_text_sha256"] == "abc" and out.attrs["probe_window"] == 16
    with pytest.raises(InputError, match="heads"):
        join(scores, probe.isel(head=slice(0, 2)))


def test_score_probe_options(tmp_path):
    assert main(["score", "--text", "x.txt", "--out", str(tmp_path / "s")]) == 2
    assert main(["score", "--probe", "--revision", "main", "--out", str(tmp_path / "s")]) == 2
    assert main(["score", "--probe", "--text", str(tmp_path / "absent.txt"),
                 "--out", str(tmp_path / "s")]) == 2


@pytest.mark.slow
def test_minilm_names_previous_and_next_token_heads():
    """A head of MiniLM's first layer puts ≈ 0.77 on the previous token."""
    from rmtbase.models import default_model_path

    ds = probe_model(default_model_path(), progress=False)
    assert ds.attrs["n_tokens"] == 6701 and ds.attrs["window"] == 256
    prev, nxt = ds["prev_token"].values, ds["next_token"].values
    assert np.unravel_index(np.argmax(prev), prev.shape) == (0, 2)
    assert 0.72 < prev[0, 2] < 0.82
    li, h = np.unravel_index(np.argmax(nxt), nxt.shape)
    assert nxt[li, h] > 0.5 and (li, h) == (1, 8)
    # a uniform head would put ~1/256 on each neighbour: the rest are far below these
    assert np.sort(prev.ravel())[-2] < 0.5


@pytest.mark.slow  # the first score of a new shape compiles and draws its null
def test_score_with_probe(tmp_path, bert_dir, text_file, score_cache):
    """score --probe: behaviour_* in scores.nc, columns of heads.csv, the drill-down JSON."""
    import pandas as pd

    out = tmp_path / "scores"
    assert main(["score", str(bert_dir), "--probe", "--text", str(text_file), "--stats",
                 "spectral", "--draws", "200", "--max-draws", "200", "--no-figures", "--quiet",
                 "--out", str(out)]) == 0
    ds = xr.open_dataset(out / "scores.nc")
    for b in BEHAVIOURS:
        assert ds[f"behaviour_{b}"].dims == ("layer", "head")
    assert ds.attrs["probe_text_name"] == "prose.txt"
    direct_probe = probe_model(bert_dir, text=text_file, progress=False)
    np.testing.assert_allclose(ds["behaviour_prev_token"], direct_probe["prev_token"])
    df = pd.read_csv(out / "heads.csv")
    assert {f"behaviour_{b}" for b in BEHAVIOURS} <= set(df.columns) and len(df) == 8
    html = (out / "report.html").read_text()
    assert '"beh":{"entropy":' in html and "behaviour on text" in html
    from _browser import CHROMIUM, run_page
    if CHROMIUM is None:
        return
    actions = """var c = document.querySelector('#heatmap rect[data-l="1"][data-h="3"]');
    c.dispatchEvent(new MouseEvent('click', {bubbles: true}));
    r.detail = document.getElementById('detail').innerText;"""
    r, _ = run_page(out / "report.html", actions, tmp_path)
    line = next(ln for ln in r["detail"].splitlines() if ln.startswith("behaviour on text"))
    assert not r["errors"] and "prev_token = " in line and "mean_distance = " in line
