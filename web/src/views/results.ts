// A query's last results as they arrive (GET /queries/{pipeline}/{query}/results, server-sent
// events), and the late and dead-lettered counts of the pipeline's sources with the newest
// dead-letter entries, from the live feed.
import { results, type Feed, type Pipeline } from "../api";
import { $, el } from "../dom";

const KEEP = 20; // the newest results shown

export class ResultsView {
  private feed: EventSource | null = null;
  private pipeline = "";
  private received = 0;

  /** Offer the queries of `p` in the picker (kept while they are the same). */
  offer(p: Pipeline | undefined): void {
    const pick = $<HTMLSelectElement>("#results-query");
    const names = p ? Object.keys(p.queries) : [];
    const shape = `${p?.name}:${names.join(",")}`;
    if (pick.dataset.shape === shape) return;
    pick.dataset.shape = shape;
    const chosen = pick.value;
    pick.replaceChildren(el("option", { value: "", textContent: "(none)" }), ...names.map((n) => el("option", { value: n, textContent: n })));
    if (p?.name === this.pipeline && names.includes(chosen)) pick.value = chosen;
    else this.stop();
    this.pipeline = p?.name ?? "";
  }

  /** Follow `query`'s results (empty: none). */
  follow(query: string): void {
    this.stop();
    const list = $<HTMLOListElement>("#results-list");
    const status = $<HTMLParagraphElement>("#results-status");
    if (!query) return;
    const feed = (this.feed = results(this.pipeline, query));
    status.textContent = `waiting for results of ${query}…`;
    feed.onmessage = (m) => {
      this.received++;
      list.prepend(el("li", { textContent: m.data }));
      while (list.children.length > KEEP) list.lastElementChild!.remove();
      list.dataset.received = String(this.received);
      status.textContent = `${this.received} results of ${query} received since opened (the newest ${Math.min(KEEP, this.received)} shown, newest first)`;
    };
    const ended = (why: string) => () => {
      status.textContent = why;
      feed.close();
    };
    feed.addEventListener("end", ended(`${query} stopped.`));
    feed.addEventListener("error", (e) => {
      if ((e as MessageEvent).data) ended(`The results stream ended: ${(e as MessageEvent).data}`)();
      else if (feed.readyState === EventSource.CLOSED) status.textContent = `No results: ${query} does not run.`;
    });
  }

  private stop(): void {
    this.feed?.close();
    this.feed = null;
    this.received = 0;
    $<HTMLOListElement>("#results-list").replaceChildren();
    $<HTMLOListElement>("#results-list").dataset.received = "0";
    $<HTMLParagraphElement>("#results-status").textContent = "";
  }
}

function samples(lines: string[]): Node {
  if (!lines.length) return document.createTextNode("-");
  return el("ul", { className: "samples mono" }, ...lines.slice().reverse().map((l) => el("li", { textContent: l })));
}

/** Late and dead-lettered rows per source, from a message of the live feed. */
export function renderBadInput(feed: Feed): void {
  const body = $<HTMLTableSectionElement>("#bad-input tbody");
  body.replaceChildren(
    ...feed.nodes
      .filter((n) => n.kind === "source")
      .map((n) => {
        const row = el(
          "tr",
          {},
          el("th", { scope: "row", textContent: n.label }),
          el("td", { className: "late", textContent: String(n.stats.late ?? 0) }),
          el("td", { className: "dead", textContent: String(n.stats.dead_lettered ?? 0) }),
          el("td", {}, samples(n.stats.dead_letter_samples ?? [])),
        );
        row.dataset.node = n.id;
        return row;
      }),
  );
}
