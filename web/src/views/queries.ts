// The queries view: a pipeline's queries, each weight editable with the API token.
import { Refused, setWeight, type Pipeline } from "../api";
import { $, el } from "../dom";

/** Draw the rows once per set of queries (an edit in progress survives the refreshes), then
 * update their values. `changed` runs after a change the API accepted. */
export function renderQueries(p: Pipeline | undefined, token: () => string, changed: () => void): void {
  const body = $<HTMLTableSectionElement>("#queries tbody");
  const queries = p ? Object.values(p.queries) : [];
  const shape = `${p?.name}:${queries.map((q) => q.name).join(",")}`;
  if (body.dataset.shape !== shape) {
    body.dataset.shape = shape;
    body.replaceChildren(...queries.map((q) => queryRow(q.pipeline, q.name, token, changed)));
  }
  for (const q of queries) {
    const row = body.querySelector(`tr[data-query="${CSS.escape(q.name)}"]`);
    if (!row) continue;
    row.querySelector(".active")!.textContent = q.active ? "yes" : "no";
    row.querySelector(".results")!.textContent = q.results === undefined ? "-" : String(q.results);
    row.querySelector(".weight")!.textContent = String(q.weight);
  }
}

function queryRow(pipeline: string, name: string, token: () => string, changed: () => void): HTMLTableRowElement {
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
      const q = await setWeight(pipeline, name, Number(input.value), token());
      message.textContent = `The weight of ${name} is now ${q.weight}.`;
      message.className = "ok";
      changed();
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
