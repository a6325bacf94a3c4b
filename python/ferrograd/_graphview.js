// The page of Graph.to_html: lays the graph out with dagre (inlined before this script),
// draws it as SVG, and handles collapsing, panning, zooming and the detail panel.
// The URL's fragment can open groups: #expand=forward/h.0,forward/h.0.attn (or #expand=all).
(function () {
  "use strict";
  const M = JSON.parse(document.getElementById("graph-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const svg = document.getElementById("graph");
  const view = document.getElementById("viewport");
  const panel = document.getElementById("panel");
  const groups = new Map(M.groups.map((g) => [g.id, g]));
  const open = new Map(M.groups.map((g) => [g.id, g.open]));
  const kids = new Map();
  for (const g of M.groups) {
    if (!kids.has(g.parent)) kids.set(g.parent, []);
    kids.get(g.parent).push(g.id);
  }
  const outputs = new Set(M.outputs);

  // what each group holds, for its collapsed box and its panel
  const agg = new Map(M.groups.map((g) => [g.id, { ops: 0, time: 0, bytes: 0, allocated: 0, nodes: [] }]));
  M.nodes.forEach((n, i) => {
    for (let gid = n.group; gid != null; gid = groups.get(gid).parent) {
      const a = agg.get(gid);
      a.nodes.push(i);
      if (n.kind === "op") {
        a.ops += 1;
        a.time += n.time || 0;
        a.bytes += n.bytes || 0;
        a.allocated += n.allocated || 0;
      }
    }
  });

  function ancestors(gid) {
    const out = [];
    for (; gid != null; gid = groups.get(gid).parent) out.push(gid);
    return out.reverse();
  }

  function setOpen(gid, value) {
    open.set(gid, value);
    if (value) for (const a of ancestors(groups.get(gid).parent)) open.set(a, true);
  }

  function readHash() {
    const m = /(?:^#|&)expand=([^&]*)/.exec(location.hash);
    if (!m) return;
    for (const gid of decodeURIComponent(m[1]).split(",")) {
      if (gid === "all") for (const g of M.groups) open.set(g.id, true);
      else if (groups.has(gid)) setOpen(gid, true);
    }
  }
  // #select=<node index> shows that node's panel (as a click would)
  function readSelect() {
    const m = /(?:^#|&)select=(\d+)/.exec(location.hash);
    if (m && +m[1] < M.nodes.length) showNode(+m[1]);
  }

  // The visible stand-in of a node: the outermost closed group around it, or itself.
  function rep(i) {
    for (const gid of ancestors(M.nodes[i].group)) if (!open.get(gid)) return "g:" + gid;
    return "n" + i;
  }

  const fmtMs = (t) => (t == null ? "" : t * 1e3 >= 100 ? (t * 1e3).toFixed(0) + " ms" : (t * 1e3).toFixed(3) + " ms");
  function fmtBytes(b) {
    if (b == null) return "";
    if (b < 0) return "-" + fmtBytes(-b);
    const u = ["B", "KiB", "MiB", "GiB"];
    let k = 0;
    while (b >= 1024 && k < u.length - 1) {
      b /= 1024;
      k += 1;
    }
    return (k ? b.toFixed(1) : b) + " " + u[k];
  }
  const KIND_FILL = { arg: "#d8ecff", ref: "#fff1c9", const: "#eeeeee", grad: "#f5dcff" };
  const EFFECT_FILL = { pure: "#ffffff", view: "#eef7ee", mutates: "#ffe0dc", random: "#fff6dc" };
  const REGION_FILL = { forward: "#f7faff", backward: "#faf5ff", optimizer: "#fff8f0" };
  function heat(f) {
    // white (no time) to red (the slowest visible box)
    const s = Math.sqrt(Math.max(0, Math.min(1, f)));
    return `hsl(${Math.round(45 - 45 * s)}, ${Math.round(60 + 35 * s)}%, ${Math.round(97 - 33 * s)}%)`;
  }

  function el(name, attrs, parent) {
    const e = document.createElementNS(SVG, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  const CHAR = 6.6;
  function boxSize(lines) {
    const w = Math.max(...lines.map((s, k) => s.length * (k === 0 ? CHAR + 0.8 : CHAR - 0.6)));
    return { width: Math.min(300, Math.max(80, Math.ceil(w + 22))), height: 16 + 15 * lines.length };
  }
  const clip = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);

  let current = null;

  function layout() {
    const items = new Map();
    const parentOf = (gid) => (gid == null ? undefined : "c:" + gid);
    M.nodes.forEach((n, i) => {
      const r = rep(i);
      if (items.has(r)) return;
      if (r[0] === "n") {
        const lines = [clip(n.label, 40), clip(n.outs.slice(0, 2).join(", ") + (n.outs.length > 2 ? " …" : ""), 42)];
        if (n.time != null) lines.push(fmtMs(n.time));
        items.set(r, { id: r, kind: n.kind, node: i, lines, parent: parentOf(n.group), time: n.time });
      } else {
        const gid = r.slice(2);
        const g = groups.get(gid);
        const a = agg.get(gid);
        const lines = [clip("▸ " + g.label + (g.type ? " · " + g.type : ""), 40), a.ops + (a.ops === 1 ? " op" : " ops") + (M.profiled ? " · " + fmtMs(a.time) : "")];
        items.set(r, { id: r, kind: "group", group: gid, lines, parent: parentOf(g.parent), time: M.profiled ? a.time : null });
      }
    });
    // open groups with something visible inside become clusters
    const clusters = new Map();
    for (const it of items.values()) {
      let p = it.parent;
      while (p !== undefined && !clusters.has(p)) {
        const gid = p.slice(2);
        clusters.set(p, { id: p, group: gid, parent: parentOf(groups.get(gid).parent) });
        p = clusters.get(p).parent;
      }
    }
    const edges = new Map();
    for (const e of M.edges) {
      const a = rep(e.from);
      const b = rep(e.to);
      if (a === b) continue;
      const key = a + "\u0000" + b;
      if (!edges.has(key)) edges.set(key, { v: a, w: b, types: new Set(), count: 0 });
      const x = edges.get(key);
      x.types.add(e.type);
      x.count += 1;
    }
    for (const it of items.values()) Object.assign(it, boxSize(it.lines));
    const t0 = performance.now();
    const { pos, routes } = nestedLayout(items, clusters, edges);
    const ms = performance.now() - t0;
    current = { items, clusters, edges, pos, routes, ms };
    draw();
  }

  // Each open group is laid out on its own (dagre, a flat layered layout) with
  // its members and closed subgroups as boxes, innermost first; a group then
  // takes its drawing's size in its parent's layout (TensorBoard's scheme).
  // Boxes cannot overlap and members stay inside their group by construction.
  // An edge leaving a group runs, inside it, to the group's out-port (a point
  // the layout places below its members), then on the parent's route between
  // the groups' boxes, then from the other group's in-port to its end.
  const PAD = 10;
  const TITLE = 22;
  function nestedLayout(items, clusters, edges) {
    const container = (id) => (clusters.has(id) ? clusters.get(id).parent : items.get(id).parent) || "";
    const chain = (id) => {
      const out = [id];
      for (let c = container(id); c; c = container(c)) out.push(c);
      out.push("");
      return out.reverse(); // root ("") first, the box itself last
    };
    const members = new Map([["", []]]);
    for (const c of clusters.keys()) members.set(c, []);
    for (const id of [...clusters.keys(), ...items.keys()]) members.get(container(id)).push(id);
    const local = new Map([...members.keys()].map((c) => [c, new Map()]));
    const hops = new Map(); // edge -> [[group, from, to], ...] in path order
    const hop = (c, v, w, list) => {
      const m = local.get(c);
      const key = v + "\u0000" + w;
      if (!m.has(key)) m.set(key, { v, w, n: 0 });
      m.get(key).n += 1;
      list.push([c, v, w]);
    };
    for (const e of edges.values()) {
      const ca = chain(e.v);
      const cb = chain(e.w);
      let k = 0;
      while (ca[k + 1] === cb[k + 1]) k += 1;
      const list = [];
      for (let j = ca.length - 2; j > k; j--) hop(ca[j], ca[j + 1], ca[j] + "#out", list);
      hop(ca[k], ca[k + 1], cb[k + 1], list);
      for (let j = k + 1; j <= cb.length - 2; j++) hop(cb[j], cb[j] + "#in", cb[j + 1], list);
      hops.set(e, list);
    }
    const size = new Map(); // box id -> [width, height]
    for (const it of items.values()) size.set(it.id, [it.width, it.height]);
    const rel = new Map(); // member id -> centre within its group's box
    const relRoutes = new Map(); // group + from + to -> points within the group's box
    const depth = (c) => (c ? chain(c).length : 0);
    const order = [...members.keys()].sort((a, b) => depth(b) - depth(a));
    for (const c of order) {
      const ids = members.get(c);
      const dn = ids.map((id) => ({ v: id, width: size.get(id)[0], height: size.get(id)[1] }));
      const ports = new Set();
      for (const x of local.get(c).values()) for (const v of [x.v, x.w]) if (v.endsWith("#in") || v.endsWith("#out")) ports.add(v);
      for (const v of ports) dn.push({ v, width: 1, height: 1 });
      const de = [...local.get(c).values()].map((x) => ({ v: x.v, w: x.w, minlen: 1, weight: x.n }));
      dagre.layout(dn, de, { nodesep: 18, ranksep: 26, edgesep: 10 }, {});
      let minX = Infinity;
      let minY = Infinity;
      let maxX = -Infinity;
      let maxY = -Infinity;
      for (const d of dn) {
        minX = Math.min(minX, d.x - d.width / 2);
        minY = Math.min(minY, d.y - d.height / 2);
        maxX = Math.max(maxX, d.x + d.width / 2);
        maxY = Math.max(maxY, d.y + d.height / 2);
      }
      const title = c ? groups.get(clusters.get(c).group) : null;
      const titleW = title ? (title.label.length + title.type.length + 14) * 6.2 : 0;
      const innerW = Math.max(maxX - minX, titleW);
      const ox = (c ? PAD : 0) - minX + (innerW - (maxX - minX)) / 2;
      const oy = (c ? TITLE : 0) - minY;
      for (const d of dn) rel.set(d.v, [d.x + ox, d.y + oy]);
      for (const d of de) relRoutes.set(c + "\u0000" + d.v + "\u0000" + d.w, (d.points || []).map((q) => [q.x + ox, q.y + oy]));
      if (c) size.set(c, [innerW + 2 * PAD, maxY - minY + TITLE + PAD]);
    }
    // absolute positions, outermost first
    const pos = new Map();
    const origin = new Map([["", [0, 0]]]);
    for (const c of [...order].reverse()) {
      const [ox, oy] = origin.get(c);
      for (const id of members.get(c)) {
        const [x, y] = rel.get(id);
        const [w, h] = size.get(id);
        pos.set(id, { x: x + ox, y: y + oy, width: w, height: h });
        if (clusters.has(id)) origin.set(id, [x + ox - w / 2, y + oy - h / 2]);
      }
    }
    const routes = [];
    for (const [e, list] of hops) {
      const pts = [];
      for (const [c, v, w] of list) {
        const [ox, oy] = origin.get(c);
        for (const [x, y] of relRoutes.get(c + "\u0000" + v + "\u0000" + w)) pts.push({ x: x + ox, y: y + oy });
      }
      if (pts.length) routes.push({ edge: e, points: pts });
    }
    return { pos, routes };
  }

  function draw() {
    const { items, clusters, pos, routes } = current;
    view.textContent = "";
    const maxT = Math.max(0, ...[...items.values()].map((it) => it.time || 0));
    let minX = Infinity;
    let minY = Infinity;
    let maxX = -Infinity;
    let maxY = -Infinity;
    const grow = (x, y, w, h) => {
      minX = Math.min(minX, x);
      minY = Math.min(minY, y);
      maxX = Math.max(maxX, x + w);
      maxY = Math.max(maxY, y + h);
    };
    const gClusters = el("g", { class: "clusters" }, view);
    const gEdges = el("g", { class: "edges" }, view);
    const gNodes = el("g", { class: "nodes" }, view);
    // outer clusters first, so inner ones draw on top
    const depth = (c) => ancestors(c.group).length;
    for (const c of [...clusters.values()].sort((a, b) => depth(a) - depth(b))) {
      const p = pos.get(c.id);
      const g = groups.get(c.group);
      const x = p.x - p.width / 2;
      const y = p.y - p.height / 2;
      grow(x, y, p.width, p.height);
      const ge = el("g", { class: "cluster", "data-id": c.id, "data-group": c.group, "data-parent": c.parent || "" }, gClusters);
      el("rect", { x, y, width: p.width, height: p.height, rx: 8, fill: REGION_FILL[c.group.split("/")[0]] || "#fafafa" }, ge);
      const t = el("text", { x: x + 8, y: y + 13, class: "ctitle" }, ge);
      t.textContent = "▾ " + g.label + (g.type ? " · " + g.type : "") + (M.profiled ? "  " + fmtMs(agg.get(c.group).time) : "");
      ge.addEventListener("click", (ev) => {
        ev.stopPropagation();
        if (ev.target === t || ev.detail > 1) {
          open.set(c.group, false);
          layout();
        } else showGroup(c.group);
      });
    }
    for (const r of routes) {
      const e = r.edge;
      const pts = r.points;
      for (const q of pts) grow(q.x, q.y, 0, 0);
      const path = el(
        "path",
        {
          class: "edge",
          d: "M" + pts.map((q) => q.x.toFixed(1) + "," + q.y.toFixed(1)).join(" L"),
          "data-from": e.v,
          "data-to": e.w,
          "data-points": pts.map((q) => q.x.toFixed(2) + "," + q.y.toFixed(2)).join(" "),
          "marker-end": "url(#arrow)",
        },
        gEdges
      );
      const title = el("title", {}, path);
      title.textContent = [...e.types].join(", ") + (e.count > 1 ? ` (${e.count} values)` : "");
    }
    for (const it of items.values()) {
      const p = pos.get(it.id);
      const x = p.x - it.width / 2;
      const y = p.y - it.height / 2;
      grow(x, y, it.width, it.height);
      const n = it.node != null ? M.nodes[it.node] : null;
      let fill;
      if (M.profiled && it.time != null) fill = heat(maxT > 0 ? it.time / maxT : 0);
      else if (it.kind === "group") fill = "#ffffff";
      else if (n.kind !== "op") fill = KIND_FILL[n.kind] || "#ffffff";
      else fill = n.fused ? "#dff3ff" : EFFECT_FILL[n.effect] || "#ffffff";
      const cls = "node " + it.kind + (it.node != null && outputs.has(it.node) ? " output" : "");
      const ge = el("g", { class: cls, "data-id": it.id, "data-parent": it.parent || "", "data-time": it.time == null ? "" : it.time }, gNodes);
      el("rect", { x, y, width: it.width, height: it.height, rx: it.kind === "group" ? 4 : n.kind === "op" ? 6 : 16, fill }, ge);
      it.lines.forEach((s, k) => {
        const t = el("text", { x: p.x, y: y + 19 + 15 * k, class: k === 0 ? "label" : "sub" }, ge);
        t.textContent = s;
      });
      const tip = el("title", {}, ge);
      tip.textContent = it.kind === "group" ? "click to open" : [n.label, n.attrs, n.source || ""].filter(Boolean).join("\n");
      ge.addEventListener("click", (ev) => {
        ev.stopPropagation();
        if (it.kind === "group") {
          open.set(it.group, true);
          layout();
          showGroup(it.group);
        } else showNode(it.node);
      });
    }
    if (minX === Infinity) minX = minY = maxX = maxY = 0;
    const pad = 12;
    current.box = { x: minX - pad, y: minY - pad, w: maxX - minX + 2 * pad, h: maxY - minY + 2 * pad };
    svg.setAttribute("data-layout-width", (maxX - minX).toFixed(1));
    svg.setAttribute("data-layout-height", (maxY - minY).toFixed(1));
    svg.setAttribute("data-layout-ms", current.ms.toFixed(1));
    svg.setAttribute("data-boxes", String(items.size));
    fit(false);
    legend(maxT);
  }

  // -- pan and zoom ------------------------------------------------------------
  let tx = 0;
  let ty = 0;
  let scale = 1;
  function apply() {
    view.setAttribute("transform", `translate(${tx.toFixed(1)},${ty.toFixed(1)}) scale(${scale.toFixed(4)})`);
  }
  function fit(always) {
    const b = current.box;
    const cw = svg.clientWidth || 1200;
    const ch = svg.clientHeight || 800;
    // 1:1 when the drawing fits; never blown up; at first not below half size for the height
    scale = always ? Math.min(1, cw / b.w, ch / b.h) : Math.min(1, cw / b.w, Math.max(0.55, ch / b.h));
    tx = (cw - b.w * scale) / 2 - b.x * scale;
    ty = 8 - b.y * scale;
    apply();
  }
  svg.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const r = svg.getBoundingClientRect();
    const mx = ev.clientX - r.left;
    const my = ev.clientY - r.top;
    const k = Math.exp(-ev.deltaY * 0.0015);
    const s = Math.max(0.05, Math.min(8, scale * k));
    tx = mx - ((mx - tx) * s) / scale;
    ty = my - ((my - ty) * s) / scale;
    scale = s;
    apply();
  }, { passive: false });
  let drag = null;
  svg.addEventListener("mousedown", (ev) => {
    drag = { x: ev.clientX, y: ev.clientY, tx, ty };
  });
  window.addEventListener("mousemove", (ev) => {
    if (!drag) return;
    tx = drag.tx + ev.clientX - drag.x;
    ty = drag.ty + ev.clientY - drag.y;
    apply();
  });
  window.addEventListener("mouseup", () => {
    drag = null;
  });

  // -- the panel ---------------------------------------------------------------
  function rows(pairs) {
    const t = document.createElement("table");
    for (const [k, v] of pairs) {
      if (v == null || v === "") continue;
      const tr = t.insertRow();
      const th = document.createElement("th");
      th.textContent = k;
      tr.appendChild(th);
      const td = tr.insertCell();
      td.textContent = v;
    }
    return t;
  }
  function head(text) {
    panel.textContent = "";
    const h = document.createElement("h2");
    h.textContent = text;
    panel.appendChild(h);
  }
  function showNode(i) {
    const n = M.nodes[i];
    head(n.kind === "op" ? `${n.label} (node ${n.index})` : n.label);
    panel.appendChild(
      rows([
        ["kind", n.kind === "op" ? (n.fused ? "fused kernel" : "op") : { arg: "argument", ref: "tensor read by reference", const: "constant", grad: "gradient" }[n.kind] || n.kind],
        ["attributes", n.attrs],
        ["inputs", n.ins.map((t, k) => t + (n.from && n.from[k] ? "  ← " + n.from[k] : "")).join("\n")],
        ["outputs", n.outs.join("\n")],
        ["source", n.source],
        ["module", n.module ? n.module + (n.moduleType ? " (" + n.moduleType + ")" : "") : ""],
        ["region", n.region],
        ["effect", n.effect],
        ["time", M.profiled && n.kind === "op" ? fmtMs(n.time) + (M.total ? ` (${((100 * (n.time || 0)) / M.total).toFixed(1)}% of the run)` : "") : ""],
        ["output bytes", fmtBytes(n.bytes)],
        ["allocated (measured)", M.measuredBytes && n.kind === "op" ? fmtBytes(n.allocated) : ""],
        ["held after (measured)", M.measuredBytes && n.kind === "op" ? fmtBytes(n.live) + (M.peakLive ? ` (peak of the run ${fmtBytes(M.peakLive)})` : "") : ""],
        ["graph output", outputs.has(i) ? "yes" : ""],
      ])
    );
    panel.setAttribute("data-node", "n" + i);
  }
  function showGroup(gid) {
    const g = groups.get(gid);
    const a = agg.get(gid);
    head(g.label + (g.type ? " · " + g.type : ""));
    panel.appendChild(rows([["ops", String(a.ops)], ["time", M.profiled ? fmtMs(a.time) : ""], ["output bytes", fmtBytes(a.bytes)], ["allocated (measured)", M.measuredBytes ? fmtBytes(a.allocated) : ""]]));
    const slow = a.nodes.filter((i) => M.nodes[i].kind === "op").sort((x, y) => (M.nodes[y].time || 0) - (M.nodes[x].time || 0)).slice(0, 8);
    if (M.profiled && slow.length) {
      const p = document.createElement("p");
      p.textContent = "slowest:";
      panel.appendChild(p);
      const ul = document.createElement("ul");
      for (const i of slow) {
        const li = document.createElement("li");
        li.textContent = `${M.nodes[i].label} (node ${M.nodes[i].index}) ${fmtMs(M.nodes[i].time)}`;
        li.addEventListener("click", () => showNode(i));
        ul.appendChild(li);
      }
      panel.appendChild(ul);
    }
  }

  function legend(maxT) {
    const lg = document.getElementById("legend");
    lg.textContent = "";
    const add = (text, style) => {
      const s = document.createElement("span");
      s.textContent = text;
      s.setAttribute("style", style);
      lg.appendChild(s);
    };
    if (M.profiled) {
      add("time: 0", "background:" + heat(0));
      add(fmtMs(maxT / 4), "background:" + heat(0.25));
      add(fmtMs(maxT) + " (slowest box)", "background:" + heat(1));
    } else {
      add("argument", "background:" + KIND_FILL.arg);
      add("read by reference", "background:" + KIND_FILL.ref);
      add("fused kernel", "background:#dff3ff");
      add("in-place write", "background:" + EFFECT_FILL.mutates);
      add("(profile() to colour by time)", "border:none");
    }
  }

  document.getElementById("fit").addEventListener("click", () => fit(true));
  document.getElementById("collapse").addEventListener("click", () => {
    for (const g of M.groups) open.set(g.id, false);
    layout();
  });
  document.getElementById("expand").addEventListener("click", () => {
    for (const g of M.groups) open.set(g.id, true);
    layout();
  });
  const defs = el("defs", {}, svg);
  const mk = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
  el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#777" }, mk);
  readHash();
  layout();
  readSelect();
  window.addEventListener("hashchange", () => {
    readHash();
    layout();
    readSelect();
  });
})();
