"""The head search's output losses and its report.html (rmtbase.report.circuit_losses,
circuits_page): each induction circuit's losses said in a found line after the induction
circuits (the screen, summary.txt, the page) with the legend explaining them only when there,
the numbers read back equal to circuits.nc's, and the page's sections those of the task
search's page. Synthetic circuits.nc, no model."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_cli_circuits import _circuits_dataset
from test_composition_report import _random_composition

from rmtbase.report.circuit_context import context
from rmtbase.report.circuit_losses import LOSSES, loss_lines

LOSS = {"loss_clean": (3.0512, 0.2213), "loss_circuit_ablated": (11.6489, 0.1521),
        "loss_receivers_ablated": (11.4987, 0.1794)}


def _with_losses(cds, n_receivers=8, clean=LOSS["loss_clean"][0]):
    """``cds`` with two circuits' losses: one of ``n_receivers`` receivers at repeat 50, one
    of a model without logits (NaN) at repeat 20."""
    cds = cds.copy()
    cds["label_score"] = (("layer", "head"), np.zeros(cds["label"].shape))
    recv = ",".join(f"L{10 + i}H{i % 2}" for i in range(n_receivers))
    cds["circuit_label"] = ("circuit", np.array(["induction", "induction"]))
    cds["circuit_receivers"] = ("circuit", np.array([recv, "L2H1"]))
    cds["circuit_length"] = ("circuit", np.array([50, 20]))
    for k, (m, se) in LOSS.items():
        cds[k] = ("circuit", np.array([clean if k == "loss_clean" else m, np.nan]))
        cds[k + "_se"] = ("circuit", np.array([se, np.nan]))
    return cds


def test_each_circuit_loss_is_said_after_the_induction_lines_with_its_numbers():
    """The loss line of the 8-receiver circuit names its length, its first receivers and how
    many more, and the three losses to 3 significant digits with their se to one, equal to
    the Dataset's; a circuit without logits says so; both come right after the induction
    circuit lines and before the rest; the legend explains them only when there."""
    cds = _with_losses(_circuits_dataset())
    lines = loss_lines(cds)
    assert len(lines) == 2
    first = lines[0]
    assert first.startswith("induction circuit at repeat 50 (L10H0 +7 more): next-token loss")
    got = [float(x) for x in re.findall(r"(\d+\.?\d*)±", first)]
    assert got == [float(f"{m:.3g}") for m, _ in LOSS.values()]
    assert [float(x) for x in re.findall(r"±(\d+\.?\d*)", first)] == [
        float(f"{se:.1g}") for _, se in LOSS.values()]
    assert all(said in first for said in LOSSES.values())
    assert lines[1].startswith("induction circuit at repeat 20 (L2H1): no output loss")
    comp = _random_composition(n_l=3, n_h=2, seed=1)
    ctx = context(None, {"composition.nc": comp, "circuits.nc": cds})
    assert ctx["found"][0].startswith("K: L0H1") and ctx["found"][1:3] == lines
    from rmtbase.report.circuits_report import summary_text

    text = summary_text(ctx, cds)
    assert "next-token loss: for each induction circuit" in text
    bare = _with_losses(_circuits_dataset()).drop_vars(
        [v for v in cds.data_vars if "circuit" in cds[v].dims])
    plain = context(None, {"composition.nc": comp, "circuits.nc": bare})
    assert not plain["losses"] and "next-token loss" not in summary_text(plain, bare)


TASK_SECTIONS = ["The circuit", "Figures", "Edges patched exactly",
                 "The circuit's strongest edges"]


def test_the_page_has_the_task_pages_sections_and_the_losses():
    """report.html: the task search's sections (circuit for circuits), the facts with the
    losses, the loss table with the Dataset's numbers, the patched rows (confirmed first) and
    only confirmed rows in the strongest edges' table, summary.txt folded, a model name
    escaped, no external reference."""
    from rmtbase.report.circuits_page import circuits_page_html

    cds = _with_losses(_circuits_dataset())
    cds.attrs["model"] = "<b>m&</b>"
    comp = _random_composition(n_l=3, n_h=2, seed=1)
    ctx = context(None, {"composition.nc": comp, "circuits.nc": cds})
    page = circuits_page_html(ctx, cds, "summary <text>", {"circuits.png": b"\x89PNG"})
    h2 = [h.replace("circuits'", "circuit's").replace("circuits", "circuit")
          for h in re.findall(r"<h2>([^<]+)</h2>", page)]
    assert h2 == TASK_SECTIONS
    assert "&lt;b&gt;m&amp;&lt;/b&gt;" in page and "<b>m" not in page
    assert "<summary>summary.txt</summary><pre>summary &lt;text&gt;</pre>" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page)
    facts = page[page.index('<table class="facts">'):page.index("</table>")]
    assert "output loss" in facts and loss_lines(cds)[0] in facts.replace("&#x27;", "'")
    loss_table = page[page.index("<h3>Output loss</h3>"):]
    table = loss_table.split("</table>")[0]
    values = [float(v) for v in re.findall(r'data-v="([^"]+)"', table)]
    assert "<td>50</td>" in table and pytest.approx(values[:6]) == [
        x for m_se in LOSS.values() for x in m_se]
    patched, strongest = page.split("<h2>Edges patched exactly</h2>")[1].split(
        "<h2>The circuits' strongest edges</h2>")
    assert patched.count("<tr>") == 1 + cds.sizes["candidate"]
    assert strongest.split("</section>")[0].count("<tr>") == 1 + int(cds["confirmed"].sum())
    first_row = patched.split("<tbody>")[1].split("</tr>")[0]
    assert "L0H1" in first_row and "L2H1" in first_row  # the confirmed row first


def test_a_search_without_circuits_has_a_page_too():
    """No row at all (a random model): the page says so in its facts and tables, with its four
    sections; no loss table."""
    from rmtbase.report.circuits_page import circuits_page_html

    cds = _with_losses(_circuits_dataset()).isel(candidate=slice(0, 0), circuit=slice(0, 0))
    comp = _random_composition(n_l=3, n_h=2, seed=1)
    ctx = context(None, {"composition.nc": comp, "circuits.nc": cds})
    page = circuits_page_html(ctx, cds, "", {})
    assert len(re.findall(r"<h2>", page)) == 3  # no figure without images
    assert "not measured (no induction circuit)" in page and "Output loss</h3>" not in page
    assert "0 confirmed edges of 0 patched rows" in page
