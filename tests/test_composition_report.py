"""The composition section of report.html (rmtbase.report.composition_report) on a random
GPT-2 with a planted K-composition circuit, through ``rmtbase score --composition``."""

from __future__ import annotations

import re

import numpy as np

from rmtbase.cli import main


def _planted_gpt2(path, n_layer=3, n_head=4, n_embd=64, frm=(0, 3), to=(2, 1)):
    """Untrained GPT-2 whose layer ``to[0]`` head ``to[1]`` has W_K rows in the span of layer
    ``frm[0]`` head ``frm[1]``'s W_OV output: W_K,h2 ← A W_O,h1ᵀ (A Gaussian d_h × d_h). GPT-2's
    Conv1D weights are input-major: c_attn (d, 3d) holds W_K,hᵀ in columns d + h d_h …, c_proj
    (d, d) holds W_O,hᵀ in rows h d_h …"""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=n_layer, n_head=n_head, n_embd=n_embd, vocab_size=64,
                     n_positions=32, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    dh = n_embd // n_head
    wo_t = model.transformer.h[frm[0]].attn.c_proj.weight[frm[1] * dh:(frm[1] + 1) * dh, :]
    a = torch.randn(dh, dh)
    with torch.no_grad():
        col = n_embd + to[1] * dh
        model.transformer.h[to[0]].attn.c_attn.weight[:, col:col + dh] = (a @ wo_t).T
    model.save_pretrained(path)
    return path


def test_report_has_the_composition_section_with_the_planted_pair(tmp_path, capsys):
    """The page has one composition section; its table's first row is the planted pair
    (kind k, L0H3 → L2H1, flagged, effect > 2, p and q small), the figure is embedded, and the
    section comes before the other figures (300 draws: the planted pair lies beyond them, its p
    from the Beta tail). Without --composition the page has no section."""
    m = _planted_gpt2(tmp_path / "g")
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["score", str(m), "--composition", "--draws", "300", "--stats", "spectral",
                 "--out", str(out), "--quiet"]) == 0
    page = (out / "report.html").read_text()
    assert page.count('<section id="composition">') == 1
    sec = page[page.index('<section id="composition">'):]
    sec = sec[:sec.index("</section>")]
    assert "Head–head composition" in sec
    rows = re.findall(r"<tr>(.*?)</tr>", sec)[1:]  # the header row first
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>.*?</td>", rows[0])]
    assert cells[:3] == ["k", "L0H3", "L2H1"], cells
    assert cells[-1] == "yes"
    vals = [float(v) for v in re.findall(r'data-v="([^"]+)"', rows[0])]
    score, effect, p, q = vals[:4]
    assert effect > 2 and p <= 1e-3 and q <= 0.05
    assert 'alt="composition.png"' in sec and "data:image/png;base64," in sec
    assert page.index('id="composition"') < page.index('id="figures"')
    import xarray as xr

    ds = xr.open_dataset(out / "composition.nc")
    assert int(ds.composition_flag.sum()) == len(rows)  # every flagged pair has a row
    assert np.isclose(score, float(ds.composition.sel(kind="k", layer_from=0, head_from=3,
                                                      layer_to=2, head_to=1)))
    from rmtbase.report.write import write_report

    plain = tmp_path / "plain"  # the same score written without the composition
    write_report(xr.load_dataset(out / "scores.nc"), plain, figures=False)
    assert 'id="composition"' not in (plain / "report.html").read_text()


def test_no_flag_shows_the_smallest_p_and_says_so(tmp_path):
    """A random model with nothing flagged: the table lists the pairs of smallest p, none
    flagged, and says so; no figure with --no-figures."""
    from rmtbase.report.composition_report import composition_section, pair_rows
    from rmtbase.scoring.composition import composition

    m = _planted_gpt2(tmp_path / "g", n_layer=2, n_head=2, n_embd=32, frm=(0, 0), to=(0, 0))
    ds = composition(m, draws=500)
    assert int(ds.composition_flag.sum()) == 0
    rows, flagged = pair_rows(ds, top=5)
    assert not flagged and len(rows) == 5
    ps = [r[5] for r in rows]
    assert ps == sorted(ps) and all(r[-1] == "no" for r in rows)
    html = composition_section(ds, None, top=5)
    assert "no pair flagged" in html and "<img" not in html
