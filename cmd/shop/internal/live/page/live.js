// The live view: every event carries the whole state; each phase is drawn
// into its own card.
"use strict";
const kinds = ["ordered", "sold-out", "limit-reached", "busy", "error"];
const colors = {"ordered": "#1a7f37", "sold-out": "#8250df", "limit-reached": "#9a6700", "busy": "#bc4c00", "error": "#cf222e"};
const bounds = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];
const cards = new Map();

function card(p) {
  const id = p.strategy + "/" + p.kind;
  let c = cards.get(id);
  if (c) return c;
  c = document.getElementById("card").content.firstElementChild.cloneNode(true);
  c.dataset.testid = "phase-" + p.strategy + "-" + p.kind;
  c.querySelector(".strategy").textContent = p.strategy;
  c.querySelector(".kind").textContent = p.kind + " · " + p.stock.toLocaleString() + " units";
  const head = c.querySelector(".answers tr");
  const row = document.createElement("tr");
  for (const k of kinds) {
    const th = document.createElement("th"); th.textContent = k; th.style.color = colors[k]; head.appendChild(th);
    const td = document.createElement("td"); td.dataset.testid = "answers-" + p.strategy + "-" + p.kind + "-" + k; row.appendChild(td);
  }
  head.parentNode.appendChild(row);
  for (const f of ["orders", "left", "oversold", "undersold"]) {
    c.querySelector("." + f).dataset.testid = f + "-" + p.strategy + "-" + p.kind;
  }
  const axis = c.querySelector(".hist-axis");
  for (const l of ["<1 ms", "10 ms", "100 ms", "1 s", "≥5 s"]) {
    const s = document.createElement("span"); s.textContent = l; axis.appendChild(s);
  }
  document.getElementById("phases").appendChild(c);
  cards.set(id, c);
  return c;
}

function chart(canvas, p) {
  const g = canvas.getContext("2d"), w = canvas.width, h = canvas.height, pad = 28;
  g.clearRect(0, 0, w, h);
  const s = p.series, tmax = Math.max(1, s[s.length - 1][0]);
  const top = p.kind === "burst" ? Math.max(p.stock, s[s.length - 1][1], 1) * 1.1 : Math.max(s[s.length - 1][1], 1) * 1.1;
  const x = t => pad + (w - pad - 6) * t / tmax, y = v => h - 16 - (h - 24) * v / top;
  g.strokeStyle = "#d8dce3"; g.beginPath(); g.moveTo(pad, 4); g.lineTo(pad, h - 16); g.lineTo(w - 6, h - 16); g.stroke();
  g.fillStyle = "#667"; g.font = "11px system-ui";
  g.fillText(Math.round(top / 1.1).toLocaleString(), 2, y(top / 1.1) + 4);
  g.fillText(tmax.toFixed(1) + " s", w - 40, h - 3);
  if (p.kind === "burst") {
    g.setLineDash([5, 4]); g.strokeStyle = "#8c959f"; g.beginPath(); g.moveTo(pad, y(p.stock)); g.lineTo(w - 6, y(p.stock)); g.stroke(); g.setLineDash([]);
  }
  g.strokeStyle = colors.ordered; g.lineWidth = 2; g.beginPath();
  s.forEach(([t, v], i) => i ? g.lineTo(x(t), y(v)) : g.moveTo(x(t), y(v)));
  g.stroke(); g.lineWidth = 1;
}

function hist(canvas, counts) {
  const g = canvas.getContext("2d"), w = canvas.width, h = canvas.height;
  g.clearRect(0, 0, w, h);
  const max = Math.max(1, ...counts), bw = w / counts.length;
  counts.forEach((n, i) => {
    const bh = (h - 4) * n / max;
    g.fillStyle = "#57606a"; g.fillRect(i * bw + 1, h - bh, bw - 2, bh);
  });
}

function render(state) {
  const status = document.getElementById("status");
  status.textContent = state.done ? "run finished" : (state.now ? "running: " + state.now : "waiting for the run");
  status.dataset.done = state.done;
  for (const p of state.phases) {
    const c = card(p);
    chart(c.querySelector(".chart"), p);
    hist(c.querySelector(".hist"), p.latency);
    for (const k of kinds) c.querySelector('[data-testid="answers-' + p.strategy + "-" + p.kind + "-" + k + '"]').textContent = (p.answers[k] || 0).toLocaleString();
    const a = p.audit;
    c.dataset.audited = !!a;
    c.querySelector(".orders").textContent = a ? a.orders : "…";
    c.querySelector(".left").textContent = a ? a.available : "…";
    c.querySelector(".undersold").textContent = a ? a.undersold : "…";
    const o = c.querySelector(".oversold");
    o.textContent = a ? a.oversold : "…";
    o.className = "oversold " + (a ? (a.oversold > 0 ? "bad" : "ok") : "");
    const ul = c.querySelector(".problems");
    ul.replaceChildren(...((a && a.problems) || []).map(t => { const li = document.createElement("li"); li.textContent = t; return li; }));
  }
}

const events = new EventSource("events");
events.onmessage = e => render(JSON.parse(e.data));
events.onerror = () => { document.getElementById("status").textContent = "disconnected; retrying…"; };
