/* rmtbase report.html: per-head drill-down of a score. Plain JS, no network, no libraries.
   Data: the JSON in <script id="rmtbase-data"> (rmtbase.report.html_data.report_data). */
"use strict";
(function () {
  var node = document.getElementById("rmtbase-data");
  if (!node) return;
  var D = JSON.parse(node.textContent), S = D.scale, cur = 0, pinned = null;
  var GROUPS = ["spectrum", "product law", "entry law"];
  function $(id) { return document.getElementById(id); }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }
  function ok(x) { return x !== null && x !== undefined && isFinite(x); }
  function num(x) {
    if (!ok(x)) return "nan";
    var a = Math.abs(x);
    return (a !== 0 && (a < 1e-3 || a >= 1e5)) ? x.toExponential(3) : String(+x.toPrecision(4));
  }
  function fmtP(p) {
    if (!ok(p)) return "nan";
    if (p <= 1e-16) return "<1e-16";
    return p < 1e-3 ? p.toExponential(1) : String(+p.toPrecision(2));
  }
  function tnum(t) {
    var a = Math.abs(t);
    if (a !== 0 && (a < 1e-3 || a >= 1e5)) {
      var k = Math.round(Math.log10(a));
      if (Math.abs(a / Math.pow(10, k) - 1) < 1e-9) return (t < 0 ? "-" : "") + "1e" + k;
    }
    return num(t);
  }
  function lut(cols, t) {
    t = Math.max(0, Math.min(1, t));
    return cols[Math.round(t * (cols.length - 1))];
  }
  function verdictColour(p) {
    if (!ok(p)) return "#cccccc";
    var s = -Math.log10(Math.max(p, Math.pow(10, -S.verdict_lim)));
    return lut(S.verdict, s / S.verdict_lim);
  }
  function headColour(E, k) { return verdictColour(E.head.p[k]); }
  function verdictPos(p) { return ok(p) ? -Math.log10(Math.max(p, Math.pow(10, -S.verdict_lim))) / S.verdict_lim : 0; }
  /* the profile (rmtbase.scoring.profile): an axis's effect as text, * where flagged */
  function profText(a, k) {
    var e = a.e[k], v = a.v[k];
    if (!ok(e)) return num(v);
    return num(v) + " (" + (a.k === "ratio" ? num(e) + "×" : (e >= 0 ? "+" : "") + num(e)) + (a.f[k] ? "*" : "") + ")";
  }
  function spikes(E, k) {
    return E.head.ns && ok(E.head.ns[k]) ? E.head.ns[k] : null;
  }
  function effectColour(e) {
    return ok(e) ? lut(S.effect, (e + S.effect_lim) / (2 * S.effect_lim)) : "#cccccc";
  }

  /* ---- a small SVG plotter: lines, bands, bars on linear or log axes ---- */
  function ticks(a, b, log) {
    var out = [], k, step, p;
    if (log) {
      for (k = Math.floor(Math.log10(a)); k <= Math.ceil(Math.log10(b)); k++) {
        p = Math.pow(10, k);
        if (p >= a * 0.999 && p <= b * 1.001) out.push(p);
      }
      if (out.length < 2) out = [a, b];
      return out;
    }
    step = Math.pow(10, Math.floor(Math.log10((b - a) / 4 || 1)));
    if ((b - a) / step > 10) step *= 2;
    if ((b - a) / step > 10) step *= 2.5;
    for (k = Math.ceil(a / step) * step; k <= b + 1e-9 * step; k += step) out.push(+k.toPrecision(6));
    return out;
  }
  function plot(o) {
    var m = { l: 50, r: 8, t: 18, b: 34 }, W = o.w - m.l - m.r, H = o.h - m.t - m.b;
    function sc(v, lim, log) {
      var a = lim[0], b = lim[1];
      if (log) { v = Math.log10(v); a = Math.log10(a); b = Math.log10(b); }
      return (v - a) / (b - a);
    }
    function X(v) { return m.l + sc(v, o.xlim, o.xlog) * W; }
    function Y(v) { return m.t + H - sc(v, o.ylim, o.ylog) * H; }
    function good(x, y) {
      return ok(x) && ok(y) && (!o.xlog || x > 0) && (!o.ylog || y > 0);
    }
    function path(xs, ys) {
      var d = "", pen = false;
      for (var i = 0; i < xs.length; i++) {
        if (!good(xs[i], ys[i])) { pen = false; continue; }
        d += (pen ? "L" : "M") + X(xs[i]).toFixed(1) + "," + Y(ys[i]).toFixed(1);
        pen = true;
      }
      return d;
    }
    var id = "c" + Math.random().toString(36).slice(2, 8), s = [];
    s.push('<svg class="plot" width="' + o.w + '" height="' + o.h + '" role="img">');
    s.push('<clipPath id="' + id + '"><rect x="' + m.l + '" y="' + m.t + '" width="' + W +
      '" height="' + H + '"/></clipPath><g clip-path="url(#' + id + ')">');
    o.items.forEach(function (it) {
      var i, d;
      if (it.kind === "band") {
        var up = path(it.x, it.hi), lo = [];
        for (i = it.x.length - 1; i >= 0; i--)
          if (good(it.x[i], it.lo[i])) lo.push(X(it.x[i]).toFixed(1) + "," + Y(it.lo[i]).toFixed(1));
        if (up && lo.length) s.push('<path d="' + up + "L" + lo.join("L") + 'Z" fill="' + it.color + '" stroke="none"/>');
      } else if (it.kind === "bars") {
        for (i = 0; i < it.x0.length; i++) {
          if (!good(it.x0[i], it.y[i]) || !good(it.x1[i], it.y[i])) continue;
          var base = o.ylog ? o.ylim[0] : 0, y = Y(it.y[i]);
          s.push('<rect x="' + X(it.x0[i]).toFixed(1) + '" y="' + y.toFixed(1) + '" width="' +
            Math.max(0.5, X(it.x1[i]) - X(it.x0[i])).toFixed(1) + '" height="' +
            Math.max(0, Y(base) - y).toFixed(1) + '" fill="' + it.color + '"/>');
        }
      } else if (it.kind === "vline") {
        s.push('<line x1="' + X(it.x) + '" x2="' + X(it.x) + '" y1="' + m.t + '" y2="' + (m.t + H) +
          '" stroke="' + it.color + '" stroke-dasharray="3,3"/>');
      } else {
        d = path(it.x, it.y);
        if (d) s.push('<path d="' + d + '" fill="none" stroke="' + it.color + '" stroke-width="' +
          (it.width || 1.5) + '"' + (it.dash ? ' stroke-dasharray="' + it.dash + '"' : "") + "/>");
        if (it.dots) for (i = 0; i < it.x.length; i++) if (good(it.x[i], it.y[i]))
          s.push('<circle cx="' + X(it.x[i]).toFixed(1) + '" cy="' + Y(it.y[i]).toFixed(1) + '" r="2" fill="' + it.color + '"/>');
      }
    });
    s.push("</g>");
    s.push('<rect x="' + m.l + '" y="' + m.t + '" width="' + W + '" height="' + H + '" fill="none" stroke="#444"/>');
    ticks(o.xlim[0], o.xlim[1], o.xlog).forEach(function (t) {
      s.push('<text x="' + X(t) + '" y="' + (m.t + H + 13) + '" text-anchor="middle">' + tnum(t) + "</text>");
    });
    ticks(o.ylim[0], o.ylim[1], o.ylog).forEach(function (t) {
      s.push('<text x="' + (m.l - 4) + '" y="' + (Y(t) + 3) + '" text-anchor="end">' + tnum(t) + "</text>");
    });
    s.push('<text x="' + (m.l + W / 2) + '" y="' + (o.h - 4) + '" text-anchor="middle">' + esc(o.xlabel) + "</text>");
    s.push('<text x="' + m.l + '" y="12">' + esc(o.ylabel) + "</text>");
    var ly = m.t + 12;
    (o.legend || []).forEach(function (l) {
      s.push('<text x="' + (m.l + W - 4) + '" y="' + ly + '" text-anchor="end" fill="' + l[1] + '">' + esc(l[0]) + "</text>");
      ly += 12;
    });
    s.push("</svg>");
    return s.join("");
  }
  function range(vals, log, pad) {
    var a = Infinity, b = -Infinity;
    vals.forEach(function (v) { if (ok(v) && (!log || v > 0)) { a = Math.min(a, v); b = Math.max(b, v); } });
    if (!isFinite(a)) return log ? [0.1, 10] : [0, 1];
    if (log) return [a / (1 + pad), b * (1 + pad)];
    var w = (b - a) || Math.abs(a) || 1;
    return [a - pad * w, b + pad * w];
  }

  /* ---- the per-head panels ---- */
  function spectrumPlot(E, k) {
    var R = E.R, x = E.spec.slice(k * R, (k + 1) * R), ranks = [], items = [], all = x.slice();
    for (var i = 0; i < R; i++) ranks.push(i + 1);
    if (E.band) {
      items.push({ kind: "band", x: ranks, lo: E.band[0], hi: E.band[E.band.length - 1], color: "#d0d0d0" });
      if (E.band.length > 2) items.push({ x: ranks, y: E.band[1], color: "#777", dash: "4,3", width: 1 });
      all = all.concat(E.band[0], E.band[E.band.length - 1]);
    }
    items.push({ x: ranks, y: x, color: "#1f77b4", dots: true });
    return plot({ w: 330, h: 230, ylog: true, xlim: [0.5, R + 0.5], ylim: range(all, true, 0.3),
      xlabel: "rank k", ylabel: "x_k = λ_k/(σ_Q²σ_K²d²)", items: items,
      legend: [["head", "#1f77b4"], ["null 95 % band, median", "#777"]] });
  }
  function densityPlot(E, k, ref) {
    var R = E.R, x = E.spec.slice(k * R, (k + 1) * R).filter(function (v) { return ok(v) && v > 0; });
    var a = Math.min(ref.edges[0] || 1e-3, Math.min.apply(null, x.concat([Infinity]))) / 1.2;
    var b = Math.max(ref.edges[1], Math.max.apply(null, x.concat([-Infinity]))) * 1.2;
    a = Math.max(a, 1e-6);
    var nb = Math.max(12, Math.min(40, x.length)), x0 = [], x1 = [], y = [], i, j;
    for (i = 0; i < nb; i++) {
      x0.push(a * Math.pow(b / a, i / nb)); x1.push(a * Math.pow(b / a, (i + 1) / nb)); y.push(0);
    }
    x.forEach(function (v) {
      j = Math.min(nb - 1, Math.max(0, Math.floor(nb * Math.log(v / a) / Math.log(b / a)))); y[j] += 1;
    });
    for (i = 0; i < nb; i++) y[i] = y[i] / (x.length * (x1[i] - x0[i]));
    var ymax = Math.max.apply(null, y.concat(ref.mp_y.filter(ok)));
    return plot({ w: 330, h: 230, xlog: true, xlim: [a, b], ylim: [0, ymax * 1.1],
      xlabel: "x (log scale)", ylabel: "density", items: [
        { kind: "bars", x0: x0, x1: x1, y: y, color: "#9ecae1" },
        { x: ref.mp_x, y: ref.mp_y, color: "#000", width: 1.3 },
        { kind: "vline", x: ref.edges[1], color: "#000" }],
      legend: [["head", "#3182bd"], ["MP⊠MP, c=" + num(ref.c), "#000"]] });
  }
  function histPlot(E, k, ref) {
    var nb = ref.hist_z.length, h = E.hist.slice(k * nb, (k + 1) * nb), x0 = [], x1 = [];
    for (var i = 0; i < nb; i++) { x0.push(ref.hist_lo + i * ref.hist_w); x1.push(ref.hist_lo + (i + 1) * ref.hist_w); }
    var pos = h.concat(ref.vg).filter(function (v) { return ok(v) && v > 0; });
    var lo = Math.max(1e-5, Math.min.apply(null, pos.concat([1])) / 2);
    return plot({ w: 330, h: 230, ylog: true, xlim: [x0[0], x1[nb - 1]], ylim: [lo, 1],
      xlabel: "z = W_QK entry / (√d_h σ_Q σ_K)", ylabel: "density (log)", items: [
        { kind: "bars", x0: x0, x1: x1, y: h, color: "#fdae6b" },
        { x: ref.z, y: ref.gauss, color: "#555", dash: "4,3", width: 1.2 },
        { x: ref.z, y: ref.vg, color: "#2ca02c", width: 1.3 }],
      legend: [["head", "#e6550d"], ["Gaussian N(0,1)", "#555"], ["variance-gamma, d_h=" + ref.d_h, "#2ca02c"]] });
  }
  function effectBar(e) {
    var w = 90, lim = S.effect_lim, x = function (v) { return 2 + (Math.max(-lim, Math.min(lim, v)) + lim) / (2 * lim) * (w - 4); };
    var s = '<svg width="' + w + '" height="12"><rect x="' + x(-1.96) + '" y="2" width="' + (x(1.96) - x(-1.96)) +
      '" height="8" fill="#e6e6e6"/><line x1="' + x(0) + '" x2="' + x(0) + '" y1="0" y2="12" stroke="#999"/>';
    if (ok(e)) s += '<circle cx="' + x(e) + '" cy="6" r="4" fill="' + effectColour(e) + '" stroke="#333" stroke-width="0.5"/>';
    return s + "</svg>";
  }
  /* the effect in the statistic's own units: a ratio to the null median (×) or a shift */
  function sizeText(kind, x) {
    if (!ok(x)) return "nan";
    return kind === "ratio" ? num(x) + "×" : (x >= 0 ? "+" : "") + num(x);
  }
  function statTable(E, k) {
    var n = E.stats.length, rows = [], diag = [], order = [], dups = 0;
    GROUPS.forEach(function (g) { E.groups.forEach(function (gg, j) { if (gg === g) order.push(j); }); });
    E.groups.forEach(function (gg, j) { if (order.indexOf(j) < 0) order.push(j); });
    order.forEach(function (j) {
      var i = k * n + j, q = E.q[i], flag = ok(q) && q <= E.alpha;
      var meth = { g: " (gpd)", f: " (floor)" }[E.pm.charAt(i)] || "";
      var dup = !E.fam[j] || (!ok(q) && ok(E.p[i])), cls = (dup ? "dup " : "") + (flag ? "hit" : "");
      if (dup) dups++;
      var out = E.es && ok(E.es[i]) && (E.es[i] < E.bl[i] || E.es[i] > E.bh[i]);  /* beyond the band */
      var size = E.es ? '<td class="n">' + (out ? "<b>" : "") + sizeText(E.ek[j], E.es[i]) + (out ? "</b>" : "") + '</td><td class="n">' +
        sizeText(E.ek[j], E.bl[i]) + " … " + sizeText(E.ek[j], E.bh[i]) + "</td>" : "";
      rows.push('<tr class="' + cls + '"><td>' + esc(E.stats[j]) + "</td><td>" + esc(E.groups[j]) +
        '</td><td class="n">' + num(E.v[i]) + '</td><td class="n">' + num(E.m[i]) + "</td>" + size +
        '<td class="n">' + fmtP(E.p[i]) + meth + '</td><td class="n">' + fmtP(q) + "</td></tr>");
      diag.push('<tr class="' + cls + '"><td>' + esc(E.stats[j]) + '</td><td class="n">' + num(E.s[i]) +
        '</td><td class="n">' + num(E.z[i]) + "</td>" + (E.d ? '<td class="n">' + num(E.d[i]) + "</td>" : "") +
        "<td>" + effectBar(E.e[i]) + " " + num(E.e[i]) + "</td></tr>");
    });
    return '<div class="tablewrap"><table class="stats"><thead><tr><th>statistic</th><th>group</th><th>value</th><th>null mean</th>' +
      (E.es ? '<th title="ratio to the null median (×) or shift from it, in the statistic\'s own units; bold: beyond the null\'s 95 % band">effect</th><th>null 95 %</th>' : "") +
      "<th>p</th><th>q</th></tr></thead><tbody>" + rows.join("") + "</tbody></table></div>" +
      (dups ? '<p class="note">Grey rows (q = nan) are outside the decision: duplicates tested once through another statistic (PR through NPR; a GQA key head\'s k.* on its first query head), untested (q.rms, k.rms) or not tested under this null (summary.txt).</p>' : "") +
      '<details class="diag"><summary>in null standard deviations (diagnostics: how narrow each null is, not a ranking)</summary>' +
      '<div class="tablewrap"><table class="stats"><thead><tr><th>statistic</th><th>null sd</th><th>z</th>' +
      (E.d ? "<th>distance (sd)</th>" : "") + "<th>effect (capped at ±" + S.effect_lim + ")</th></tr></thead><tbody>" +
      diag.join("") + "</tbody></table></div></details>";
  }
  function showHead(li, hi) {
    var E = D.entries[cur], k = li * E.H.length + hi, h = E.head, top = h.top[k];
    var html = '<h3 id="detail-title">layer ' + E.L[li] + ", head " + E.H[hi] + "</h3>" +
      '<p class="verdict">head p = <b>' + fmtP(h.p[k]) + "</b>, q = " + fmtP(h.q[k]) + " — " +
      (h.flag[k] ? '<b class="flagged">differs from the null</b>' : "consistent with the null") +
      (top >= 0 ? "; strongest statistic <b>" + esc(E.stats[top]) + "</b> (" + esc(E.groups[top]) + ")" : "") +
      "; σ_Q = " + num(h.sq[k]) + ", σ_K = " + num(h.sk[k]) + "</p>";
    if (h.prof) html += '<p class="verdict">profile (value, effect against the null; * flagged on that axis): ' +
      Object.keys(h.prof).map(function (a) { return esc(a.replace(/_/g, " ")) + " <b>" + profText(h.prof[a], k) + "</b>"; }).join(", ") + "</p>";
    if (D.entries.length > 1 && D.entries.length <= 4) D.entries.forEach(function (O, j) {  /* e.g. QK beside OV */
      if (j === cur || !O.head.prof || O.L.length !== E.L.length || O.H.length !== E.H.length) return;
      html += '<p class="verdict other">in <b>' + esc(O.label) + "</b>: head p = " + fmtP(O.head.p[k]) +
        (O.head.flag[k] ? " (differs)" : "") + "; " + Object.keys(O.head.prof).map(function (a) {
          return esc(a.replace(/_/g, " ")) + " " + profText(O.head.prof[a], k); }).join(", ") + "</p>";
    });
    if (spikes(E, k) !== null) html += '<p class="verdict"><b>' + spikes(E, k) + "</b> outlier" + (spikes(E, k) === 1 ? "" : "s") +
      " (eigenvalues of W_QK beyond a null head's largest, 95 %: spectral concentration, not a count of learned directions)" +
      (h.sx && h.sx[k].length ? ' at <span class="spikes">' + h.sx[k].map(num).join(", ") + "</span> × the edge" : "") + "</p>";
    if (h.beh) html += '<p class="behaviour">behaviour on text (rmtbase probe): ' + Object.keys(h.beh).map(function (b) {
      return esc(b) + " = <b>" + num(h.beh[b][k]) + "</b>";
    }).join(", ") + "</p>";
    if (!E.detail) {
      $("detail").innerHTML = html + "<p>Per-statistic detail of this entry is not embedded (size); see scores.nc.</p>";
      return;
    }
    var ref = D.refs[E.shape], plots = "";
    if (E.spec) plots += spectrumPlot(E, k) + densityPlot(E, k, ref);
    plots += E.hist ? histPlot(E, k, ref) : '<p class="note">No W_QK histogram (element statistics not scored).</p>';
    $("detail").innerHTML = html + '<div class="plots">' + plots + "</div>" + statTable(E, k);
  }
  function mark() {
    var old = document.querySelector("#heatmap .pin");
    if (old) old.parentNode.removeChild(old);
    if (!pinned) return;
    var c = document.querySelector('#heatmap rect[data-l="' + pinned[0] + '"][data-h="' + pinned[1] + '"]');
    if (!c) return;
    var r = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    ["x", "y", "width", "height"].forEach(function (a) { r.setAttribute(a, c.getAttribute(a)); });
    r.setAttribute("class", "pin");
    c.parentNode.appendChild(r);
  }
  function pin(li, hi) { pinned = [li, hi]; showHead(li, hi); mark(); }

  /* ---- heatmap of the per-head verdict ---- */
  function heatmap(E) {
    var nl = E.L.length, nh = E.H.length, cw = Math.max(8, Math.min(30, 620 / nh)), ch = Math.max(6, Math.min(24, 460 / nl));
    var ml = 44, mb = 34, W = ml + nh * cw + 8, H = nl * ch + mb + 6, s = [], li, hi, k, x, y;
    var text = E.head.ns && nl * nh <= S.text_cells && cw >= 14 && ch >= 12;
    s.push('<svg id="heatsvg" width="' + W + '" height="' + H + '">');
    for (li = 0; li < nl; li++) for (hi = 0; hi < nh; hi++) {
      k = li * nh + hi; x = ml + hi * cw; y = 4 + (nl - 1 - li) * ch;
      s.push('<rect class="cell" data-l="' + li + '" data-h="' + hi + '" x="' + x.toFixed(1) + '" y="' + y.toFixed(1) +
        '" width="' + cw.toFixed(1) + '" height="' + ch.toFixed(1) + '" fill="' + headColour(E, k) + '">' +
        "<title>layer " + E.L[li] + ", head " + E.H[hi] + ": " +
        "p " + fmtP(E.head.p[k]) + (spikes(E, k) !== null ? ", " + spikes(E, k) + " spikes" : "") + "</title></rect>");
      if (text && spikes(E, k) !== null) s.push('<text class="ns" x="' + (x + cw / 2).toFixed(1) + '" y="' + (y + ch / 2 + 3.5).toFixed(1) +
        '" text-anchor="middle" style="fill:' + (verdictPos(E.head.p[k]) > 0.55 ? "#fff" : "#000") + '">' + spikes(E, k) + "</text>");
      if (E.head.flag[k]) s.push('<rect class="flagbox" x="' + (x + 1.5).toFixed(1) + '" y="' + (y + 1.5).toFixed(1) +
        '" width="' + (cw - 3).toFixed(1) + '" height="' + (ch - 3).toFixed(1) + '"/>');
    }
    var step = Math.max(1, Math.ceil(nh / 16));
    for (hi = 0; hi < nh; hi += step) s.push('<text x="' + (ml + (hi + 0.5) * cw) + '" y="' + (nl * ch + 18) + '" text-anchor="middle">' + E.H[hi] + "</text>");
    step = Math.max(1, Math.ceil(nl / 16));
    for (li = 0; li < nl; li += step) s.push('<text x="' + (ml - 4) + '" y="' + (4 + (nl - 0.5 - li) * ch + 3) + '" text-anchor="end">' + E.L[li] + "</text>");
    s.push('<text x="' + (ml + nh * cw / 2) + '" y="' + (H - 2) + '" text-anchor="middle">head</text>');
    s.push('<text x="10" y="' + (nl * ch / 2) + '" transform="rotate(-90 10 ' + (nl * ch / 2) + ')" text-anchor="middle">layer</text></svg>');
    var bar = '<div class="cbar"><span>0</span>', i;
    {
      for (i = 0; i < 32; i++) bar += '<i style="background:' + lut(S.verdict, i / 31) + '"></i>';
      bar += "<span>" + S.verdict_lim + "</span> −log₁₀ head p (boxed: flagged, BH α=" + E.alpha +
        (text ? "; number in a cell: its outliers" : "") + ")</div>";
    }
    $("heatmap").innerHTML = s.join("") + bar;
    $("heatmap").style.maxWidth = Math.max(W, 420) + "px";
    var svg = $("heatsvg");
    svg.addEventListener("mouseover", function (ev) {
      var t = ev.target;
      if (!pinned && t.getAttribute && t.getAttribute("data-l") !== null) showHead(+t.getAttribute("data-l"), +t.getAttribute("data-h"));
    });
    svg.addEventListener("click", function (ev) {
      var t = ev.target;
      if (t.getAttribute && t.getAttribute("data-l") !== null) pin(+t.getAttribute("data-l"), +t.getAttribute("data-h"));
    });
  }

  /* ---- table of the heads and their profile, sortable ---- */
  function topTable(E) {
    var nh = E.H.length, idx = [], rows = [];
    for (var k = 0; k < E.head.p.length; k++) idx.push(k);
    var rank = E.head.rank, prof = E.head.prof, axes = prof ? Object.keys(prof) : [];
    idx.sort(function (a, b) {  /* rank: rmtbase.report.tables.head_ranking; a tie by (layer, head) */
      if (rank) return rank[a] - rank[b] || a - b;
      var pa = ok(E.head.p[a]) ? E.head.p[a] : 1, pb = ok(E.head.p[b]) ? E.head.p[b] : 1;
      return pa - pb || a - b;
    });
    var nflag = E.head.flag.reduce(function (a, b) { return a + b; }, 0);
    var shared = {};  /* heads per rank: a rank two heads share is a tie, shown "3=" */
    if (rank) rank.forEach(function (r) { shared[r] = (shared[r] || 0) + 1; });
    var kind = E.head.kind, key = E.head.key;
    idx.slice(0, Math.min(idx.length, Math.max(25, Math.min(200, nflag)))).forEach(function (k) {
      var li = Math.floor(k / nh), hi = k % nh;
      var ns = spikes(E, k);
      rows.push('<tr data-l="' + li + '" data-h="' + hi + '">' +
        (rank ? '<td class="n" data-v="' + rank[k] + '"' + (shared[rank[k]] > 1 ? ' title="tied: ' + shared[rank[k]] + ' heads share this rank"' : "") + ">" + rank[k] + (shared[rank[k]] > 1 ? "=" : "") + "</td>" : "") +
        '<td data-v="' + E.L[li] + '">' + E.L[li] + '</td><td data-v="' + E.H[hi] + '">' + E.H[hi] +
        (kind ? '</td><td data-v="' + esc(kind[k]) + '" title="' + esc(E.head.kinds[k] + " (" + E.head.kind_axes[k] + ")") + '">' + esc(kind[k]) : "") +
        (key ? '</td><td class="n" data-v="' + (ok(key[k]) ? key[k] : -1e300) + '">' + (ok(key[k]) ? num(key[k]) : "") : "") +
        (E.head.ns ? '</td><td class="n" data-v="' + (ns === null ? -1 : ns) + '">' + (ns === null ? "" : ns) : "") +
        '</td><td data-v="' + (ok(E.head.p[k]) ? E.head.p[k] : 2) + '">' + fmtP(E.head.p[k]) + '</td><td data-v="' + (ok(E.head.q[k]) ? E.head.q[k] : 2) + '">' +
        fmtP(E.head.q[k]) + '</td><td data-v="' + E.head.flag[k] + '">' + (E.head.flag[k] ? "yes" : "") +
        axes.map(function (a) {
          var x = prof[a], sv = ok(x.e[k]) ? (x.k === "ratio" ? Math.abs(Math.log(Math.max(x.e[k], 1e-300))) : Math.abs(x.e[k])) : (ok(x.v[k]) ? x.v[k] : -1);
          return '</td><td class="n" data-v="' + sv + '">' + profText(x, k);
        }).join("") + "</td></tr>");
    });
    $("toptable").innerHTML = "<thead><tr>" +
      (rank ? '<th title="rank in the order of ' + esc(E.head.order) + ' (1 first); equal values share a rank, marked =">rank</th>' : "") +
      "<th>layer</th><th>head</th>" +
      (kind ? '<th title="primary kind (docs/kinds.md); hover a cell for every kind and its axes">kind</th>' : "") +
      (key ? '<th title="the value the rank orders by">' + esc(E.head.order.replace(/_/g, " ")) + "</th>" : "") +
      (E.head.ns ? '<th title="eigenvalues of W_QK above the null edge: spectral concentration">outliers</th>' : "") + "<th>head p</th><th>head q</th><th>flagged</th>" +
      axes.map(function (a) { return '<th title="value (effect against the null; sorts by |effect|); * flagged on this axis">' + esc(a.replace(/_/g, " ")) + "</th>"; }).join("") +
      "</tr></thead><tbody>" +
      rows.join("") + "</tbody>";
    sortable($("toptable"));
    $("toptable").tBodies[0].addEventListener("click", function (ev) {
      var tr = ev.target.closest("tr");
      if (tr) pin(+tr.getAttribute("data-l"), +tr.getAttribute("data-h"));
    });
  }
  function sortable(table) {
    if (!table || !table.tHead || table.getAttribute("data-sortable")) return;
    table.setAttribute("data-sortable", "1");
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        var dir = th.getAttribute("data-dir") === "asc" ? -1 : 1;
        Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("data-dir"); });
        th.setAttribute("data-dir", dir > 0 ? "asc" : "desc");
        function key(r) {
          var c = r.cells[col], v = c.getAttribute("data-v");
          v = v === null ? c.textContent : v;
          var f = parseFloat(v);
          return isNaN(f) ? v : f;
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * dir;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }
  function facts(E) {
    $("facts").innerHTML = "<table>" + E.facts.map(function (f) {
      return "<tr><th>" + esc(f[0]) + "</th><td>" + esc(f[1]) + "</td></tr>";
    }).join("") + "</table>";
  }
  function render(i) {
    cur = i; pinned = null;
    var E = D.entries[i];
    facts(E); heatmap(E); topTable(E);
    $("detail").innerHTML = '<p class="note">Hover over a head to see its statistics beside the null; click to keep it.</p>';
  }
  if (D.entries.length > 1) {
    var sel = '<label>entry: <select id="entry-select">' + D.entries.map(function (E, i) {
      return '<option value="' + i + '">' + esc(E.label) + (E.detail ? "" : " (verdict only)") + "</option>";
    }).join("") + "</select></label>";
    $("entry").innerHTML = sel;
    $("entry-select").addEventListener("change", function (ev) { render(+ev.target.value); });
  }
  document.querySelectorAll("table.sortable").forEach(sortable);
  if (D.entries.length) render(0);
  window.rmtbaseReport = { pin: pin, render: render };
})();
