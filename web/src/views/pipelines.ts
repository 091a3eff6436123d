// The pipelines view: every deployed pipeline, its status and a rejected file's errors as given.
import type { Pipeline } from "../api";
import { $, el } from "../dom";

function status(p: Pipeline): string {
  if (p.rejected) return "rejected";
  if (Object.values(p.queries).some((q) => q.running)) return "running";
  return p.last_deployment?.status ?? "not running";
}

export function renderPipelines(list: Pipeline[], selected: string | null, open: (name: string) => void): void {
  $<HTMLTableSectionElement>("#pipelines tbody").replaceChildren(
    ...list.map((p) => {
      const button = el("button", { type: "button", className: "link", textContent: p.name });
      button.setAttribute("aria-pressed", String(p.name === selected));
      button.addEventListener("click", () => open(p.name));
      const errors = (p.rejected?.errors ?? []).map((e) =>
        el("li", { textContent: typeof e === "string" ? e : JSON.stringify(e) }),
      );
      const row = el(
        "tr",
        { className: p.rejected ? "rejected" : "" },
        el("th", { scope: "row" }, button),
        el("td", { className: `status ${status(p)}`, textContent: status(p) }),
        el("td", { textContent: String(Object.keys(p.queries).length) }),
        el("td", {}, errors.length ? el("ul", { className: "errors" }, ...errors) : "-"),
      );
      row.dataset.pipeline = p.name;
      return row;
    }),
  );
}
