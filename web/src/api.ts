// The worker's HTTP API, as the web view uses it (docs/service.md, HTTP API).

export interface Query {
  pipeline: string;
  name: string;
  weight: number;
  active: boolean;
  memory_budget: number | null;
  qos: Record<string, number[]> | null;
  status?: string;
  error?: string | null;
  running?: boolean;
  results?: number;
}

/** A query's control table as the API changes it (PATCH: the fields given). */
export interface Control {
  weight?: number;
  active?: boolean;
  memory_budget?: number;
  qos?: Record<string, number[]>;
}

/** The resource manager's view of a deployment with a budget (service/budgets.py). */
export interface BudgetState {
  memory_budget: number | null;
  reserve?: number;
  estimated_bytes?: number;
  measured_bytes?: number;
  sampled_bytes?: number;
  peak_bytes?: number;
  samples?: number;
  samples_over_budget?: number;
  shedding?: Record<string, number>;
}

/** An entry of the adjustments log (kind window, granularity, shed, scheduler, rejected). */
export interface Adjustment {
  id: number;
  pipeline: string;
  query: string | null;
  kind: string;
  detail: Record<string, unknown>;
  at: string;
}

/** An entry of the deployment log (a rejected file's error: FILE:LINE:COL: message). */
export interface Deployment {
  id: number;
  pipeline: string;
  spec_hash: string;
  revision: string | null;
  status: string;
  error: string | null;
  created_at: string;
}

export interface Pipeline {
  name: string;
  file?: string;
  queries: Record<string, Query>;
  rejected?: { file: string; errors: unknown[] };
  last_deployment?: { status?: string } | null;
  budget?: BudgetState | null;
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
  probe_orders?: string | null;
  priority?: number | null;
  late?: number;
  dead_lettered?: number;
  dead_letter_samples?: string[];
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
  budget: BudgetState | null;
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

const q = encodeURIComponent;

export async function setControl(pipeline: string, query: string, fields: Control, token: string): Promise<Query> {
  const r = await fetch(url(`/queries/${q(pipeline)}/${q(query)}/control`), {
    method: "PATCH",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
    body: JSON.stringify(fields),
  });
  return answer<Query>(r);
}

export async function adjustments(pipeline: string): Promise<Adjustment[]> {
  return answer<Adjustment[]>(await fetch(url(`/pipelines/${q(pipeline)}/adjustments?limit=100`)));
}

export async function deployments(pipeline: string): Promise<Deployment[]> {
  return answer<Deployment[]>(await fetch(url(`/pipelines/${q(pipeline)}/deployments`)));
}

export function events(pipeline: string): EventSource {
  return new EventSource(url(`/pipelines/${q(pipeline)}/events`));
}

export function results(pipeline: string, query: string): EventSource {
  return new EventSource(url(`/queries/${q(pipeline)}/${q(query)}/results`));
}
