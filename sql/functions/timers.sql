-- Timers (http-api.md §16, semantics.md §20): schedule/reschedule/cancel, peek, list,
-- count, the per-queue pending figures, and the fire that turns due timers into
-- messages. Table: sql/schema/009_timers.sql (queen.log_timers).
--
-- Concurrency (data-model.md "Timer fire"):
--  * The fire claims due rows with FOR UPDATE SKIP LOCKED and, in the same transaction,
--    deletes them and pushes their messages through queen.push_items with the timer's
--    txn as transaction id and the message id minted at schedule. Brokers sharing a
--    database skip each other's rows; a fire that dies rolls back whole, and a repeat
--    of a committed fire cannot happen (the rows are gone), while dedup by txn would
--    still make it a duplicate rather than a second message.
--  * Modifiers (schedule, reschedule, cancel) first take a transaction advisory lock
--    per key (class 737009), all of a call's keys in hash order, so two calls never
--    deadlock and never wait for each other's row lock. The fire never takes these
--    locks, so a modifier that then finds its row locked (SKIP LOCKED returns nothing
--    while the row exists) has met a fire in progress: `too_late`.

-- The advisory-lock class of timer keys (an arbitrary constant of ours, beside the
-- job and schema keys 737000/737001).
CREATE OR REPLACE FUNCTION queen.timers_lock_class() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 737009 $$;

-- deliverAt as the API shows it: ISO-8601 UTC, null for a parked timer ('infinity').
CREATE OR REPLACE FUNCTION queen.timers_iso(ts timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN isfinite(ts) THEN queen.iso(ts) END $$;

-- ---------------------------------------------------------------------------
-- queen.timers_apply(p)
--   in : {tenant, sub|null, ops: [{op: "schedule"|"reschedule"|"cancel", queue, timerKey,
--          partition?, payload? (base64 of the stored bytes), encrypted?, delayMs?,
--          txn?, messageId?}]}   (validated by the broker: src/api/timers_ops.rs)
--   out: {results: [...]} index-aligned, shapes of http-api.md §16
-- One call = one transaction: every op of the call commits or none does.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.timers_apply(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_sub    text := p->>'sub';
    v_ops    jsonb := coalesce(p->'ops', '[]'::jsonb);
    o        jsonb;
    v_out    jsonb := '[]'::jsonb;
    v_held   boolean;
    v_txn    text;
    v_at     timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock(queen.timers_lock_class(), s.h)
       FROM (SELECT DISTINCT hashtext(v_tenant::text || chr(1) || (e->>'queue') || chr(1)
                                      || (e->>'timerKey')) AS h
               FROM jsonb_array_elements(v_ops) e
              ORDER BY 1) s;

    FOR o IN SELECT e.v FROM jsonb_array_elements(v_ops) WITH ORDINALITY AS e(v, ord) ORDER BY e.ord LOOP
        PERFORM 1 FROM queen.log_timers t
         WHERE t.tenant_id = v_tenant AND t.queue = o->>'queue' AND t.timer_key = o->>'timerKey'
           FOR UPDATE SKIP LOCKED;
        v_held := FOUND;
        IF NOT v_held THEN
            -- a plain read never waits for the row lock: a row that exists now is a fire's
            SELECT t.txn INTO v_txn FROM queen.log_timers t
             WHERE t.tenant_id = v_tenant AND t.queue = o->>'queue' AND t.timer_key = o->>'timerKey';
            IF FOUND THEN
                v_out := v_out || jsonb_build_array(jsonb_build_object(
                    'ok', false, 'status', 'too_late', 'queue', o->'queue',
                    'timerKey', o->'timerKey', 'txn', v_txn));
                CONTINUE;
            END IF;
        END IF;

        IF o->>'op' = 'cancel' THEN
            DELETE FROM queen.log_timers t
             WHERE t.tenant_id = v_tenant AND t.queue = o->>'queue' AND t.timer_key = o->>'timerKey'
            RETURNING t.txn INTO v_txn;
            IF FOUND THEN
                v_out := v_out || jsonb_build_array(jsonb_build_object(
                    'ok', true, 'status', 'cancelled', 'queue', o->'queue',
                    'timerKey', o->'timerKey', 'txn', v_txn));
            ELSE
                v_out := v_out || jsonb_build_array(jsonb_build_object(
                    'ok', false, 'status', 'absent', 'queue', o->'queue',
                    'timerKey', o->'timerKey', 'txn', o->'txn'));
            END IF;
            CONTINUE;
        END IF;

        -- schedule and reschedule are the same upsert: new payload, deliverAt, message
        -- id; attempts and last error reset. A reschedule without txn keeps the old one.
        INSERT INTO queen.log_timers AS t (tenant_id, queue, timer_key, partition, deliver_at, txn,
                                           message_id, payload, encrypted, producer_sub)
        VALUES (v_tenant, o->>'queue', o->>'timerKey', coalesce(o->>'partition', 'Default'),
                now() + (o->>'delayMs')::bigint * interval '1 millisecond',
                coalesce(o->>'txn', o->>'messageId'), (o->>'messageId')::uuid,
                decode(o->>'payload', 'base64'), coalesce((o->>'encrypted')::boolean, false), v_sub)
        ON CONFLICT (tenant_id, queue, timer_key) DO UPDATE SET
            partition = EXCLUDED.partition, deliver_at = EXCLUDED.deliver_at,
            txn = coalesce(o->>'txn', t.txn), message_id = EXCLUDED.message_id,
            payload = EXCLUDED.payload, payload_zstd = false, encrypted = EXCLUDED.encrypted,
            producer_sub = EXCLUDED.producer_sub, attempts = 0, last_error = NULL,
            updated_at = now()
        RETURNING t.txn, t.deliver_at INTO v_txn, v_at;
        v_out := v_out || jsonb_build_array(jsonb_build_object(
            'ok', true, 'status', CASE WHEN v_held THEN 'rescheduled' ELSE 'scheduled' END,
            'queue', o->'queue', 'timerKey', o->'timerKey', 'txn', v_txn,
            'messageId', o->'messageId', 'deliverAt', queen.timers_iso(v_at)));
    END LOOP;
    RETURN jsonb_build_object('results', v_out);
END $$;

-- ---------------------------------------------------------------------------
-- queen.timers_peek({tenant, queue, timerKey}) -> {found: false} | {found: true, ...}
-- The payload is shown as stored (base64; the envelope when encrypted).
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.timers_peek(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
SELECT coalesce((
    SELECT jsonb_build_object(
        'found', true, 'queue', t.queue, 'timerKey', t.timer_key, 'partition', t.partition,
        'txn', t.txn, 'messageId', t.message_id, 'deliverAt', queen.timers_iso(t.deliver_at),
        'attempts', t.attempts, 'lastError', t.last_error, 'encrypted', t.encrypted,
        'payload', translate(encode(t.payload, 'base64'), E'\n', ''),
        'payloadZstd', t.payload_zstd)
      FROM queen.log_timers t
     WHERE t.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
       AND t.queue = p->>'queue' AND t.timer_key = p->>'timerKey'),
    '{"found": false}'::jsonb)
$$;

-- ---------------------------------------------------------------------------
-- queen.timers_list({tenant, queue, after?, limit}) -> {rows, truncated, nextAfter}
-- Keyset page by timer key (bytewise), `after` exclusive; limit clamped by the broker.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.timers_list(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
WITH lim AS (
    SELECT least(greatest(coalesce((p->>'limit')::int, 100), 1), 1000) AS n
), page AS (
    SELECT t.*, row_number() OVER (ORDER BY t.timer_key) AS rn
      FROM queen.log_timers t
     WHERE t.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
       AND t.queue = p->>'queue'
       AND (p->>'after' IS NULL OR t.timer_key > (p->>'after') COLLATE "C")
     ORDER BY t.timer_key
     LIMIT (SELECT n + 1 FROM lim)
)
SELECT jsonb_build_object(
    'rows', coalesce((SELECT jsonb_agg(jsonb_build_object(
                'timerKey', g.timer_key, 'deliverAt', queen.timers_iso(g.deliver_at), 'txn', g.txn,
                'messageId', g.message_id, 'partition', g.partition, 'attempts', g.attempts,
                'lastError', g.last_error, 'encrypted', g.encrypted) ORDER BY g.timer_key)
                        FROM page g WHERE g.rn <= (SELECT n FROM lim)), '[]'::jsonb),
    'truncated', (SELECT count(*) FROM page) > (SELECT n FROM lim),
    'nextAfter', CASE WHEN (SELECT count(*) FROM page) > (SELECT n FROM lim)
                      THEN (SELECT g.timer_key FROM page g WHERE g.rn = (SELECT n FROM lim)) END)
$$;

-- queen.timers_count({tenant, queue, prefix?}) -> {count}
CREATE OR REPLACE FUNCTION queen.timers_count(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
SELECT jsonb_build_object('count', count(*))
  FROM queen.log_timers t
 WHERE t.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
   AND t.queue = p->>'queue'
   AND (p->>'prefix' IS NULL OR starts_with(t.timer_key, p->>'prefix'))
$$;

-- queen.timers_pending({tenant, maxQueues?}) -> {queues: [{queue, pending, nextDeliverAt}], total}
-- The dashboard's per-queue view of one tenant (bounded by maxQueues, by name).
CREATE OR REPLACE FUNCTION queen.timers_pending(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
WITH q AS (
    SELECT t.queue, count(*) AS n, min(t.deliver_at) AS next_at
      FROM queen.log_timers t
     WHERE t.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
     GROUP BY t.queue
     ORDER BY t.queue
     LIMIT least(greatest(coalesce((p->>'maxQueues')::int, 1000), 1), 10000)
)
SELECT jsonb_build_object(
    'queues', coalesce((SELECT jsonb_agg(jsonb_build_object(
                  'queue', q.queue, 'pending', q.n, 'nextDeliverAt', queen.timers_iso(q.next_at))
                  ORDER BY q.queue) FROM q), '[]'::jsonb),
    'total', coalesce((SELECT sum(q.n) FROM q), 0))
$$;

-- ---------------------------------------------------------------------------
-- queen.timers_push(tenant, queues, keys) -> {fired, duplicates, queues: [name]}
-- Deletes the named (locked) timers of one tenant and pushes their messages, in the
-- caller's transaction. A txn already stored in the partition is a duplicate: no
-- second message, and the timer is gone all the same.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.timers_push(p_tenant uuid, p_queues text[], p_keys text[])
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_items jsonb;
    v_res   jsonb;
BEGIN
    WITH gone AS (
        DELETE FROM queen.log_timers t
         USING unnest(p_queues, p_keys) AS k(q, key)
         WHERE t.tenant_id = p_tenant AND t.queue = k.q AND t.timer_key = k.key
        RETURNING t.*
    )
    SELECT jsonb_agg(jsonb_build_object(
               'queue', g.queue, 'partition', g.partition, 'id', g.message_id, 'txid', g.txn,
               'payload', convert_from(g.payload, 'UTF8')::jsonb, 'encrypted', g.encrypted,
               'sub', g.producer_sub) ORDER BY g.deliver_at, g.timer_key)
      INTO v_items
      FROM gone g;
    IF v_items IS NULL THEN
        RETURN jsonb_build_object('fired', 0, 'duplicates', 0, 'queues', '[]'::jsonb);
    END IF;
    v_res := queen.push_items(p_tenant, v_items);
    RETURN jsonb_build_object(
        'fired', (SELECT count(*) FROM jsonb_array_elements(v_res) r WHERE r->>'status' = 'queued'),
        'duplicates', (SELECT count(*) FROM jsonb_array_elements(v_res) r WHERE r->>'status' <> 'queued'),
        'queues', (SELECT jsonb_agg(DISTINCT i->>'queue') FROM jsonb_array_elements(v_items) i));
END $$;

-- ---------------------------------------------------------------------------
-- queen.timers_fire({batch, maxAttempts, backoffMinMs, backoffMaxMs})
--   -> {claimed, fired, duplicates, failed, queues: [name], nextDueMs: int|null}
-- One bounded round in one transaction: claim up to `batch` due timers (oldest first,
-- skipping rows other brokers or modifiers hold), push them per tenant, delete them.
-- A tenant's batch that PostgreSQL rejects is retried timer by timer (savepoints), so
-- one bad timer fails alone: its attempts count up, deliver_at backs off
-- (backoffMinMs * 2^attempts, at most backoffMaxMs), and after maxAttempts it parks
-- at 'infinity' with its last error. nextDueMs: ms until the nearest pending timer
-- (<= 0: due now), for the job's sleep.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.timers_fire(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_batch  int := least(greatest(coalesce((p->>'batch')::int, 200), 1), 10000);
    v_max    int := greatest(coalesce((p->>'maxAttempts')::int, 5), 1);
    v_bmin   double precision := greatest(coalesce((p->>'backoffMinMs')::bigint, 1000), 1);
    v_bmax   double precision := greatest(coalesce((p->>'backoffMaxMs')::bigint, 60000), 1);
    a_t      uuid[];
    a_q      text[];
    a_k      text[];
    v_t      uuid;
    v_q      text[];
    v_k      text[];
    v_res    jsonb;
    v_fired  int := 0;
    v_dups   int := 0;
    v_failed int := 0;
    v_queues jsonb := '[]'::jsonb;
    v_next   timestamptz;
BEGIN
    SELECT array_agg(c.tenant_id), array_agg(c.queue), array_agg(c.timer_key)
      INTO a_t, a_q, a_k
      FROM (SELECT t.tenant_id, t.queue, t.timer_key
              FROM queen.log_timers t
             WHERE t.deliver_at <= clock_timestamp()
             ORDER BY t.deliver_at
             LIMIT v_batch
               FOR UPDATE SKIP LOCKED) c;

    FOR v_t IN SELECT DISTINCT u FROM unnest(a_t) u LOOP
        SELECT array_agg(u.q), array_agg(u.k) INTO v_q, v_k
          FROM unnest(a_t, a_q, a_k) AS u(t, q, k) WHERE u.t = v_t;
        BEGIN
            v_res := queen.timers_push(v_t, v_q, v_k);
            v_fired := v_fired + (v_res->>'fired')::int;
            v_dups := v_dups + (v_res->>'duplicates')::int;
            v_queues := v_queues || coalesce(v_res->'queues', '[]'::jsonb);
        EXCEPTION WHEN OTHERS THEN
            FOR i IN 1..cardinality(v_k) LOOP
                BEGIN
                    v_res := queen.timers_push(v_t, ARRAY[v_q[i]], ARRAY[v_k[i]]);
                    v_fired := v_fired + (v_res->>'fired')::int;
                    v_dups := v_dups + (v_res->>'duplicates')::int;
                    v_queues := v_queues || coalesce(v_res->'queues', '[]'::jsonb);
                EXCEPTION WHEN OTHERS THEN
                    -- the text goes to the server log only: peek and list show the
                    -- SQLSTATE, never PostgreSQL's message (it may name internals)
                    RAISE WARNING 'timer fire failed (%, %): %', v_q[i], v_k[i], SQLERRM;
                    v_failed := v_failed + 1;
                    UPDATE queen.log_timers t
                       SET attempts = t.attempts + 1,
                           last_error = 'fire failed (SQLSTATE ' || SQLSTATE || ')',
                           deliver_at = CASE WHEN t.attempts + 1 >= v_max THEN 'infinity'::timestamptz
                                             ELSE clock_timestamp() + least(v_bmax, v_bmin * 2 ^ t.attempts)
                                                                      * interval '1 millisecond' END,
                           updated_at = now()
                     WHERE t.tenant_id = v_t AND t.queue = v_q[i] AND t.timer_key = v_k[i];
                END;
            END LOOP;
        END;
    END LOOP;

    SELECT min(t.deliver_at) INTO v_next FROM queen.log_timers t;
    RETURN jsonb_build_object(
        'claimed', coalesce(cardinality(a_k), 0),
        'fired', v_fired, 'duplicates', v_dups, 'failed', v_failed,
        'queues', (SELECT coalesce(jsonb_agg(DISTINCT x), '[]'::jsonb) FROM jsonb_array_elements(v_queues) x),
        'nextDueMs', CASE WHEN isfinite(v_next)
                          THEN floor(extract(epoch FROM v_next - clock_timestamp()) * 1000)::bigint END);
END $$;
