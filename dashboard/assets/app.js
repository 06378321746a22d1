// Dashboard shell: hash router, token bar, and the /metrics sampler that feeds
// the overview chart (push/pop/ack per second from successive totals).
import { get, setToken, token, Unauthorized } from './api.js';
import { views } from './views.js';

const POLL_MS = 2000;
export const history = { points: [], listeners: new Set(), last: null, metrics: null };

async function sample() {
  try {
    const m = await get('/metrics');
    const now = Date.now();
    const totals = [m.push?.messages ?? 0, m.pop?.messages ?? 0, m.ack?.messages ?? 0];
    if (history.last) {
      const dt = (now - history.last.t) / 1000;
      const rates = totals.map((v, i) => Math.max(0, (v - history.last.totals[i]) / dt));
      history.points.push({ t: now, values: rates });
      if (history.points.length > 90) history.points.shift();
    }
    history.last = { t: now, totals };
    history.metrics = m;
    for (const f of history.listeners) f(m);
    document.getElementById('status').textContent = 'live · ' + new Date(now).toLocaleTimeString();
  } catch (e) {
    document.getElementById('status').textContent = 'metrics unavailable: ' + e.message;
  }
}

function route() {
  const hash = location.hash.replace(/^#\/?/, '');
  const [name, ...rest] = hash.split('/').map(decodeURIComponent);
  const view = views[name || 'overview'] || views.overview;
  const key = views[name] ? name : 'overview';
  document.querySelectorAll('#nav a').forEach(a => a.classList.toggle('active', a.dataset.view === key));
  history.listeners.clear();
  const el = document.getElementById('view');
  el.innerHTML = '<p class="muted">Loading…</p>';
  Promise.resolve(view(el, rest.filter(Boolean), { history })).catch(e => {
    if (e instanceof Unauthorized) {
      showAuth(true);
      el.innerHTML = '<div class="err">This view needs a token with the right role: enter it above.</div>';
    } else {
      el.innerHTML = '';
      const d = document.createElement('div'); d.className = 'err'; d.textContent = e.message; el.append(d);
    }
  });
}

function showAuth(force) {
  const form = document.getElementById('auth');
  // Shown when the broker asked for a token (JWT on) or none is kept yet and one was needed.
  form.hidden = !force;
  document.getElementById('signout').hidden = !token();
}

document.getElementById('auth').addEventListener('submit', ev => {
  ev.preventDefault();
  setToken(document.getElementById('token').value.trim());
  document.getElementById('token').value = '';
  showAuth(false);
  route();
});
document.getElementById('signout').addEventListener('click', () => { setToken(''); showAuth(true); route(); });

// SPA paths (e.g. /queues/q1 loaded directly) map onto the hash router.
if (location.pathname !== '/' && !location.hash) {
  window.history.replaceState(null, '', '/#' + location.pathname);
}
window.addEventListener('hashchange', route);
// Probe once whether the API wants a token (401 on a READ_ONLY route).
get('/api/v1/resources/overview').then(() => showAuth(false), e => showAuth(e instanceof Unauthorized));
sample();
setInterval(sample, POLL_MS);
route();
