// Memory against the budget over time: one point per message of the live feed, drawn as an
// SVG line (the budget and the resource manager's estimate beside it), the numbers below.
import type { Feed } from "../api";
import { $ } from "../dom";
import { bytes } from "../graph";

const SVG = "http://www.w3.org/2000/svg";
const KEEP = 300; // points kept: five minutes at one message a second
const W = 640;
const H = 180;
const PAD = { left: 70, right: 10, top: 10, bottom: 22 };

interface Point {
  at: number; // ms since the epoch
  memory: number;
  estimated: number | null;
}

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>): SVGElementTagNameMap[K] {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

export class MemoryChart {
  private points: Point[] = [];
  private budget: number | null = null;
  private pipeline = "";

  /** Start again for another pipeline. */
  reset(pipeline: string): void {
    this.points = [];
    this.budget = null;
    this.pipeline = pipeline;
    $<HTMLElement>("#memory-section").hidden = false;
    this.draw(null);
  }

  /** A message of the feed: memory now is the resource manager's latest sample (operators'
   * state and queued bytes) when the pipeline has a budget, else the graph's memory. */
  push(feed: Feed): void {
    if (feed.pipeline !== this.pipeline) return;
    const b = feed.budget;
    this.budget = b?.memory_budget ?? null;
    const memory = b?.sampled_bytes ?? feed.memory;
    this.points.push({ at: Date.now(), memory, estimated: b?.estimated_bytes ?? null });
    if (this.points.length > KEEP) this.points.shift();
    this.draw(feed);
  }

  private draw(feed: Feed | null): void {
    const chart = $<SVGSVGElement>("#memory-chart");
    chart.setAttribute("viewBox", `0 0 ${W} ${H}`);
    chart.dataset.points = String(this.points.length);
    chart.replaceChildren();
    const pts = this.points;
    const top = Math.max(1, this.budget ?? 0, ...pts.map((p) => Math.max(p.memory, p.estimated ?? 0))) * 1.1;
    const x0 = pts.length ? pts[0].at : 0;
    const span = Math.max(1, (pts.at(-1)?.at ?? 1) - x0);
    const x = (at: number) => PAD.left + ((at - x0) / span) * (W - PAD.left - PAD.right);
    const y = (v: number) => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);
    chart.append(svg("rect", { x: PAD.left, y: PAD.top, width: W - PAD.left - PAD.right, height: H - PAD.top - PAD.bottom, class: "plot" }));
    for (const v of [0, top / 2, top]) {
      const t = svg("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end", class: "axis" });
      t.textContent = bytes(v);
      chart.append(t);
    }
    const seconds = Math.round(span / 1000);
    const left = svg("text", { x: PAD.left, y: H - 6, class: "axis" });
    left.textContent = pts.length > 1 ? `${seconds} s ago` : "";
    const right = svg("text", { x: W - PAD.right, y: H - 6, "text-anchor": "end", class: "axis" });
    right.textContent = "now";
    chart.append(left, right);
    if (this.budget !== null) {
      chart.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(this.budget), y2: y(this.budget), class: "budget" }));
      const label = svg("text", { x: W - PAD.right - 4, y: y(this.budget) - 4, "text-anchor": "end", class: "budget-label" });
      label.textContent = `budget ${bytes(this.budget)}`;
      chart.append(label);
    }
    const line = (values: [number, number][], cls: string) => {
      if (!values.length) return;
      const d = values.map(([at, v], i) => `${i ? "L" : "M"}${x(at).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
      chart.append(svg("path", { d, class: cls }));
    };
    line(pts.filter((p) => p.estimated !== null).map((p) => [p.at, p.estimated as number]), "estimated");
    line(pts.map((p) => [p.at, p.memory]), "memory");
    const last = pts.at(-1);
    if (last) chart.append(svg("circle", { cx: x(last.at), cy: y(last.memory), r: 3, class: "memory-dot" }));
    this.numbers(feed);
  }

  private numbers(feed: Feed | null): void {
    const out = $<HTMLElement>("#memory-numbers");
    const b = feed?.budget;
    const last = this.points.at(-1);
    if (!feed || !last) {
      out.textContent = "waiting for the first statistics…";
      return;
    }
    const parts = [`memory now ${bytes(last.memory)}`];
    if (b && b.memory_budget !== null) {
      parts.push(`budget ${bytes(b.memory_budget)} (reserve ${bytes(b.reserve)})`);
      parts.push(`estimated ${bytes(b.estimated_bytes)}`, `peak ${bytes(b.peak_bytes)}`);
      parts.push(`${b.samples_over_budget ?? 0} of ${b.samples ?? 0} samples over the budget`);
      const shed = Object.entries(b.shedding ?? {});
      if (shed.length) parts.push("shedding " + shed.map(([k, v]) => `${k.split("/").pop()} ${(100 * v).toFixed(1)}%`).join(", "));
    } else {
      parts.push("no budget");
    }
    out.textContent = parts.join(" · ");
    $<SVGSVGElement>("#memory-chart").setAttribute("aria-label", `Memory of ${this.pipeline} over time: ${parts.join(", ")}`);
  }
}
