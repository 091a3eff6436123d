// The plan graph: laid out by dagre once per structure, redrawn with each message.
import dagre from "@dagrejs/dagre";
import type { Feed, GraphNode, Stats } from "./api";

const SVG = "http://www.w3.org/2000/svg";
const CHAR = 7.2; // px per character of the 12px monospace font
const LINE = 16;

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

function fmt(n: number | null | undefined, digits = 0): string {
  if (n === null || n === undefined) return "-";
  return n.toLocaleString("en-US", { maximumFractionDigits: digits });
}

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

/** The node's lines: [text, stat name or ""]. */
function lines(n: GraphNode): [string, string][] {
  const s: Stats = n.stats;
  if (n.kind === "queue") {
    return [[`${n.label}: ${fmt(s.queued_rows)} queued · ${bytes(s.memory)}`, "queued_rows"]];
  }
  const out: [string, string][] = [[n.label, ""]];
  if (n.synopsis && n.synopsis !== "-") out.push([`${n.kind === "sink" ? "writes" : "synopsis"}: ${n.synopsis}`, ""]);
  out.push([`serves: ${n.queries.join(", ") || "-"}`, ""]);
  out.push([`in ${fmt(s.rows_in)} · out ${fmt(s.rows_out)}`, "rows_in"]);
  out.push([`${fmt(s.rows_per_s, 1)} rows/s · selectivity ${fmt(s.selectivity, 3)}`, "rows_per_s"]);
  if (n.kind !== "sink") out.push([`queued ${fmt(s.queued_rows)} · memory ${bytes(s.memory)}`, "memory"]);
  if (s.window) out.push([`window: ${s.window}`, "window"]);
  if (s.filter_order) out.push([`filter order: ${s.filter_order}`, "filter_order"]);
  if (s.probe_orders) out.push([`probe orders: ${s.probe_orders}`, "probe_orders"]);
  if (s.priority != null) out.push([`scheduler priority ${s.priority.toPrecision(3)}`, "priority"]);
  if (s.late || s.dead_lettered) out.push([`late ${fmt(s.late)} · dead-lettered ${fmt(s.dead_lettered)}`, "late"]);
  return out;
}

const WIDTH_LINES = 46; // characters reserved for the changing lines

export class PlanGraph {
  private shape = "";
  private boxes = new Map<string, Box>();
  private routes: { from: string; to: string; points: { x: number; y: number }[] }[] = [];
  private size = { width: 0, height: 0 };

  constructor(private readonly svg: SVGSVGElement) {}

  update(feed: Feed): void {
    const shape = JSON.stringify([feed.nodes.map((n) => [n.id, n.label, n.synopsis, n.queries]), feed.edges]);
    if (shape !== this.shape) {
      this.layout(feed);
      this.shape = shape;
    }
    this.draw(feed);
  }

  private layout(feed: Feed): void {
    const g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "TB", nodesep: 24, ranksep: 28, marginx: 8, marginy: 8 });
    g.setDefaultEdgeLabel(() => ({}));
    for (const n of feed.nodes) {
      const ls = lines(n);
      const chars = Math.max(n.kind === "queue" ? 30 : WIDTH_LINES, ...ls.filter(([, s]) => !s).map(([t]) => t.length));
      const extra = n.kind === "operator" || n.kind === "source" ? 1 : 0; // room for a window line
      g.setNode(n.id, { width: chars * CHAR + 16, height: (ls.length + extra) * LINE + 10 });
    }
    for (const e of feed.edges) g.setEdge(e.from, e.to);
    dagre.layout(g);
    this.boxes.clear();
    for (const id of g.nodes()) {
      const b = g.node(id) as unknown as Box;
      this.boxes.set(id, { x: b.x, y: b.y, width: b.width, height: b.height });
    }
    this.routes = g.edges().map((e) => ({ from: e.v, to: e.w, points: (g.edge(e) as { points: { x: number; y: number }[] }).points }));
    const gl = g.graph() as { width?: number; height?: number };
    this.size = { width: gl.width ?? 0, height: gl.height ?? 0 };
  }

  private draw(feed: Feed): void {
    const svg = this.svg;
    svg.replaceChildren();
    svg.setAttribute("viewBox", `0 0 ${this.size.width} ${this.size.height}`);
    svg.setAttribute("width", String(this.size.width));
    svg.setAttribute("height", String(this.size.height));
    const defs = document.createElementNS(SVG, "defs");
    defs.innerHTML = '<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" class="arrow"/></marker>';
    svg.append(defs);
    for (const r of this.routes) {
      const path = document.createElementNS(SVG, "path");
      path.setAttribute("d", "M" + r.points.map((p) => `${p.x},${p.y}`).join(" L"));
      path.setAttribute("class", "edge");
      path.setAttribute("marker-end", "url(#arrow)");
      svg.append(path);
    }
    for (const n of feed.nodes) {
      const b = this.boxes.get(n.id);
      if (!b) continue;
      const g = document.createElementNS(SVG, "g");
      g.setAttribute("class", `node ${n.kind}`);
      g.dataset.nodeId = n.id;
      g.dataset.kind = n.kind;
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("x", String(b.x - b.width / 2));
      rect.setAttribute("y", String(b.y - b.height / 2));
      rect.setAttribute("width", String(b.width));
      rect.setAttribute("height", String(b.height));
      rect.setAttribute("rx", n.kind === "queue" ? "10" : "4");
      g.append(rect);
      lines(n).forEach(([t, stat], i) => {
        const text = document.createElementNS(SVG, "text");
        text.setAttribute("x", String(b.x - b.width / 2 + 8));
        text.setAttribute("y", String(b.y - b.height / 2 + 17 + i * LINE));
        if (i === 0) text.setAttribute("class", "title");
        if (stat) text.dataset.stat = stat;
        text.textContent = t;
        g.append(text);
      });
      svg.append(g);
    }
  }
}
