// HTTP helpers: Bearer token from sessionStorage, typed outcomes for the views.
const TOKEN_KEY = 'queen.token';

export class NotAvailable extends Error {}
export class Unauthorized extends Error {}

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
}

// Calls the broker. 404 → NotAvailable (endpoint missing on this broker, or the
// object is gone: the text says which), 401/403 → Unauthorized, other non-2xx → Error.
export async function api(method, path, body) {
  const headers = { 'Accept': 'application/json' };
  const t = token();
  if (t) headers['Authorization'] = 'Bearer ' + t;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  const text = await res.text();
  if (text) { try { data = JSON.parse(text); } catch { data = text; } }
  if (res.status === 404) {
    const code = data && data.code;
    throw new NotAvailable(code === 'no_such_route' ? 'not available on this broker' : ((data && data.error) || 'not found'));
  }
  if (res.status === 401 || res.status === 403) throw new Unauthorized((data && data.error) || 'unauthorized');
  if (!res.ok) throw new Error((data && data.error) || `HTTP ${res.status}`);
  return data;
}

export const get = (p) => api('GET', p);
export const post = (p, b) => api('POST', p, b);
export const del = (p) => api('DELETE', p);
export const enc = encodeURIComponent;
