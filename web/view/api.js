// The view's server: every answer is JSON from /api/ (docs/view.md lists the keys). Each call's
// round trip, and the server's own share of it (Server-Timing), is kept in window.fragscopeTimings,
// where the browser tests read them.

export const timings = [];
window.fragscopeTimings = timings;

/** GETs `path` with `params`; resolves to {status, body}. 202 (pending) is an answer, not an error. */
export async function getJson(path, params = {}, signal = undefined) {
  const query = new URLSearchParams(params).toString();
  const start = performance.now();
  const response = await fetch(query ? `${path}?${query}` : path, { signal });
  const body = await response.json();
  const serverMs = Number(/dur=([0-9.]+)/.exec(response.headers.get('Server-Timing') || '')?.[1]);
  timings.push({ path, ms: performance.now() - start, serverMs, status: response.status });
  if (!response.ok && response.status !== 202) throw new Error(`${path}: ${body.error || response.statusText}`);
  return { status: response.status, body };
}
