"""The verdict table of ``weibull_anchor``: every Weibull-paper (arXiv:2605.18898) claim
checkable without trained weights.

Rows ``id, claim, where, paper, ours, method, holds, note``; ``holds`` is yes, no or partly (the
note says which reading). A quoted number holds when ours rounds to it; tabulated arithmetic
when reproduced within ± half a unit in the last quoted digit."""

from __future__ import annotations

import math

import numpy as np

_SQRT10 = math.sqrt(10.0)


def _fmt(x, nd=4):
    return f"{x:.{nd}f}"


def _row(id_, claim, where, paper, ours, method, holds, note=""):
    return dict(id=id_, claim=claim, where=where, paper=paper, ours=ours, method=method,
                holds=holds, note=note)


def _rounds_to(x, quoted: str) -> bool:
    nd = len(quoted.split(".")[1]) if "." in quoted else 0
    return abs(x - float(quoted)) <= 0.5 * 10**-nd + 1e-12


def _weibull_std(k, lam):
    g1, g2 = math.gamma(1 + 1 / k), math.gamma(1 + 2 / k)
    return lam * math.sqrt(g2 - g1 * g1), lam * math.sqrt(g2)


def build(*, cont, head, block, p_star, mixture_anchor, noise_curve) -> list[dict]:
    """Rows of the verdict table from the study's computations (see weibull_anchor.run)."""
    k80, l80 = cont["80"]
    k100 = cont["100"][0]
    hk = {t: head[t]["k"] for t in head}
    bk, bl = block["80"]["k"], block["80"]["lam"]
    rows = []
    rows.append(_row("anchor_k", "k0 of the 80 % protocol for half-normal |w|", "A.1 eq. (2)",
                     "1.2054", _fmt(k80, 6), "continuum integrals (analytic.weibull.anchor)",
                     "yes" if _rounds_to(k80, "1.2054") else "no"))
    rows.append(_row("anchor_lambda", "λ0/σ of the 80 % protocol", "A.1 eq. (2)", "0.8875",
                     _fmt(l80, 6), "continuum integrals",
                     "yes" if _rounds_to(l80, "0.8875") else "no"))
    rows.append(_row("k_approx", "Gaussian init gives k ≈ 1.20", "abstract, §2.1", "1.20",
                     _fmt(k80, 4), "continuum", "partly" if not _rounds_to(k80, "1.20") else "yes",
                     "1.2054 rounds to 1.21 at two decimals; 'k ≈ 1.20' holds to 0.5 %"))
    m, s = hk["80"].mean(), hk["80"].std(ddof=1)
    rows.append(_row("finite_head", "the anchor is what a finite Gaussian matrix gives",
                     "§2.1", "k0 ≈ 1.2054",
                     f"{m:.4f} ± {s:.4f} (sd), mean − k0 = {m - k80:+.4f} ± {s / math.sqrt(hk['80'].size):.4f}",
                     f"{hk['80'].size} N(0,1) matrices 64×768, element_stats(trim=0.8)",
                     "yes" if abs(m - k80) < 5 * s / math.sqrt(hk["80"].size) + 2e-3 else "no",
                     "per-head sampling spread shown; finite-N bias included in the mean"))
    bm, bs = bk.mean(), bk.std(ddof=1)
    rows.append(_row("per_block_init", "per-block fits at step 0: k = 1.205 ± 0.001",
                     "Fig. 3 caption, Fig. 14", "1.205 ± 0.001", f"{bm:.4f} ± {bs:.4f} (sd)",
                     f"{bk.size} N(0,1) blocks 512×2048 (Pythia-70m FFN size)",
                     "yes" if abs(bm - 1.205) <= 0.0015 and bs <= 0.002 else "no"))
    lm, ls_ = bl.mean(), bl.std(ddof=1)
    rows.append(_row("lambda_init", "λ_init/σ_init ∈ [0.887, 0.889] at step 0",
                     "A.1", "[0.887, 0.889]", f"{lm:.4f} ± {ls_:.4f} (sd)",
                     "same simulated blocks", "yes" if 0.887 <= lm <= 0.889 else "no"))
    in_band = np.mean((bk >= 1.186) & (bk <= 1.204))
    rows.append(_row("band_vs_anchor", "Transmission band [1.186, 1.204] is 'close to the "
                     "initialization anchor'", "§2.2, §3.1", "[1.186, 1.204]",
                     f"k0 = {k80:.4f} lies above the band; {100 * in_band:.0f} % of Gaussian "
                     "512×2048 blocks fall inside it", "continuum + simulated blocks",
                     "partly", "the band is 0.001–0.019 below k0: an untrained Gaussian block is "
                     "outside the band, so the band is not 'the anchor'"))
    # noise curve
    v_star = float(noise_curve(p_star))
    rows.append(_row("p_star", "V(p) is minimal at p* ≈ 0.797", "Fig. 2, A.2", "0.797",
                     _fmt(p_star, 6), "root of V'(p), analytic.weibull.p_star",
                     "yes" if _rounds_to(p_star, "0.797") else "no"))
    r_a = float(noise_curve(0.1)) / v_star
    r_b = float(noise_curve(0.05)) / v_star
    mid_mean = _mean_v(noise_curve, 0.1, 0.9)
    r_c = float(noise_curve(0.1)) / mid_mean
    rows.append(_row("ratio_a", "bottom 10 % carries ~6.5× the noise of the optimum: "
                     "reading V(0.1)/V(p*)", "§2.1, Fig. 2", "6.5", _fmt(r_a, 3),
                     "closed form", "yes" if _rounds_to(r_a, "6.5") else "no",
                     "value at the trim edge p = 0.1"))
    rows.append(_row("ratio_b", "same claim, reading V(0.05)/V(p*) (middle of bottom 10 %)",
                     "§2.1", "6.5", _fmt(r_b, 3), "closed form", "no"))
    rows.append(_row("ratio_c", "same claim, reading mean of V over [0, 0.1] / V(p*)", "§2.1",
                     "6.5", "∞ (V ~ 1/p near 0: the mean diverges logarithmically)",
                     "closed form", "no"))
    rows.append(_row("ratio_d", "same claim, reading V(0.1) / mean of V over [0.1, 0.9]",
                     "§2.1", "6.5", _fmt(r_c, 3), "quadrature", "no"))
    r_top = float(noise_curve(0.9)) / v_star
    rows.append(_row("top_tail", "V diverges at both ends; the middle 80 % excludes the noisy "
                     "top 10 %", "A.2, Fig. 2", "diverges at p → 1",
                     f"V(0.9)/V(p*) = {r_top:.3f}; V(0.99)/V(p*) = {float(noise_curve(0.99)) / v_star:.2f}",
                     "closed form", "partly", "V → ∞ as p → 1 only like 1/((1−p)ln²(1−p)), "
                     "integrable; at the 90 % cut the noise is 1.10× the minimum"))
    best_a = _best_window(noise_curve)
    sd = {t: hk[t].std(ddof=1) for t in hk}
    best_trim = min(sd, key=sd.get)
    rows.append(_row("noise_optimal", "the middle 80 % trim is the noise-optimal choice",
                     "§2.1, A.2", "[0.1, 0.9]",
                     f"width-0.8 window minimising mean V: [{best_a:.2f}, {best_a + 0.8:.2f}]; "
                     f"per-matrix sd of k: 80 % {sd['80']:.4f}, 90 % {sd['90']:.4f}, "
                     f"100 % {sd['100']:.4f}", "quadrature; simulated 64×768 fits",
                     "yes" if best_trim == "80" and abs(best_a - 0.1) < 0.01 else "no",
                     f"lowest fit spread on Gaussian data: {best_trim} % trim"))
    # trims
    gap = k80 - k100
    sim_gap = hk["80"] - hk["100"]
    rows.append(_row("gap_k80_k100", "k80 − k100 = 0.0519 ± 0.0017 quantifies how much the "
                     "heavy tail pulls the full-data fit", "§3.2, Fig. 5", "0.0519 ± 0.0017",
                     f"Gaussian: {gap:.4f} (continuum), {sim_gap.mean():.4f} ± {sim_gap.std(ddof=1):.4f} "
                     "(64×768 sims)", "continuum + simulation", "no",
                     "a Gaussian with no heavy tail already gives the gap: it is a property of "
                     "the half-normal shape under the protocol, not of trained tails"))
    rows.append(_row("full_fit_3_7", "full-data fits underestimate k by 3–7 %", "§2.1, A.2",
                     "3–7 %", f"Gaussian: {100 * gap / k80:.2f} %", "continuum", "partly",
                     "the size holds but Gaussian data show it too"))
    for t, med in (("80", "1.195"), ("90", "1.182"), ("100", "1.143")):
        kt = cont[t][0]
        rows.append(_row(f"table1_k{t}", f"Table 1 median k{t} of trained FFN (Gaussian "
                         "reference)", "Table 1", med, f"Gaussian: {kt:.4f} (trained − Gaussian "
                         f"= {float(med) - kt:+.4f})", "continuum", "n/a",
                         "comparison only: the trained medians sit 0.008–0.011 below the "
                         "Gaussian values at every trim"))
    # Γ closure
    hn_std = math.sqrt(1 - 2 / math.pi)
    wstd, wrms = _weibull_std(k80, l80)
    err_std = wstd / hn_std - 1
    err_rms = wrms - 1
    rows.append(_row("gamma_closure_std", "Γ closure: Weibull(k0, λ0) std equals the sample "
                     "std of |w| within 2 %", "A.1", "< 2 %", f"{100 * err_std:+.2f} %",
                     "closed form, half-normal std √(1−2/π)",
                     "yes" if abs(err_std) < 0.02 else "no", "reading: σ̂ = std of |w|"))
    rows.append(_row("gamma_closure_rms", "Γ closure, reading σ = entry std of w: "
                     "λ0 √Γ(1+2/k0) = σ", "Fig. 1 (σ-inverse form)", "< 2 %",
                     f"{100 * err_rms:+.2f} %", "closed form",
                     "yes" if abs(err_rms) < 0.02 else "no"))
    # mixture aggregate at step 1
    ratio70 = 6 / _SQRT10
    k_mix, _ = mixture_anchor([4.0, 5.0], [ratio70, 1.0])
    rows.append(_row("aggregate_step1", "pooled Pythia-70m step-1 fit k = 1.153 is a mixture "
                     "artefact (σ_in/σ_out = L/√10)", "Fig. 3, Fig. 14", "1.153",
                     f"{k_mix:.4f}", "quadrature: 4/9 FFN_in at σ_in, 5/9 (W_o + FFN_out) at "
                     "σ_out = σ_in·√10/6", "yes" if abs(k_mix - 1.153) < 0.005 else "no",
                     "n = 6·9·512² = 14,155,776 as quoted"))
    rows.append(_row("n_pooled", "n = 14,155,776 pooled samples", "Fig. 3", "14155776",
                     str(6 * 9 * 512**2), "6 layers × (d² + 4d² + 4d²), d = 512",
                     "yes" if 6 * 9 * 512**2 == 14155776 else "no"))
    rows.extend(_arithmetic_rows())
    return rows


def _mean_v(noise_curve, a, b, n=4001):
    p = np.linspace(a, b, n)
    return float(np.trapezoid(noise_curve(p), p) / (b - a))


def _best_window(noise_curve, width=0.8):
    """Start a of the window [a, a + width] minimising the mean of V (grid search)."""
    starts = np.linspace(0.005, 1 - width - 1e-4, 400)
    vals = [_mean_v(noise_curve, a, a + width, 801) for a in starts]
    return float(starts[int(np.argmin(vals))])


def _arithmetic_rows():
    rows = []
    # Table 5: init ratios
    pred = {6: "1.897", 12: "3.795", 24: "7.589", 16: "5.060"}
    ok = all(_rounds_to(L / _SQRT10, q) for L, q in pred.items()) and _rounds_to(math.sqrt(64), "8.000")
    d = 512.0
    formula = math.sqrt(2 / (5 * d)) / (2 / (6 * math.sqrt(d)))
    rows.append(_row("table5_ratios", "σ_small_init/σ_wang_init = L/√10; √(2L) for Recipe B",
                     "A.3 eqs. (4)–(6), Table 5", "1.897, 3.795, 7.589, 5.060, 8.000",
                     ", ".join(f"{L / _SQRT10:.3f}" for L in pred) + f", {math.sqrt(64):.3f}; "
                     f"√(2/5d)/(2/(L√d)) at L=6: {formula:.4f}", "arithmetic",
                     "yes" if ok and abs(formula - 6 / _SQRT10) < 1e-12 else "no"))
    # T/tau
    tt = {"70m": (1.0e-3, "1.43"), "160m": (6.0e-4, "0.86"), "410m": (3.0e-4, "0.43"),
          "1B": (3.0e-4, "0.43"), "6.9B": (1.2e-4, "0.17")}
    vals = {k: 143000 * eta * 0.01 for k, (eta, _) in tt.items()}
    rows.append(_row("t_over_tau", "T/τ = T·η·λ_wd for Pythia (T = 143k, λ_wd = 0.01)",
                     "§4.2, A.5", ", ".join(q for _, q in tt.values()),
                     ", ".join(f"{v:.3f}" for v in vals.values()), "arithmetic",
                     "yes" if all(_rounds_to(vals[k], q) for k, (_, q) in tt.items()) else "no"))
    # Table 4
    t4 = [("Pythia-70m", 1.0e-3, 0.01, "0.316", "0.0224", "0.071"),
          ("Pythia-160m", 6.0e-4, 0.01, "0.245", "0.0200", "0.082"),
          ("Pythia-410m", 3.0e-4, 0.01, "0.173", "0.0190", "0.110"),
          ("Pythia-1B", 3.0e-4, 0.01, "0.173", "0.0191", "0.110"),
          ("Pythia-6.9B", 1.2e-4, 0.01, "0.110", "0.0149", "0.136"),
          ("OLMo-1-7B", 3.0e-4, 0.10, "0.055", "0.0032", "0.058"),
          ("OLMo-2-7B", 3.0e-4, 0.10, "0.055", "0.0167", "0.304"),
          ("LLaMA-3-8B", 3.0e-4, 0.10, "0.055", "0.0097", "0.178"),
          ("Mistral-7B", 3.0e-4, 0.10, "0.055", "0.0026", "0.048"),
          ("Qwen2.5-7B", 3.0e-4, 0.10, "0.055", "0.0138", "0.253"),
          ("Qwen2.5-14B", 3.0e-4, 0.10, "0.055", "0.0158", "0.289"),
          ("Qwen3-8B", 5.0e-4, 0.10, "0.071", "0.0225", "0.319")]
    bad = []
    for name, eta, wd, sq, lam, ratio in t4:
        s = math.sqrt(eta / wd)
        lam_v = float(lam)
        lo = (lam_v - 5e-5) / s
        hi = (lam_v + 5e-5) / s
        rv = float(ratio)
        if not _rounds_to(s, sq) or not (lo - 5e-4 <= rv <= hi + 5e-4):
            bad.append(f"{name}: √(η/λ)={s:.4f}, λ/√(η/λ) ∈ [{lo:.4f}, {hi:.4f}] vs {ratio}")
    rows.append(_row("table4_columns", "Table 4 columns √(η/λ_wd) and λ/√(η/λ_wd)", "Table 4",
                     "12 rows", "all reproduced" if not bad else "; ".join(bad),
                     "arithmetic, λ rounded ± 0.00005", "yes" if not bad else "partly"))
    x = np.array([math.sqrt(e / w) for _, e, w, *_ in t4[:5]])
    y = np.array([float(r[4]) for r in t4[:5]])
    r = float(np.corrcoef(x, y)[0, 1])
    slope = float(np.sum(x * y) / np.sum(x * x))
    rows.append(_row("pythia_scaling", "within Pythia, λ vs √(η/λ_wd): Pearson r = 0.94, "
                     "fit through origin slope 0.087", "§5.4, Fig. 13", "r = 0.94, slope 0.087",
                     f"r = {r:+.3f}, slope = {slope:.4f}", "Table 4's five Pythia rows",
                     "yes" if _rounds_to(r, "0.94") and _rounds_to(slope, "0.087") else "no",
                     "recomputed from the paper's own Table 4 values"))
    span_p = 0.136 / 0.071
    span_o = 0.319 / 0.048
    rows.append(_row("ratio_spans", "ratio spans 1.9× within Pythia, 6.6× across the others",
                     "Table 4, §6", "1.9×, 6.6×", f"{span_p:.2f}×, {span_o:.2f}×", "arithmetic",
                     "yes" if _rounds_to(span_p, "1.9") and _rounds_to(span_o, "6.6") else "partly"))
    # Table 3 growth
    t3 = [("70m", "0.0131", "0.0186", 43), ("160m", "0.0053", "0.0157", 194),
          ("410m", "0.0023", "0.0180", 678), ("1B", "0.0025", "0.0188", 665),
          ("6.9B", "0.0022", "0.0130", 487)]
    parts, ok = [], True
    for name, a, b, g in t3:
        a_, b_ = float(a), float(b)
        lo = 100 * ((b_ - 5e-5) / (a_ + 5e-5) - 1)
        hi = 100 * ((b_ + 5e-5) / (a_ - 5e-5) - 1)
        ok &= lo - 0.5 <= g <= hi + 0.5
        parts.append(f"{name}: {100 * (b_ / a_ - 1):.0f} % [{lo:.0f}, {hi:.0f}]")
    rows.append(_row("table3_growth", "Table 3 growth λ_O terminal/init − 1",
                     "Table 3", ", ".join(f"+{g} %" for *_, g in t3), "; ".join(parts),
                     "arithmetic; interval from ± half a unit in the quoted λ",
                     "yes" if ok else "no", "growth factors 1.4×–7.8× (§5.5) follow"))
    a1 = 0.0232 / 0.0174 - 1
    a2 = 0.0368 / 0.0174 - 1
    rows.append(_row("fig3_growth", "aggregate λ 0.0174 → 0.0232 (+33 %), peak 0.0368 (+111 %)",
                     "Fig. 3, Fig. 14", "+33 %, +111 %", f"+{100 * a1:.1f} %, +{100 * a2:.1f} %",
                     "arithmetic", "yes" if round(100 * a1) == 33 and round(100 * a2) == 111 else "no"))
    return rows


def markdown(rows: list[dict], *, quick: bool) -> str:
    """The verdict table as markdown."""
    head = ["# Weibull paper (arXiv:2605.18898): verdicts on checkable claims", "",
            "Generated by `rmtbase study weibull_anchor" + (" --quick" if quick else "") +
            "`. Each claim that needs no trained weights is recomputed: continuum integrals of "
            "the protocol (least squares of ln(−ln(1−F)) on ln|w| over the trim), simulated "
            "Gaussian matrices fitted by `rmtbase.stats.elementwise.element_stats`, closed "
            "forms, and the arithmetic of the paper's tables. `holds`: yes / no / partly "
            "(one reading or rounding only) / n/a (a comparison, not a claim).", "",
            "| claim | where | paper | ours | method | holds | note |",
            "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [str(r[k]).replace("|", "\\|") for k in
                 ("claim", "where", "paper", "ours", "method", "holds", "note")]
        head.append("| " + " | ".join(cells) + " |")
    return "\n".join(head) + "\n"
