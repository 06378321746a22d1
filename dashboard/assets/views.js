// The dashboard views. Each view is `async (el, args, ctx)`; endpoints that answer
// 404 (not built on this broker yet) degrade to a "not available" line.
import { get, post, del, enc, NotAvailable } from './api.js';
import { LineChart, fmt } from './chart.js';

// DOM builder: h('td', {class: 'num'}, text or nodes…). Text is never parsed as HTML.
function h(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    // Through the CSSOM: the content policy (no 'unsafe-inline') blocks style attributes.
    else if (k === 'style') e.style.cssText = v;
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}
const card = (k, v, id) => h('div', { class: 'card' }, h('div', { class: 'k' }, k), h('div', { class: 'v', id }, v));
const na = (what, e) => h('div', { class: 'na' }, `${what}: ${e.message}.`);
const table = (cols, rows) => h('table', {},
  h('thead', {}, h('tr', {}, cols.map(c => h('th', { class: c.num ? 'num' : null }, c.t)))),
  h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: cols.length, class: 'muted' }, 'Nothing here.'))));
const td = (v, num) => h('td', { class: num ? 'num' : null }, v ?? '—');
const bytes = v => v >= 1 << 30 ? (v / (1 << 30)).toFixed(2) + ' GiB' : (v / (1 << 20)).toFixed(1) + ' MiB';
const dur = s => s >= 86400 ? Math.floor(s / 86400) + 'd ' + Math.floor(s % 86400 / 3600) + 'h'
  : s >= 3600 ? Math.floor(s / 3600) + 'h ' + Math.floor(s % 3600 / 60) + 'm' : Math.floor(s / 60) + 'm ' + (s % 60) + 's';

// Runs `load` and puts its node (or a "not available" line) into `box`.
async function section(box, what, load) {
  try { box.replaceChildren(await load()); }
  catch (e) { if (e instanceof NotAvailable) box.replaceChildren(na(what, e)); else throw e; }
}

async function overview(el, _args, { history }) {
  const chartCanvas = h('canvas', { class: 'chart', id: 'rates' });
  const cards = h('div', { class: 'cards' });
  const catalogue = h('div');
  el.replaceChildren(h('h1', {}, 'Overview'), cards,
    h('div', { class: 'panel' },
      h('div', { class: 'legend' },
        h('span', {}, h('i', { style: 'background:var(--push)' }), 'push msg/s'),
        h('span', {}, h('i', { style: 'background:var(--pop)' }), 'pop msg/s'),
        h('span', {}, h('i', { style: 'background:var(--ack)' }), 'ack msg/s')),
      chartCanvas),
    h('h2', {}, 'Catalogue'), catalogue);
  const chart = new LineChart(chartCanvas, [
    { name: 'push', color: '#2a7de1' }, { name: 'pop', color: '#1c9c6d' }, { name: 'ack', color: '#e0831f' }]);
  const render = m => {
    if (!m) return;
    const last = history.points[history.points.length - 1]?.values || [0, 0, 0];
    cards.replaceChildren(
      card('Uptime', dur(m.uptime)), card('Requests', fmt(m.requests.total)),
      card('Pushed', fmt(m.push?.messages ?? 0)), card('Popped', fmt(m.pop?.messages ?? 0)),
      card('Acked', fmt(m.ack?.messages ?? 0)), card('Push/s', fmt(last[0])),
      card('Parked consumers', m.parkedConsumers ?? 0), card('DB pool idle', `${m.database.idleConnections}/${m.database.poolSize}`),
      card('DB jobs waiting', m.database.waitingRequests), card('Memory (RSS)', bytes(m.memory.rss)),
      card('Shards', (m.shards || []).length));
    chart.points = history.points.slice();
    chart.draw();
  };
  render(history.metrics);
  history.listeners.add(render);
  await section(catalogue, 'Catalogue overview', async () => {
    const o = await get('/api/v1/resources/overview');
    const m = o.messages || {};
    return h('div', { class: 'cards' }, card('Queues', o.queues), card('Partitions', o.partitions),
      card('Pending', fmt(m.pending ?? 0)), card('Processing', fmt(m.processing ?? 0)),
      card('Completed', fmt(m.completed ?? 0)), card('Dead letters', fmt(m.deadLetter ?? 0)));
  });
}

async function queues(el, args) {
  if (args.length) return queueDetail(el, args[0]);
  const box = h('div');
  el.replaceChildren(h('h1', {}, 'Queues'), box);
  await section(box, 'Queue list', async () => {
    const r = await get('/api/v1/resources/queues');
    return table([{ t: 'Queue' }, { t: 'Namespace' }, { t: 'Task' }, { t: 'Partitions', num: 1 },
      { t: 'Total', num: 1 }, { t: 'Pending', num: 1 }, { t: 'Processing', num: 1 }],
    (r.queues || []).map(q => h('tr', {},
      h('td', {}, h('a', { href: '#/queues/' + enc(q.name) }, q.name)), td(q.namespace), td(q.task),
      td(q.partitions, 1), td(q.messages?.total, 1), td(q.messages?.pending, 1), td(q.messages?.processing, 1))));
  });
}

async function queueDetail(el, name) {
  const parts = h('div'), lag = h('div');
  el.replaceChildren(h('h1', {}, 'Queue ', h('code', {}, name)), h('h2', {}, 'Partitions'), parts,
    h('h2', {}, 'Consumer groups on this queue'), lag);
  await section(parts, 'Queue detail', async () => {
    const q = await get('/api/v1/resources/queues/' + enc(name));
    return table([{ t: 'Partition' }, { t: 'Total', num: 1 }, { t: 'Pending', num: 1 }, { t: 'Processing', num: 1 },
      { t: 'Completed', num: 1 }, { t: 'Dead letter', num: 1 }, { t: 'Newest' }],
    (q.partitions || []).map(p => h('tr', {}, td(p.name), td(p.stats?.total, 1), td(p.stats?.pending, 1),
      td(p.stats?.processing, 1), td(p.stats?.completed, 1), td(p.stats?.deadLetter, 1), td(p.newestMessage))));
  });
  await section(lag, 'Consumer groups', async () => {
    const groups = (await get('/api/v1/consumer-groups')).filter(g => g.queueName === name);
    return groupTable(groups);
  });
}

function groupTable(groups) {
  return table([{ t: 'Group' }, { t: 'Queue' }, { t: 'Members', num: 1 }, { t: 'Partitions lagging', num: 1 },
    { t: 'Max time lag (s)', num: 1 }, { t: 'State' }, { t: '' }],
  groups.map(g => h('tr', {},
    h('td', {}, h('a', { href: '#/groups/' + enc(g.name) }, g.name)), td(g.queueName), td(g.members, 1),
    td(g.partitionsWithLag, 1), td(g.maxTimeLag, 1),
    h('td', {}, h('span', { class: 'pill ' + (g.state === 'Stable' ? 'ok' : g.state === 'Lagging' ? 'warn' : 'bad') }, g.state)),
    h('td', {}, h('button', { onclick: async ev => {
      if (!confirm(`Move ${g.name} to the end of ${g.queueName}?`)) return;
      ev.target.disabled = true;
      const r = await post(`/api/v1/consumer-groups/${enc(g.name)}/queues/${enc(g.queueName)}/seek`, { toEnd: true });
      ev.target.textContent = `moved ${r.partitionsUpdated ?? ''}`;
    } }, 'Seek to end')))));
}

async function groups(el, args) {
  const box = h('div');
  if (args.length) {
    el.replaceChildren(h('h1', {}, 'Consumer group ', h('code', {}, args[0])), box);
    return section(box, 'Consumer group detail', async () => {
      const g = await get('/api/v1/consumer-groups/' + enc(args[0]));
      return h('div', {}, Object.entries(g).map(([queue, v]) => h('div', {}, h('h2', {}, queue),
        table([{ t: 'Partition' }, { t: 'Offset lag', num: 1 }, { t: 'Time lag (s)', num: 1 }, { t: 'Consumed', num: 1 },
          { t: 'Last consumed' }, { t: 'Lease' }],
        (v.partitions || []).map(p => h('tr', {}, td(p.partition), td(p.offsetLag, 1), td(p.timeLagSeconds, 1),
          td(p.totalConsumed, 1), td(p.lastConsumedAt), td(p.leaseActive ? 'active' : '—')))))));
    });
  }
  el.replaceChildren(h('h1', {}, 'Consumer groups'), box);
  await section(box, 'Consumer groups', async () => groupTable(await get('/api/v1/consumer-groups')));
}

async function dlq(el) {
  const box = h('div');
  const filter = h('input', { name: 'queue', placeholder: 'queue (optional)' });
  const load = () => section(box, 'Dead letters', async () => {
    const q = filter.value.trim();
    const r = await get('/api/v1/dlq?limit=100' + (q ? '&queue=' + enc(q) : ''));
    return h('div', {}, h('p', { class: 'muted' }, `${r.total ?? (r.messages || []).length} dead letters`),
      table([{ t: 'Queue' }, { t: 'Partition' }, { t: 'Group' }, { t: 'Error' }, { t: 'Retries', num: 1 }, { t: 'Failed at' }, { t: '' }],
        (r.messages || []).map(m => h('tr', { 'data-txid': m.transactionId }, td(m.queue), td(m.partition), td(m.consumerGroup),
          td(m.errorMessage), td(m.retryCount, 1), td(m.failedAt),
          h('td', {},
            h('button', { class: 'primary retry', onclick: ev => act(ev, 'POST', `/api/v1/messages/${enc(m.partitionId)}/${enc(m.transactionId)}/retry`, 'retried') }, 'Retry'), ' ',
            h('button', { class: 'danger', onclick: ev => act(ev, 'DELETE', `/api/v1/messages/${enc(m.partitionId)}/${enc(m.transactionId)}`, 'deleted') }, 'Delete'))))));
  });
  async function act(ev, method, path, done) {
    const b = ev.target; b.disabled = true;
    try {
      await (method === 'POST' ? post(path) : del(path));
      b.closest('tr').replaceChildren(h('td', { colspan: 7, class: 'muted' }, done));
    } catch (e) { b.disabled = false; b.textContent = e instanceof NotAvailable ? 'not available' : 'failed: ' + e.message; }
  }
  el.replaceChildren(h('h1', {}, 'Dead letters'),
    h('form', { class: 'row', onsubmit: ev => { ev.preventDefault(); load(); } }, filter, h('button', { type: 'submit' }, 'Filter')), box);
  await load();
}

async function messages(el, args) {
  const box = h('div'), detail = h('div');
  const queue = h('input', { placeholder: 'queue', value: args[0] || '' });
  const pid = h('input', { placeholder: 'partition id' }), txid = h('input', { placeholder: 'transaction id' });
  async function show(p, t) {
    await section(detail, 'Message detail', async () => {
      const m = await get(`/api/v1/messages/${enc(p)}/${enc(t)}`);
      const traces = h('div');
      section(traces, 'Trace timeline', async () => {
        const r = await get(`/api/v1/traces/${enc(p)}/${enc(t)}`);
        return (r.traces || []).length ? h('ul', { class: 'timeline' }, r.traces.map(x => h('li', {},
          h('b', {}, x.event_type), ' ', h('span', { class: 'muted' }, x.created_at, x.consumer_group ? ' · ' + x.consumer_group : ''),
          h('pre', {}, JSON.stringify(x.data, null, 1))))) : h('p', { class: 'muted' }, 'No traces.');
      }).catch(() => {});
      return h('div', { class: 'panel' }, h('h2', {}, `${m.queuePath} · ${m.status}`),
        h('p', { class: 'muted' }, `id ${m.id} · created ${m.createdAt} · retries ${m.retryCount ?? 0}`),
        h('pre', {}, JSON.stringify(m.payload ?? m.data, null, 2)), h('h2', {}, 'Trace timeline'), traces);
    });
  }
  async function list() {
    await section(box, 'Message list', async () => {
      const q = queue.value.trim();
      const r = await get('/api/v1/messages?limit=50' + (q ? '&queue=' + enc(q) : ''));
      return table([{ t: 'Queue path' }, { t: 'Transaction' }, { t: 'Status' }, { t: 'Created' }],
        (r.messages || []).map(m => h('tr', {}, td(m.queuePath),
          h('td', {}, h('a', { href: '#', onclick: (e) => { e.preventDefault(); show(m.partitionId, m.transactionId); } }, m.transactionId)),
          td(m.status), td(m.createdAt))));
    });
  }
  el.replaceChildren(h('h1', {}, 'Messages'),
    h('form', { class: 'row', onsubmit: ev => { ev.preventDefault(); list(); } }, queue, h('button', { type: 'submit' }, 'List (last hour)')),
    h('form', { class: 'row', onsubmit: ev => { ev.preventDefault(); show(pid.value.trim(), txid.value.trim()); } }, pid, txid, h('button', { type: 'submit' }, 'Look up')),
    detail, box);
  await list();
}

// Timers (http-api.md §16): pending per queue, and one queue's first page with cancel.
async function timers(el, args) {
  const box = h('div');
  if (args.length) {
    const q = args[0];
    el.replaceChildren(h('h1', {}, 'Timers of ', h('code', {}, q)), box);
    return section(box, 'Timers', async () => {
      const r = await get(`/api/v1/timers/${enc(q)}?limit=200`);
      const rows = (r.rows || []).map(t => h('tr', {}, td(t.timerKey), td(t.deliverAt ?? 'parked'), td(t.txn),
        td(t.partition), td(t.attempts, 1), td(t.lastError),
        h('td', {}, h('button', { onclick: async ev => {
          ev.target.disabled = true;
          const c = await del(`/api/v1/timers/${enc(q)}/${t.timerKey.split('/').map(enc).join('/')}`);
          ev.target.textContent = c.status;
        } }, 'Cancel'))));
      return h('div', {}, table([{ t: 'Key' }, { t: 'Due' }, { t: 'Txn' }, { t: 'Partition' },
        { t: 'Attempts', num: 1 }, { t: 'Last error' }, { t: '' }], rows),
      r.truncated ? h('p', { class: 'muted' }, 'First 200 shown.') : null);
    });
  }
  el.replaceChildren(h('h1', {}, 'Timers'), box);
  await section(box, 'Pending timers', async () => {
    const r = await get('/api/v1/resources/timers');
    return h('div', {}, h('div', { class: 'cards' }, card('Pending timers', fmt(r.total ?? 0))),
      table([{ t: 'Queue' }, { t: 'Pending', num: 1 }, { t: 'Next due' }],
        (r.queues || []).map(q => h('tr', {},
          h('td', {}, h('a', { href: '#/timers/' + enc(q.queue) }, q.queue)), td(q.pending, 1), td(q.nextDeliverAt)))));
  });
}

async function system(el) {
  const maint = h('div'), buffers = h('div');
  const sw = (label, id, on, path, key) => h('label', { class: 'switch' },
    h('input', { type: 'checkbox', id, checked: on, onchange: async ev => {
      const box = ev.target; box.disabled = true;
      try { const r = await post(path, { enabled: box.checked }); box.checked = !!r[key]; }
      catch (e) { box.checked = !box.checked; alert(e.message); }
      box.disabled = false;
      const pill = document.getElementById(id + '-state');
      pill.textContent = box.checked ? 'on' : 'off';
      pill.className = 'pill ' + (box.checked ? 'warn' : 'ok');
    } }), label, h('span', { class: 'pill ' + (on ? 'warn' : 'ok'), id: id + '-state' }, on ? 'on' : 'off'));
  el.replaceChildren(h('h1', {}, 'Spool & maintenance'), h('div', { class: 'panel' }, maint), h('h2', {}, 'Spool'), buffers);
  await section(maint, 'Maintenance switches', async () => {
    const m = await get('/api/v1/system/maintenance');
    return h('div', {},
      sw('Push maintenance (pushes go to the spool)', 'maint-push', m.maintenanceMode, '/api/v1/system/maintenance', 'maintenanceMode'),
      sw('Pop maintenance (pops answer empty)', 'maint-pop', m.popMaintenanceMode, '/api/v1/system/maintenance/pop', 'popMaintenanceMode'),
      h('p', { class: 'muted' }, `buffered messages: ${m.bufferedMessages ?? 0} · buffer healthy: ${m.bufferHealthy}`));
  });
  await section(buffers, 'Spool state', async () => {
    const b = await get('/api/v1/status/buffers');
    return h('div', { class: 'cards' }, card('Pending', b.pending ?? 0), card('Failed', b.failed ?? 0),
      card('DB healthy', b.dbHealthy ? 'yes' : 'no'));
  });
}

// Stream queries (GET /streams/v1/queries): each query's pipeline queues, the
// source partitions it has committed cycles for, its state rows and last cycle.
async function streams(el) {
  const box = h('div');
  el.replaceChildren(h('h1', {}, 'Streams'), box);
  await section(box, 'Stream queries', async () => {
    const r = await get('/streams/v1/queries');
    return table([{ t: 'Query' }, { t: 'Source' }, { t: 'Sink' }, { t: 'Partitions', num: 1 },
      { t: 'State rows', num: 1 }, { t: 'Cycles', num: 1 }, { t: 'Last cycle' }, { t: 'Config hash' }],
    (r.queries || []).map(q => h('tr', {}, td(q.name),
      h('td', {}, h('a', { href: '#/queues/' + enc(q.source_queue) }, q.source_queue)),
      q.sink_queue ? h('td', {}, h('a', { href: '#/queues/' + enc(q.sink_queue) }, q.sink_queue)) : td(null),
      td(q.partitions, 1), td(fmt(q.state_rows), 1), td(fmt(q.cycles), 1), td(q.last_cycle_at),
      h('td', {}, h('code', {}, String(q.config_hash || '').slice(0, 12))))));
  });
}

async function mesh(el) {
  const box = h('div');
  el.replaceChildren(h('h1', {}, 'Mesh peers'), box);
  await section(box, 'Shared state', async () => {
    const s = await get('/api/v1/system/shared-state');
    const peers = s.peers || s.mesh?.peers || [];
    return h('div', {},
      Array.isArray(peers) && peers.length ? table([{ t: 'Peer' }, { t: 'State' }, { t: 'Last heard' }],
        peers.map(p => h('tr', {}, td(p.id || p.serverId || p.addr || p.address || JSON.stringify(p)),
          td(p.state || (p.alive === undefined ? '' : p.alive ? 'up' : 'down')), td(p.lastSeen || p.lastHeartbeat))))
        : h('p', { class: 'muted' }, 'No peers: this broker runs alone.'),
      h('h2', {}, 'Raw state'), h('pre', {}, JSON.stringify(s, null, 2)));
  });
}

// Ephemeral (RAM-only) queues of this broker: depth, bytes and drops, read from
// its memory (GET /api/v1/ephemeral/queues; no database behind it, free to poll).
async function ephemeral(el) {
  const box = h('div');
  el.replaceChildren(h('h1', {}, 'Ephemeral queues'),
    h('p', { class: 'muted' }, 'RAM only: contents survive no restart, crash or ownership move.'), box);
  await section(box, 'Ephemeral queues', async () => {
    const r = await get('/api/v1/ephemeral/queues');
    return h('div', {},
      h('div', { class: 'cards' }, card('Queues', r.count), card('Memory', bytes(r.cellBytes || 0)),
        card('Brokers', (r.members || []).length)),
      table([{ t: 'Queue' }, { t: 'Tier' }, { t: 'Depth', num: 1 }, { t: 'Bytes', num: 1 },
        { t: 'Partitions', num: 1 }, { t: 'Groups', num: 1 }, { t: 'Dropped (bounds/ttl/retry)' },
        { t: 'Max length', num: 1 }, { t: 'Policy' }],
      (r.queues || []).map(q => h('tr', {}, td(q.queue), td(q.tier), td(fmt(q.depth), 1), td(fmt(q.bytes), 1),
        td(q.partitions, 1), td(q.groups, 1), td(`${q.drops?.bounds ?? 0}/${q.drops?.ttl ?? 0}/${q.drops?.retry ?? 0}`),
        td(q.options?.maxLength, 1), td(q.options?.policy)))));
  });
}

// KV browser: namespaces with their live key counts; a namespace's keys by
// keyset pages (values are not shown: a browser is not a dump tool).
async function kv(el, args) {
  const ns = args[0];
  const box = h('div'), keys = h('div');
  el.replaceChildren(h('h1', {}, 'Key/value'), box, keys);
  await section(box, 'KV namespaces', async () => {
    const r = await get('/api/v1/resources/kv/namespaces');
    return table([{ t: 'Namespace' }, { t: 'Keys', num: true }],
      (r.namespaces || []).map(n => h('tr', {},
        h('td', {}, h('a', { href: '#/kv/' + enc(n.namespace) }, n.namespace)), td(n.rows, true))));
  });
  if (!ns) return;
  const rows = [];
  const page = async (after) => {
    const r = await post('/api/v1/resources/kv/list', { ns, after, limit: 100 });
    rows.push(...(r.rows || []).map(k => h('tr', {}, td(k.key), td(k.version, true), td(k.expiresAt || 'never'), td(k.updatedAt))));
    const more = r.truncated ? h('button', { onclick: () => page(r.nextAfter).catch(e => alert(e.message)) }, 'More') : null;
    keys.replaceChildren(h('h2', {}, `Keys of ${ns}`),
      table([{ t: 'Key' }, { t: 'Version', num: true }, { t: 'Expires' }, { t: 'Updated' }], rows), more || '');
  };
  try { await page(null); }
  catch (e) { if (e instanceof NotAvailable) keys.replaceChildren(na('KV keys', e)); else throw e; }
}

export const views = { overview, queues, groups, dlq, messages, timers, system, streams, mesh, ephemeral, kv };
