// The worker's HTTP API, as the web view uses it (docs/service.md, HTTP API).

export interface Query {
  pipeline: string;
  name: string;
  weight: number;
  active: boolean;
  running?: boolean;
  results?: number;
}

export interface Pipeline {
  name: string;
  file?: string;
  queries: Record<string, Query>;
  rejected?: { file: string; errors: unknown[] };
  last_deployment?: { status?: string } | null;
  budget?: { memory_budget: number | null; measured_bytes?: number | null } | null;
}

export interface Stats {
  rows_in?: number;
  rows_out?: number;
  rows_per_s?: number | null;
  selectivity?: number | null;
  queued_rows?: number;
  memory?: number;
  window?: string | null;
  filter_order?: string | null;
  late?: number;
  dead_lettered?: number;
}

export interface GraphNode {
  id: string;
  kind: "source" | "operator" | "queue" | "sink";
  label: string;
  synopsis: string;
  queries: string[];
  stats: Stats;
}

export interface Feed {
  pipeline: string;
  nodes: GraphNode[];
  edges: { from: string; to: string }[];
  memory: number;
  budget: { memory_budget: number | null } | null;
}

/** An answer that is not 2xx: the status and the API's message. */
export class Refused extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function answer<T>(r: Response): Promise<T> {
  const body = await r.json().catch(() => null);
  if (!r.ok) {
    const detail = body && (body as { detail?: unknown }).detail;
    const text = typeof detail === "string" ? detail : JSON.stringify(detail ?? body ?? r.statusText);
    throw new Refused(r.status, text);
  }
  return body as T;
}

const base = new URL("..", document.baseURI); // the UI lives at /ui/: the API is beside it

export function url(path: string): string {
  return new URL(path.replace(/^\//, ""), base).toString();
}

export async function pipelines(): Promise<Pipeline[]> {
  const r = await fetch(url("/pipelines"));
  return (await answer<{ pipelines: Pipeline[] }>(r)).pipelines;
}

export async function setWeight(pipeline: string, query: string, weight: number, token: string): Promise<Query> {
  const r = await fetch(url(`/queries/${encodeURIComponent(pipeline)}/${encodeURIComponent(query)}/control`), {
    method: "PATCH",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
    body: JSON.stringify({ weight }),
  });
  return answer<Query>(r);
}

export function events(pipeline: string): EventSource {
  return new EventSource(url(`/pipelines/${encodeURIComponent(pipeline)}/events`));
}
