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
