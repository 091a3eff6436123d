// The queries view: a pipeline's control tables — weight, active flag, memory budget and QoS
// ranges — each changed with the API token; a refused change shows the API's message.
import { Refused, setControl, type Control, type Pipeline, type Query } from "../api";
import { $, el } from "../dom";
import { bytes } from "../graph";

const UNITS: Record<string, number> = { "": 1, B: 1, KIB: 1024, MIB: 1024 ** 2, GIB: 1024 ** 3 };

/** "64 MiB", "1048576": bytes; anything else goes to the API as written (it says why not). */
export function parseBytes(text: string): number | string {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB)?\s*$/i.exec(text);
  return m ? Math.round(Number(m[1]) * UNITS[(m[2] ?? "").toUpperCase()]) : text;
}

/** "window=60..600, granularity=1..100" (or JSON): {setting: [min, max]}. */
export function parseQos(text: string): Record<string, unknown> | null {
  const t = text.trim();
  if (t.startsWith("{")) {
    try {
      return JSON.parse(t) as Record<string, unknown>;
    } catch {
      return null;
    }
  }
  const out: Record<string, unknown> = {};
  for (const part of t.split(/[;,]/).map((s) => s.trim()).filter(Boolean)) {
    const m = /^([\w:.-]+)\s*=\s*(-?[\d.e+]+)\s*\.\.\s*(-?[\d.e+]+)$/.exec(part);
    if (!m) return null;
    out[m[1]] = [Number(m[2]), Number(m[3])];
  }
  return Object.keys(out).length ? out : null;
}

export function qosText(qos: Record<string, number[]> | null | undefined): string {
  const items = Object.entries(qos ?? {});
  return items.length ? items.map(([k, [lo, hi]]) => `${k}=${lo}..${hi}`).join(", ") : "-";
}

interface Knob {
  field: keyof Control;
  what: string; // "weight", "memory budget", "QoS ranges"
  button: string;
  hint: string;
  parse: (text: string) => unknown;
}

const KNOBS: Knob[] = [
  { field: "weight", what: "weight", button: "Set weight", hint: "a positive number", parse: (t) => (t.trim() === "" || isNaN(Number(t)) ? t : Number(t)) },
  { field: "memory_budget", what: "memory budget", button: "Set budget", hint: "bytes, or e.g. 64 MiB", parse: parseBytes },
  { field: "qos", what: "QoS ranges", button: "Set QoS", hint: "e.g. window=60..600, granularity=1..100", parse: parseQos },
];

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
    if (row) update(row as HTMLTableRowElement, q);
  }
}

function update(row: HTMLTableRowElement, q: Query): void {
  row.querySelector(".active")!.textContent = q.active ? "yes" : "no";
  const toggle = row.querySelector<HTMLButtonElement>("button.toggle")!;
  toggle.textContent = q.active ? "Deactivate" : "Activate";
  toggle.setAttribute("aria-label", `${q.active ? "Deactivate" : "Activate"} ${q.name}`);
  toggle.dataset.active = String(q.active);
  row.querySelector(".state")!.textContent = q.running ? "running" : q.status ?? "-";
  row.querySelector(".state")!.setAttribute("title", q.error ?? "");
  row.querySelector(".results")!.textContent = q.results === undefined || q.results === null ? "-" : String(q.results);
  row.querySelector(".weight")!.textContent = String(q.weight);
  row.querySelector(".memory_budget")!.textContent = q.memory_budget === null ? "none" : bytes(q.memory_budget);
  row.querySelector(".qos")!.textContent = qosText(q.qos);
}

function say(text: string, ok: boolean): void {
  const message = $<HTMLParagraphElement>("#control-message");
  message.textContent = text;
  message.className = ok ? "ok" : "error";
}

async function send(pipeline: string, name: string, fields: Control, what: string, token: string): Promise<Query | null> {
  try {
    return await setControl(pipeline, name, fields, token);
  } catch (e) {
    const why = e instanceof Refused ? `refused (${e.status}): ${e.message}` : `failed: ${e}`;
    say(`Setting the ${what} of ${name} was ${why}`, false);
    return null;
  }
}

function knobForm(pipeline: string, name: string, k: Knob, token: () => string, changed: () => void): HTMLFormElement {
  const id = `${k.field}-${name}`;
  const input = el("input", { id, type: "text", required: true, className: `knob-input ${k.field}-input`, placeholder: k.hint });
  input.setAttribute("autocomplete", "off");
  const form = el(
    "form",
    { className: "knob-form" },
    el("label", { htmlFor: id, className: "visually-hidden", textContent: `New ${k.what} of ${name}` }),
    input,
    el("button", { type: "submit", textContent: k.button }),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const value = k.parse(input.value);
    if (value === null) {
      say(`The ${k.what} of ${name} were not sent: write ${k.hint}.`, false);
      return;
    }
    const q = await send(pipeline, name, { [k.field]: value } as Control, k.what, token());
    if (!q) return;
    const now = k.field === "qos" ? qosText(q.qos) : k.field === "memory_budget" ? bytes(q.memory_budget) : String(q.weight);
    say(`The ${k.what} of ${name} ${k.field === "qos" ? "are" : "is"} now ${now}.`, true);
    changed();
  });
  return form;
}

function queryRow(pipeline: string, name: string, token: () => string, changed: () => void): HTMLTableRowElement {
  const toggle = el("button", { type: "button", className: "toggle" });
  toggle.addEventListener("click", async () => {
    const active = toggle.dataset.active !== "true";
    const q = await send(pipeline, name, { active }, "active flag", token());
    if (!q) return;
    say(`${name} is now ${q.active ? "active" : "inactive"}${q.running ? " and running" : ""}.`, true);
    changed();
  });
  const [weight, budget, qos] = KNOBS.map((k) => knobForm(pipeline, name, k, token, changed));
  const row = el(
    "tr",
    {},
    el("th", { scope: "row", textContent: name }),
    el("td", {}, el("span", { className: "state" })),
    el("td", {}, el("span", { className: "active" }), " ", toggle),
    el("td", { className: "results" }),
    el("td", {}, el("span", { className: "weight" }), weight),
    el("td", {}, el("span", { className: "memory_budget" }), budget),
    el("td", {}, el("span", { className: "qos" }), qos),
  );
  row.dataset.query = name;
  return row;
}
