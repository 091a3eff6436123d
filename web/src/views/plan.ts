// The plan view: a pipeline's running plan as a graph, live from its event stream.
import { events, type Feed } from "../api";
import { $ } from "../dom";
import { bytes, PlanGraph } from "../graph";

export class PlanView {
  private feed: EventSource | null = null;
  private readonly graph = new PlanGraph($<SVGSVGElement>("#graph"));

  /** `listen` hears every message of the feed (the memory chart, the input counts). */
  constructor(private readonly listen: (feed: Feed) => void = () => {}) {}

  show(name: string): void {
    this.feed?.close();
    const summary = $<HTMLElement>("#plan-summary");
    $<HTMLElement>("#plan-section").hidden = false;
    $<HTMLElement>("#plan-title").textContent = `Plan of ${name}`;
    summary.textContent = "waiting for the first statistics…";
    const feed = (this.feed = events(name));
    feed.onmessage = (m) => {
      const data = JSON.parse(m.data) as Feed;
      this.graph.update(data);
      this.listen(data);
      const budget = data.budget?.memory_budget;
      const operators = data.nodes.filter((n) => n.kind === "operator" || n.kind === "source").length;
      const sinks = data.nodes.filter((n) => n.kind === "sink").length;
      summary.textContent =
        `${operators} operators, ${sinks} sinks · memory ${bytes(data.memory)}` +
        (budget ? ` of a ${bytes(budget)} budget` : " (no budget)") +
        ` · updated ${new Date().toLocaleTimeString()}`;
    };
    feed.onerror = () => {
      if (feed.readyState === EventSource.CLOSED) {
        summary.textContent = `No live plan: ${name} does not run.`;
      } // else the browser reconnects by itself
    };
    feed.addEventListener("end", () => {
      summary.textContent = "the pipeline stopped";
      feed.close();
    });
  }
}
