// The web view: deployed pipelines; a pipeline's live plan, its queries' control tables, its
// memory against its budget with the resource manager's timeline, its results and deployments
// (views/).
import "./style.css";
import { pipelines, type Pipeline } from "./api";
import { $ } from "./dom";
import { renderHistory } from "./views/history";
import { MemoryChart } from "./views/memory";
import { renderPipelines } from "./views/pipelines";
import { PlanView } from "./views/plan";
import { renderQueries } from "./views/queries";
import { renderBadInput, ResultsView } from "./views/results";

const tokenInput = $<HTMLInputElement>("#token");
tokenInput.value = sessionStorage.getItem("cq-token") ?? "";
tokenInput.addEventListener("change", () => sessionStorage.setItem("cq-token", tokenInput.value));

const memory = new MemoryChart();
const results = new ResultsView();
const plan = new PlanView((feed) => {
  memory.push(feed);
  renderBadInput(feed);
});
$<HTMLSelectElement>("#results-query").addEventListener("change", (e) => results.follow((e.target as HTMLSelectElement).value));
let selected: string | null = decodeURIComponent(location.hash.replace(/^#\/?pipelines\//, "")) || null;
let known: Pipeline[] = [];

function render(): void {
  renderPipelines(known, selected, select);
  const p = known.find((p) => p.name === selected);
  renderQueries(p, () => tokenInput.value, refresh);
  results.offer(p);
}

function select(name: string): void {
  selected = name;
  history.replaceState(null, "", `#/pipelines/${encodeURIComponent(name)}`);
  memory.reset(name);
  $<HTMLElement>("#history-section").hidden = false;
  $<HTMLTableSectionElement>("#bad-input tbody").replaceChildren();
  plan.show(name);
  render();
  void renderHistory(name);
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
  render();
  if (selected) void renderHistory(selected);
}

refresh().then(() => {
  if (selected && known.some((p) => p.name === selected && !p.rejected)) select(selected);
});
setInterval(refresh, 2000);
