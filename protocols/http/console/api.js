// The JSON API under /api/ (docs/observability.md): one GET, errors as exceptions naming why.

export async function get(path, query) {
  let url = "/api/" + path.map(encodeURIComponent).join("/");
  if (query) url += "?" + new URLSearchParams(query).toString();
  const answer = await fetch(url, { headers: { accept: "application/json" }, credentials: "same-origin" });
  let body = null;
  try {
    body = await answer.json();
  } catch {
    throw new Error(`${url}: HTTP ${answer.status}`);
  }
  if (!answer.ok) {
    const error = new Error(body && body.error ? body.error : `${url}: HTTP ${answer.status}`);
    error.status = answer.status;
    throw error;
  }
  return body;
}

/** An action: POST a JSON object; the answer's JSON, or an exception naming why not. */
export async function post(path, body) {
  const url = "/api/" + path.map(encodeURIComponent).join("/");
  const answer = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(body),
  });
  let reply = null;
  try {
    reply = await answer.json();
  } catch {
    throw new Error(`${url}: HTTP ${answer.status} ${await answer.text().catch(() => "")}`.trim());
  }
  if (!answer.ok) throw new Error(reply && reply.error ? reply.error : `${url}: HTTP ${answer.status}`);
  return reply;
}
