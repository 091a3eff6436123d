// The web view: deployed pipelines, a pipeline's live plan, its queries' weights.
import "./style.css";
import { events, pipelines, Refused, setWeight, type Feed, type Pipeline } from "./api";
import { bytes, PlanGraph } from "./graph";

const $ = <T extends Element>(sel: string) => document.querySelector(sel) as T;
const tokenInput = $<HTMLInputElement>("#token");
const graph = new PlanGraph($<SVGSVGElement>("#graph"));
let selected: string | null = decodeURIComponent(location.hash.replace(/^#\/?pipelines\//, "")) || null;
let feed: EventSource | null = null;
let known: Pipeline[] = [];

tokenInput.value = sessionStorage.getItem("cq-token") ?? "";
tokenInput.addEventListener("change", () => sessionStorage.setItem("cq-token", tokenInput.value));

function el<K extends keyof HTMLElementTagNameMap>(tag: K, props: Partial<HTMLElementTagNameMap[K]> = {}, ...kids: (Node | string)[]) {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...kids);
  return e;
}

function status(p: Pipeline): string {
  if (p.rejected) return "rejected";
  const qs = Object.values(p.queries);
  if (qs.some((q) => q.running)) return "running";
  return p.last_deployment?.status ?? "not running";
}

function renderPipelines(list: Pipeline[]): void {
  const body = $<HTMLTableSectionElement>("#pipelines tbody");
  body.replaceChildren(
    ...list.map((p) => {
      const open = el("button", { type: "button", className: "link", textContent: p.name });
      open.setAttribute("aria-pressed", String(p.name === selected));
      open.addEventListener("click", () => select(p.name));
      const errors = (p.rejected?.errors ?? []).map((e) => el("li", { textContent: typeof e === "string" ? e : JSON.stringify(e) }));
      const row = el(
        "tr",
        { className: p.rejected ? "rejected" : "" },
        el("th", { scope: "row" }, open),
        el("td", { className: `status ${status(p)}`, textContent: status(p) }),
        el("td", { textContent: String(Object.keys(p.queries).length) }),
        el("td", {}, errors.length ? el("ul", { className: "errors" }, ...errors) : "-"),
      );
      row.dataset.pipeline = p.name;
      return row;
    }),
  );
}

function renderQueries(): void {
  const p = known.find((x) => x.name === selected);
  const body = $<HTMLTableSectionElement>("#queries tbody");
  const queries = p ? Object.values(p.queries) : [];
  const shape = queries.map((q) => q.name).join(",");
  if (body.dataset.shape !== `${selected}:${shape}`) {
    body.dataset.shape = `${selected}:${shape}`;
    body.replaceChildren(...queries.map((q) => queryRow(q.pipeline, q.name)));
  }
  for (const q of queries) {
    const row = body.querySelector(`tr[data-query="${CSS.escape(q.name)}"]`);
    if (!row) continue;
    row.querySelector(".active")!.textContent = q.active ? "yes" : "no";
    row.querySelector(".results")!.textContent = q.results === undefined ? "-" : String(q.results);
    row.querySelector(".weight")!.textContent = String(q.weight);
  }
}

function queryRow(pipeline: string, name: string): HTMLTableRowElement {
  const id = `weight-${name}`;
  const input = document.createElement("input");
  Object.assign(input, { id, type: "number", min: "0", step: "any", required: true, className: "weight-input" });
  const form = el(
    "form",
    { className: "weight-form" },
    el("label", { htmlFor: id, className: "visually-hidden", textContent: `New weight of ${name}` }),
    input,
    el("button", { type: "submit", textContent: "Set weight" }),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const message = $<HTMLParagraphElement>("#control-message");
    message.className = "";
    try {
      const q = await setWeight(pipeline, name, Number(input.value), tokenInput.value);
      message.textContent = `The weight of ${name} is now ${q.weight}.`;
      message.className = "ok";
      refresh();
    } catch (e) {
      const why = e instanceof Refused ? `refused (${e.status}): ${e.message}` : `failed: ${e}`;
      message.textContent = `Setting the weight of ${name} was ${why}`;
      message.className = "error";
    }
  });
  const row = el(
    "tr",
    {},
    el("th", { scope: "row", textContent: name }),
    el("td", { className: "active" }),
    el("td", { className: "results" }),
    el("td", {}, el("span", { className: "weight" }), form),
  );
  row.dataset.query = name;
  return row;
}

function select(name: string): void {
  selected = name;
  history.replaceState(null, "", `#/pipelines/${encodeURIComponent(name)}`);
  feed?.close();
  $<HTMLElement>("#plan-section").hidden = false;
  $<HTMLElement>("#plan-title").textContent = `Plan of ${name}`;
  $<HTMLElement>("#plan-summary").textContent = "waiting for the first statistics…";
  feed = events(name);
  feed.onmessage = (m) => {
    const data = JSON.parse(m.data) as Feed;
    graph.update(data);
    const budget = data.budget?.memory_budget;
    const operators = data.nodes.filter((n) => n.kind === "operator" || n.kind === "source").length;
    $<HTMLElement>("#plan-summary").textContent =
      `${operators} operators, ${data.nodes.filter((n) => n.kind === "sink").length} sinks · memory ${bytes(data.memory)}` +
      (budget ? ` of a ${bytes(budget)} budget` : " (no budget)") + ` · updated ${new Date().toLocaleTimeString()}`;
  };
  feed.onerror = () => {
    if (feed?.readyState === EventSource.CLOSED) {
      $<HTMLElement>("#plan-summary").textContent = `No live plan: ${name} does not run.`;
    } // else the browser reconnects by itself
  };
  feed.addEventListener("end", () => {
    $<HTMLElement>("#plan-summary").textContent = "the pipeline stopped";
    feed?.close();
  });
  renderPipelines(known);
  renderQueries();
}

async function refresh(): Promise<void> {
  const error = $<HTMLParagraphElement>("#pipelines-error");
  try {
    known = await pipelines();
    error.hidden = true;
  } catch (e) {
    error.textContent = `The worker did not answer: ${e}`;
    error.hidden = false;
    return;
  }
  renderPipelines(known);
  renderQueries();
}

refresh().then(() => {
  if (selected && known.some((p) => p.name === selected && !p.rejected)) select(selected);
});
setInterval(refresh, 2000);
