// A pipeline's logs from the catalog: the resource manager's adjustments and admission
// control's rejections as a timeline, and the deployment history (errors at FILE:LINE:COL).
import { adjustments, deployments, type Adjustment, type Deployment } from "../api";
import { $, el } from "../dom";

function when(iso: string): string {
  const d = new Date(iso.endsWith("Z") || /[+-]\d\d:\d\d$/.test(iso) ? iso : iso + "Z");
  return isNaN(d.getTime()) ? iso : d.toLocaleString("en-GB", { hour12: false });
}

/** What an entry changed, in words. */
export function changed(a: Adjustment): string {
  const d = a.detail;
  switch (a.kind) {
    case "window":
    case "granularity":
      return `${d.window}: ${d.old} → ${d.new}`; // the kind is beside it
    case "shed":
      return `sheds ${(100 * Number(d.fraction)).toFixed(1)}% of the input of ${(d.windows as string[] | undefined)?.join(", ") || "its windows"}`;
    case "rejected":
      return "by admission control";
    case "scheduler": {
      const name = (v: unknown) => (v as { scheduler?: string } | undefined)?.scheduler ?? "?";
      return `scheduler: ${name(d.from)} → ${name(d.to)}`;
    }
    default:
      return `${a.kind}: ${JSON.stringify(d)}`;
  }
}

function timelineItem(a: Adjustment): HTMLLIElement {
  const reason = typeof a.detail.reason === "string" ? a.detail.reason : "";
  const li = el(
    "li",
    { className: `entry ${a.kind}` },
    el("time", { dateTime: a.at, textContent: when(a.at) }),
    " ",
    el("strong", { textContent: a.query ?? a.pipeline }),
    " ",
    el("span", { className: "kind", textContent: a.kind }),
    " ",
    el("span", { className: "what", textContent: changed(a) }),
    ...(reason ? [el("div", { className: "why", textContent: `why: ${reason}` })] : []),
  );
  li.dataset.kind = a.kind;
  return li;
}

function deploymentRow(d: Deployment): HTMLTableRowElement {
  const row = el(
    "tr",
    {},
    el("td", {}, el("time", { dateTime: d.created_at, textContent: when(d.created_at) })),
    el("td", { className: `status ${d.status}`, textContent: d.status }),
    el("td", { className: "mono", textContent: d.spec_hash.slice(0, 12) + (d.revision ? ` @ ${d.revision.slice(0, 12)}` : "") }),
    el("td", {}, d.error ? el("pre", { className: "errors", textContent: d.error }) : "-"),
  );
  row.dataset.status = d.status;
  return row;
}

/** Fetch and draw both logs of `pipeline` (newest first). */
export async function renderHistory(pipeline: string): Promise<void> {
  const [adj, dep] = await Promise.allSettled([adjustments(pipeline), deployments(pipeline)]);
  const timeline = $<HTMLOListElement>("#timeline");
  const empty = $<HTMLParagraphElement>("#timeline-empty");
  if (adj.status === "fulfilled") {
    const items = adj.value.slice().reverse();
    timeline.replaceChildren(...items.map(timelineItem));
    timeline.dataset.count = String(items.length);
    empty.textContent = items.length ? "" : "No adjustments or rejections yet.";
  } else {
    empty.textContent = `The adjustments log could not be read: ${adj.reason}`;
  }
  const body = $<HTMLTableSectionElement>("#deployments tbody");
  if (dep.status === "fulfilled") {
    body.replaceChildren(...dep.value.slice().reverse().map(deploymentRow));
  } else {
    body.replaceChildren(el("tr", {}, el("td", { colSpan: 4, className: "error", textContent: `${dep.reason}` })));
  }
}
