// The web view: deployed pipelines, a pipeline's live plan, its queries' weights (views/).
import "./style.css";
import { pipelines, type Pipeline } from "./api";
import { $ } from "./dom";
import { renderPipelines } from "./views/pipelines";
import { PlanView } from "./views/plan";
import { renderQueries } from "./views/queries";

const tokenInput = $<HTMLInputElement>("#token");
tokenInput.value = sessionStorage.getItem("cq-token") ?? "";
tokenInput.addEventListener("change", () => sessionStorage.setItem("cq-token", tokenInput.value));

const plan = new PlanView();
let selected: string | null = decodeURIComponent(location.hash.replace(/^#\/?pipelines\//, "")) || null;
let known: Pipeline[] = [];

function render(): void {
  renderPipelines(known, selected, select);
  renderQueries(known.find((p) => p.name === selected), () => tokenInput.value, refresh);
}

function select(name: string): void {
  selected = name;
  history.replaceState(null, "", `#/pipelines/${encodeURIComponent(name)}`);
  plan.show(name);
  render();
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
}

refresh().then(() => {
  if (selected && known.some((p) => p.name === selected && !p.rejected)) select(selected);
});
setInterval(refresh, 2000);
