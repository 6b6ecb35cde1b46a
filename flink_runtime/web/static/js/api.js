// Every REST call of the page goes through here. It adds the bearer token when the
// user gave one (the URL fragment #token=... or the login prompt; kept in this tab's
// sessionStorage) and turns Flink's {"errors": [...]} answers into ApiError.

const TOKEN_KEY = "flink-runtime.rest-token";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// "#token=abc" or "#token=abc&/jobs/<id>": the fragment never reaches the server. The
// token leaves the address bar (and this history entry) at once.
export function takeTokenFromFragment() {
  const match = /^#token=([^&]*)(?:&(.*))?$/.exec(location.hash);
  if (!match) return;
  setToken(decodeURIComponent(match[1]));
  const route = match[2] && match[2].startsWith("/") ? match[2] : "/overview";
  history.replaceState(null, "", `${location.pathname}${location.search}#${route}`);
}

async function request(method, path, { body, headers, accept } = {}) {
  const sent = { ...(headers || {}), Accept: accept || "application/json" };
  const bearer = token();
  if (bearer) sent.Authorization = `Bearer ${bearer}`;
  // The guard's rule for state-changing requests (a page of another site cannot send it).
  if (method !== "GET") sent["Content-Type"] = "application/json";
  let response;
  try {
    // Relative to the page (served at "/"), so a path prefix in front of it still works.
    response = await fetch(path, {
      method,
      headers: sent,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (error) {
    throw new ApiError(0, `The JobManager is unreachable (${error.message}).`);
  }
  if (!response.ok) {
    let message = `${method} /${path} answered ${response.status}`;
    try {
      const answer = await response.json();
      if (Array.isArray(answer.errors) && answer.errors.length) message = answer.errors.join("; ");
    } catch {
      // not JSON: keep the status line
    }
    throw new ApiError(response.status, message);
  }
  return response;
}

export async function get(path) {
  return (await request("GET", path)).json();
}

// For endpoints a JobManager may not have (yet): null instead of a 404 or 405.
export async function getOptional(path) {
  try {
    return await get(path);
  } catch (error) {
    if (error.status === 404 || error.status === 405 || error.status === 501) return null;
    throw error;
  }
}

export async function text(path, headers) {
  const response = await request("GET", path, { headers, accept: "text/plain" });
  return response.text();
}

export async function send(method, path, body) {
  const response = await request(method, path, { body });
  const content = await response.text();
  return content ? JSON.parse(content) : {};
}

// Flink's metric endpoints answer [{id, value}] (values as text): as {id: number}.
export function metricValues(list) {
  const values = {};
  for (const item of list || []) values[item.id] = Number(item.value);
  return values;
}
