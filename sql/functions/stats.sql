-- Statistics roll-up and its readers.

-- Live per-partition counts (small scopes and the roll-up itself).

-- ---------------------------------------------------------------------------
-- queen.part_counts(pid) -> (total, pending, processing, completed, dead_letter)
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.part_counts(p_pid uuid,
    OUT total bigint, OUT pending bigint, OUT processing bigint,
    OUT completed bigint, OUT dead_letter bigint)
LANGUAGE plpgsql STABLE
-- by partition only: see queen.stats_scan_partitions
SET enable_seqscan = off
AS $$
DECLARE
    c       record;
    v_after bigint;
BEGIN
    SELECT count(*) INTO total FROM queen.messages m WHERE m.partition_id = p_pid;
    SELECT pc.last_consumed_created_at AS ts, pc.last_consumed_id AS id,
           CASE WHEN pc.lease_expires_at > now()
                THEN greatest(pc.batch_size - pc.acked_count, 0) ELSE 0 END AS inflight
      INTO c
      FROM queen.partition_consumers pc
     WHERE pc.partition_id = p_pid
     ORDER BY (pc.consumer_group = '__QUEUE_MODE__') DESC,
              pc.last_consumed_created_at NULLS FIRST, pc.last_consumed_id
     LIMIT 1;
    IF NOT FOUND OR c.ts IS NULL THEN
        v_after := total;
    ELSE
        SELECT count(*) INTO v_after FROM queen.messages m
         WHERE m.partition_id = p_pid AND (m.created_at, m.id) > (c.ts, c.id);
    END IF;
    processing := least(coalesce(c.inflight, 0), v_after);
    pending := v_after - processing;
    completed := total - v_after;
    SELECT count(DISTINCT d.message_id) INTO dead_letter
      FROM queen.dead_letter_queue d WHERE d.partition_id = p_pid;
END $$;

-- A counts record as the JSON of the queue detail.
CREATE OR REPLACE FUNCTION queen.counts_json(t bigint, p bigint, pr bigint, c bigint, d bigint)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('total', t, 'pending', p, 'processing', pr, 'completed', c,
                              'failed', d, 'deadLetter', d)
$$;

-- Statistics roll-up (issue 3; data-model.md "Statistics and metrics tables",
-- http-api.md §8/§12). A bounded background job (queen.stats_rollup, one round
-- per call, try advisory lock 737004) keeps per-partition counts in
-- queen.partition_stats and per-queue rows in queen.stats / queen.stats_history,
-- so the status and catalogue endpoints never count a large queue's messages on
-- the request path.
--
-- Freshness: a partition is rescanned when a push moved its newest message
-- (partition_lookup.updated_at), when one of its cursors or leases moved
-- (partition_consumers timestamps), when it was never scanned, when
-- POST /stats/refresh asked for it, or at the latest after the reconcile interval
-- (deletes by retention, seek or clear stamp nothing). scanned_at is set a margin
-- before the scan so that a push committing while the scan ran is seen next round.

-- How far before the scan scanned_at is stamped (covers pushes in flight).
CREATE OR REPLACE FUNCTION queen.stats_margin() RETURNS interval
LANGUAGE sql IMMUTABLE AS $$ SELECT interval '5 seconds' $$;

-- Scopes up to this many partitions are counted live (exact, cheap); larger ones
-- read the roll-up.
CREATE OR REPLACE FUNCTION queen.stats_live_max_partitions() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 1000 $$;

-- Scopes whose last roll-up counted more messages than this read the roll-up too
-- (live counting is one index range per partition: ~10 ms per 10^5 rows).
CREATE OR REPLACE FUNCTION queen.stats_live_max_messages() RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT 200000::bigint $$;

-- Whether a scope (set of queues) is read from the roll-up instead of live.
CREATE OR REPLACE FUNCTION queen.stats_use_rollup(p_qids uuid[]) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT (SELECT count(*) FROM queen.partition_lookup pl WHERE pl.queue_id = ANY (p_qids))
               > queen.stats_live_max_partitions()
        OR coalesce((SELECT sum(ps.total) FROM queen.partition_stats ps
                      WHERE ps.queue_id = ANY (p_qids)), 0) > queen.stats_live_max_messages()
$$;

-- Groups with something pending in one partition, with their offset lag (capped
-- like queen.cg_state) and the creation time of their oldest unconsumed message.
-- A group's position is its cursor, else its subscription start (per-partition
-- metadata, else queue-wide), else the beginning — as pop and cg_state read it.
-- plpgsql, not sql (issue 18): PostgreSQL 15 plans a non-inlined sql function's
-- query again at every call, ~0.5 ms here, once per partition per scan (550 of the
-- 770 ms of a 1,000-partition scan with no group at all); plpgsql keeps the plan.
CREATE OR REPLACE FUNCTION queen.stats_groups(p_pid uuid, p_qid uuid, p_pname text,
                                              p_last_ts timestamptz, p_last_id uuid)
RETURNS jsonb LANGUAGE plpgsql STABLE
-- by partition only: see queen.stats_scan_partitions
SET enable_seqscan = off
AS $$
BEGIN
    RETURN (
    SELECT coalesce(jsonb_object_agg(x.grp, jsonb_build_object(
               'lag', x.lag, 'oldest', queen.iso(x.oldest))), '{}'::jsonb)
      FROM (
        SELECT g.grp, c.n AS lag, o.created_at AS oldest
          FROM (SELECT m.consumer_group AS grp FROM queen.consumer_groups_metadata m
                 WHERE m.queue_id = p_qid
                UNION
                SELECT pc.consumer_group FROM queen.partition_consumers pc
                 WHERE pc.partition_id = p_pid) g
          LEFT JOIN queen.partition_consumers pc
                 ON pc.partition_id = p_pid AND pc.consumer_group = g.grp
          CROSS JOIN LATERAL (
              SELECT CASE WHEN pc.last_consumed_created_at IS NOT NULL THEN pc.last_consumed_created_at
                          WHEN g.grp = '__QUEUE_MODE__' THEN '-infinity'::timestamptz
                          ELSE coalesce(
                              (SELECT mp.subscription_timestamp FROM queen.consumer_groups_metadata mp
                                WHERE mp.queue_id = p_qid AND mp.consumer_group = g.grp
                                  AND mp.partition_name = p_pname AND mp.namespace = ''
                                  AND mp.task = ''),
                              (SELECT mq.subscription_timestamp FROM queen.consumer_groups_metadata mq
                                WHERE mq.queue_id = p_qid AND mq.consumer_group = g.grp
                                  AND mq.partition_name = '' AND mq.namespace = '' AND mq.task = ''),
                              '-infinity'::timestamptz) END AS ts,
                     coalesce(pc.last_consumed_id,
                              '00000000-0000-0000-0000-000000000000'::uuid) AS id) cur
          CROSS JOIN LATERAL (
              SELECT m.created_at FROM queen.messages m
               WHERE p_last_ts IS NOT NULL AND (p_last_ts, p_last_id) > (cur.ts, cur.id)
                 AND m.partition_id = p_pid AND (m.created_at, m.id) > (cur.ts, cur.id)
               ORDER BY m.created_at, m.id LIMIT 1) o
          CROSS JOIN LATERAL (
              SELECT count(*) AS n FROM (
                  SELECT 1 FROM queen.messages m
                   WHERE m.partition_id = p_pid AND (m.created_at, m.id) > (cur.ts, cur.id)
                   LIMIT queen.cg_offset_cap()) z) c
      ) x);
END $$;

-- Per-queue rows of queen.stats (stat_type 'queue', stat_key = queue id) from the
-- partition rows, plus one stats_history row per queue and minute carrying what
-- happened since the previous roll-up: ingested (the rows the partition scans found
-- appended since then, which they add up in details.ingestPending; this takes and
-- clears it), processed (growth of the consumed counters), failed (DLQ rows written).
-- "ingested" was a count of the window's messages by created_at, a second pass over
-- every row pushed (the scans had just counted the same rows): under push b100 the
-- larger half of the roll-up's PostgreSQL time. A row is now in the window in which
-- a scan first counted it, at most a cycle after its push.
CREATE OR REPLACE FUNCTION queen.stats_rollup_queues() RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    v_end    timestamptz := now() - queen.stats_margin();
    v_bucket timestamptz := date_trunc('minute', now());
    v_n      int;
BEGIN
    WITH prev AS (
        SELECT q.id AS qid,
               coalesce((s.details->>'windowEnd')::timestamptz, v_end - interval '1 minute') AS wstart,
               coalesce((s.details->>'consumed')::bigint, NULL) AS consumed,
               coalesce((s.details->>'ingestPending')::bigint, 0) AS ingested
          FROM queen.queues q
          LEFT JOIN queen.stats s ON s.stat_type = 'queue' AND s.stat_key = q.id::text
    ), agg AS (
        SELECT ps.queue_id AS qid, sum(ps.total)::bigint AS total,
               sum(ps.after_ref)::bigint AS after_ref,
               sum(CASE WHEN ps.lease_expires_at > now() THEN least(ps.inflight, ps.after_ref)
                        ELSE 0 END)::bigint AS processing,
               sum(ps.dead)::bigint AS dead, sum(ps.consumed)::bigint AS consumed,
               min(ps.scanned_at) AS scanned
          FROM queen.partition_stats ps GROUP BY ps.queue_id
    ), lag AS (
        SELECT ps.queue_id AS qid,
               avg(extract(epoch FROM now() - (e.value->>'oldest')::timestamptz)) AS avg_lag,
               max(extract(epoch FROM now() - (e.value->>'oldest')::timestamptz)) AS max_lag
          FROM queen.partition_stats ps, jsonb_each(ps.groups) e
         GROUP BY ps.queue_id
    ), win AS (
        SELECT prev.qid, prev.wstart, prev.consumed AS prev_consumed, prev.ingested,
               (SELECT count(*) FROM queen.dead_letter_queue d
                  JOIN queen.partitions pt ON pt.id = d.partition_id
                 WHERE pt.queue_id = prev.qid AND d.failed_at >= prev.wstart
                   AND d.failed_at < v_end) AS failed
          FROM prev
    ), up AS (
        INSERT INTO queen.stats AS s (stat_type, stat_key, queue_id, total_messages,
            pending_messages, processing_messages, completed_messages, dead_letter_messages,
            avg_lag_seconds, max_lag_seconds, messages_per_second, last_scanned_at, details,
            updated_at)
        SELECT 'queue', w.qid::text, w.qid, coalesce(a.total, 0),
               coalesce(a.after_ref - a.processing, 0), coalesce(a.processing, 0),
               coalesce(a.total - a.after_ref, 0), coalesce(a.dead, 0),
               coalesce(l.avg_lag, 0), coalesce(l.max_lag, 0),
               w.ingested / greatest(extract(epoch FROM v_end - w.wstart), 1),
               a.scanned,
               jsonb_build_object(
                   'windowEnd', v_end, 'consumed', coalesce(a.consumed, 0),
                   'ingestedPerSecond',
                       round((w.ingested / greatest(extract(epoch FROM v_end - w.wstart), 1))::numeric, 3),
                   'processedPerSecond',
                       round((greatest(coalesce(a.consumed, 0) - coalesce(w.prev_consumed, a.consumed, 0), 0)
                              / greatest(extract(epoch FROM v_end - w.wstart), 1))::numeric, 3)),
               now()
          FROM win w LEFT JOIN agg a ON a.qid = w.qid LEFT JOIN lag l ON l.qid = w.qid
        ON CONFLICT (stat_type, stat_key) DO UPDATE SET
            total_messages = EXCLUDED.total_messages, pending_messages = EXCLUDED.pending_messages,
            processing_messages = EXCLUDED.processing_messages,
            completed_messages = EXCLUDED.completed_messages,
            dead_letter_messages = EXCLUDED.dead_letter_messages,
            avg_lag_seconds = EXCLUDED.avg_lag_seconds, max_lag_seconds = EXCLUDED.max_lag_seconds,
            messages_per_second = EXCLUDED.messages_per_second,
            last_scanned_at = EXCLUDED.last_scanned_at, details = EXCLUDED.details,
            updated_at = EXCLUDED.updated_at
        RETURNING s.queue_id, s.pending_messages, s.avg_lag_seconds, s.max_lag_seconds
    ), hist AS (
        INSERT INTO queen.stats_history AS h (stat_type, stat_key, bucket_time, queue_id, data)
        SELECT 'queue', w.qid::text, v_bucket, w.qid, jsonb_build_object(
                   'ingested', w.ingested,
                   'processed', greatest(coalesce(a.consumed, 0)
                                         - coalesce(w.prev_consumed, a.consumed, 0), 0),
                   'failed', w.failed,
                   'pending', coalesce(u.pending_messages, 0),
                   'lagAvg', round(coalesce(u.avg_lag_seconds, 0)::numeric, 3),
                   'lagMax', round(coalesce(u.max_lag_seconds, 0)::numeric, 3))
          FROM win w LEFT JOIN agg a ON a.qid = w.qid LEFT JOIN up u ON u.queue_id = w.qid
        ON CONFLICT (stat_type, stat_key, bucket_time) DO UPDATE SET data = jsonb_build_object(
            'ingested', coalesce((h.data->>'ingested')::bigint, 0) + (EXCLUDED.data->>'ingested')::bigint,
            'processed', coalesce((h.data->>'processed')::bigint, 0) + (EXCLUDED.data->>'processed')::bigint,
            'failed', coalesce((h.data->>'failed')::bigint, 0) + (EXCLUDED.data->>'failed')::bigint,
            'pending', EXCLUDED.data->'pending',
            'lagAvg', EXCLUDED.data->'lagAvg',
            'lagMax', EXCLUDED.data->'lagMax')
        RETURNING 1
    )
    SELECT count(*) INTO v_n FROM hist;
    -- bounded prune of old history (STATS_HISTORY_RETENTION_DAYS, 7)
    DELETE FROM queen.stats_history h
     WHERE (h.stat_type, h.stat_key, h.bucket_time) IN (
         SELECT x.stat_type, x.stat_key, x.bucket_time FROM queen.stats_history x
          WHERE x.bucket_time < now() - interval '7 days' LIMIT 1000);
    RETURN v_n;
END $$;

-- Catalogue readers over the roll-up. A scope of at most
-- queen.stats_live_max_partitions() partitions (and a small last roll-up) is
-- counted live, exactly as before; a larger one reads queen.partition_stats
-- (above), whose age the overview reports as statsAge.

-- Per-partition counts of the queues in p_qids, live or from the roll-up.
-- A partition the roll-up has not scanned yet counts zero messages.
CREATE OR REPLACE FUNCTION queen.pcounts(p_qids uuid[], p_rollup boolean)
RETURNS TABLE (pid uuid, qid uuid, total bigint, pending bigint, processing bigint,
               completed bigint, dead bigint, scanned_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT pl.partition_id, pl.queue_id, c.total, c.pending, c.processing, c.completed,
           c.dead_letter, now()
      FROM queen.partition_lookup pl CROSS JOIN LATERAL queen.part_counts(pl.partition_id) c
     WHERE NOT p_rollup AND pl.queue_id = ANY (p_qids)
    UNION ALL
    SELECT pl.partition_id, pl.queue_id, coalesce(ps.total, 0),
           coalesce(ps.after_ref, 0) - x.proc, x.proc,
           coalesce(ps.total - ps.after_ref, 0), coalesce(ps.dead, 0), ps.scanned_at
      FROM queen.partition_lookup pl
      LEFT JOIN queen.partition_stats ps ON ps.partition_id = pl.partition_id
      CROSS JOIN LATERAL (SELECT CASE WHEN ps.lease_expires_at > now()
                                      THEN least(ps.inflight, ps.after_ref)::bigint
                                      ELSE 0::bigint END AS proc) x
     WHERE p_rollup AND pl.queue_id = ANY (p_qids)
$$;

-- The queues of a tenant, optionally filtered.
CREATE OR REPLACE FUNCTION queen.tenant_qids(p_tenant uuid, p_ns text, p_task text)
RETURNS uuid[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(q.id), '{}') FROM queen.queues q
     WHERE q.tenant_id = p_tenant
       AND (p_ns IS NULL OR q.namespace = p_ns) AND (p_task IS NULL OR q.task = p_task)
$$;

-- Seconds since the oldest roll-up scan of a scope (0 when read live).
CREATE OR REPLACE FUNCTION queen.stats_age(p_qids uuid[], p_rollup boolean) RETURNS numeric
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN NOT p_rollup THEN 0 ELSE coalesce(round(extract(epoch FROM
               now() - (SELECT min(ps.scanned_at) FROM queen.partition_stats ps
                         WHERE ps.queue_id = ANY (p_qids)))::numeric, 3), 0) END
$$;

-- Incremental stats roll-up (issue 3: "statistics are computed incrementally or by a
-- bounded background job").
--
-- Why: every partition a push touched since its last scan was rescanned with
-- count(*) over all of its messages. Under steady push to every partition that is
-- the whole of queen.messages every STATS_INTERVAL_MS: on this 2-core box, with 1.3M
-- rows over 1,000 partitions, a cycle ran for 20 s without a break (fresh rows have
-- no visibility-map bits, so the index-only count visits the heap) and push b10
-- fell from ~23k to ~9k msg/s while it ran.
--
-- Now a rescan counts only the rows appended since the previous one and adds them
-- to the total. This is exact because of the append-order invariant (semantics.md
-- §3): in a partition, a message that commits later has a greater (created_at, id)
-- than every message visible before, so "visible and after the position counted up
-- to" is exactly "not yet counted". The position counted up to is the partition's
-- newest-message pointer read in the same snapshot (push moves it in the
-- transaction that inserts). Only the stats job writes partition_stats.total, under
-- its advisory lock, so the read-add-write cannot race another writer.
--
-- Deletes are not appended rows, so a partition is counted from scratch instead
-- when: it was never counted; POST /stats/refresh forced it (scanned_at
-- '-infinity'); its last full count is older than the reconcile interval; rows were
-- deleted from it since its last scan, whoever deleted them (retention, eviction,
-- the message and clear endpoints, a cascade): a statement-level trigger on
-- queen.messages stamps the partition in queen.stats_deleted; or its row was last
-- written by a scan that did not record a position (counted_at <> scanned_at: an
-- row written before the roll-up kept positions). Scopes small enough to be
-- counted live (stats_use_rollup) never read these rows.
--
-- after_ref (the rows after the reference cursor) is kept the same way (issue 18;
-- it was counted from scratch at every scan, every row of a backlog each cycle):
-- total - after_ref is the number of rows at or before the reference position,
-- which no later append changes (same invariant: a cursor points at a visible row,
-- at or before the newest-message pointer of the same snapshot). A rescan adds
-- the rows the cursor moved over since the recorded position (ref_ts, ref_id;
-- subtracts them when it moved back, by a seek or a new group with no cursor), so
-- its cost is what was consumed since, not what is pending. A position past the
-- newest row (a seek to a later timestamp) does not stay stable, as rows appended
-- later may fall before it, so the next scan of such a partition counts from
-- scratch; so does one whose row has no position (written before schema/014).
-- A count from scratch is one pass over the partition's index entries that also
-- counts the rows after the reference and those appended since the last position.

-- Rescans the given partitions into queen.partition_stats; returns how many. A
-- partition whose last full count is older than p_full_before is counted from
-- scratch (see the file header for the other cases).
-- Reads queen.messages by partition only (issue 18): statistics taken while the
-- table held one partition (n_distinct 1) made the planner expect a partition to be
-- the whole table, and each partition's count became a scan of all of it (10.3 s a
-- roll-up round over 1.5 M rows in bench/run.sh's database; auto_explain).
CREATE OR REPLACE FUNCTION queen.stats_scan_partitions(p_pids uuid[], p_full_before timestamptz)
RETURNS int LANGUAGE sql
SET enable_seqscan = off
AS $$
    WITH d0 AS MATERIALIZED (
        SELECT pl.partition_id AS pid, pl.queue_id AS qid, pt.name AS pname,
               pl.last_message_created_at AS last_ts, pl.last_message_id AS last_id,
               ps.partition_id IS NOT NULL AS known,
               ps.total AS old_total, ps.after_ref AS old_after, ps.counted_ts, ps.counted_id,
               ps.full_at, ps.ref_ts AS old_ref_ts, ps.ref_id AS old_ref_id,
               -- the reference cursor now; none (or one that never consumed) is a
               -- position before every row
               coalesce(r.ts, '-infinity') AS ref_ts,
               CASE WHEN r.ts IS NULL THEN '00000000-0000-0000-0000-000000000000'::uuid
                    ELSE r.id END AS ref_id,
               coalesce(r.inflight, 0) AS inflight, r.lease_exp,
               -- a partition without cursors in a queue without subscriptions has no
               -- group to report: skip the per-group pass (stats_groups)
               (r.ts IS NOT NULL OR r.id IS NOT NULL
                OR EXISTS (SELECT 1 FROM queen.consumer_groups_metadata md
                            WHERE md.queue_id = pl.queue_id)) AS has_groups,
               (ps.partition_id IS NULL OR ps.counted_ts IS NULL OR ps.full_at IS NULL
                OR ps.full_at < p_full_before OR ps.scanned_at = '-infinity'
                OR ps.counted_at IS DISTINCT FROM ps.scanned_at
                -- no reference position recorded (a row from before schema/014), or
                -- one past the newest row (a seek to a later timestamp): rows
                -- appended since may lie before it, so its count is not stable
                OR ps.ref_ts IS NULL
                OR (ps.ref_ts, ps.ref_id) > (ps.counted_ts, ps.counted_id)
                OR EXISTS (SELECT 1 FROM queen.stats_deleted x
                            WHERE x.partition_id = pl.partition_id
                              AND x.deleted_at >= ps.scanned_at)) AS full,
               -- a partition counted for the first time adds to "ingested" only the
               -- rows of its queue's current window (as the window count did)
               coalesce((st.details->>'windowEnd')::timestamptz,
                        now() - queen.stats_margin() - interval '1 minute') AS wstart
          FROM queen.partition_lookup pl
          JOIN queen.partitions pt ON pt.id = pl.partition_id
          LEFT JOIN queen.partition_stats ps ON ps.partition_id = pl.partition_id
          LEFT JOIN queen.stats st ON st.stat_type = 'queue' AND st.stat_key = pl.queue_id::text
          LEFT JOIN LATERAL (
              SELECT pc.last_consumed_created_at AS ts, pc.last_consumed_id AS id,
                     greatest(pc.batch_size - pc.acked_count, 0) AS inflight,
                     pc.lease_expires_at AS lease_exp
                FROM queen.partition_consumers pc WHERE pc.partition_id = pl.partition_id
               ORDER BY (pc.consumer_group = '__QUEUE_MODE__') DESC,
                        pc.last_consumed_created_at NULLS FIRST, pc.last_consumed_id
               LIMIT 1) r ON true
         WHERE pl.partition_id = ANY (p_pids)
    ), d AS (
        -- the stretch the reference cursor moved over since the last scan, as (lo, hi]
        SELECT d0.*, (d0.ref_ts, d0.ref_id) > (d0.old_ref_ts, d0.old_ref_id) AS fwd,
               CASE WHEN (d0.ref_ts, d0.ref_id) > (d0.old_ref_ts, d0.old_ref_id)
                    THEN d0.old_ref_ts ELSE d0.ref_ts END AS lo_ts,
               CASE WHEN (d0.ref_ts, d0.ref_id) > (d0.old_ref_ts, d0.old_ref_id)
                    THEN d0.old_ref_id ELSE d0.ref_id END AS lo_id,
               CASE WHEN (d0.ref_ts, d0.ref_id) > (d0.old_ref_ts, d0.old_ref_id)
                    THEN d0.ref_ts ELSE d0.old_ref_ts END AS hi_ts,
               CASE WHEN (d0.ref_ts, d0.ref_id) > (d0.old_ref_ts, d0.old_ref_id)
                    THEN d0.ref_id ELSE d0.old_ref_id END AS hi_id
          FROM d0
    ), c AS (
        SELECT d.pid, d.qid, d.pname, d.last_ts, d.last_id, d.ref_ts, d.ref_id, d.inflight,
               d.lease_exp, d.full, d.full_at, d.has_groups,
               CASE WHEN d.full THEN f.n ELSE d.old_total + a.n END AS total,
               CASE WHEN d.full THEN f.after_n
                    -- rows at or before the reference: as last time, plus what it passed
                    ELSE d.old_total + a.n - ((d.old_total - d.old_after)
                                              + CASE WHEN d.fwd THEN mv.n ELSE -mv.n END)
               END AS after_ref,
               CASE WHEN d.full THEN f.app_n ELSE a.n END AS appended
          FROM d
          -- from scratch: one pass over the partition's index entries
          CROSS JOIN LATERAL (
              SELECT count(*) AS n,
                     count(*) FILTER (WHERE (m.created_at, m.id) > (d.ref_ts, d.ref_id)) AS after_n,
                     count(*) FILTER (WHERE CASE WHEN NOT d.known THEN m.created_at >= d.wstart
                                                 WHEN d.counted_ts IS NULL THEN true  -- was empty
                                                 ELSE (m.created_at, m.id) > (d.counted_ts, d.counted_id)
                                            END) AS app_n
                FROM queen.messages m WHERE d.full AND m.partition_id = d.pid) f
          -- incremental: the rows appended since the position counted up to ...
          CROSS JOIN LATERAL (
              SELECT count(*) AS n FROM queen.messages m
               WHERE NOT d.full AND m.partition_id = d.pid
                 AND (m.created_at, m.id) > (d.counted_ts, d.counted_id)) a
          -- ... and the rows the reference cursor moved over (either way)
          CROSS JOIN LATERAL (
              SELECT count(*) AS n FROM queen.messages m
               WHERE NOT d.full AND (d.hi_ts, d.hi_id) > (d.lo_ts, d.lo_id)
                 AND m.partition_id = d.pid
                 AND (m.created_at, m.id) > (d.lo_ts, d.lo_id)
                 AND (m.created_at, m.id) <= (d.hi_ts, d.hi_id)) mv
    ), ins AS (
        INSERT INTO queen.partition_stats AS s (partition_id, queue_id, total, after_ref, inflight,
                                               lease_expires_at, dead, consumed, groups, scanned_at,
                                               counted_ts, counted_id, counted_at, full_at,
                                               ref_ts, ref_id)
        SELECT c.pid, c.qid, c.total, c.after_ref, c.inflight, c.lease_exp, dl.n, cs.n,
               CASE WHEN c.has_groups
                    THEN queen.stats_groups(c.pid, c.qid, c.pname, c.last_ts, c.last_id)
                    ELSE '{}'::jsonb END,
               now() - queen.stats_margin(),
               c.last_ts, c.last_id, now() - queen.stats_margin(),
               CASE WHEN c.full THEN now() - queen.stats_margin() ELSE c.full_at END,
               c.ref_ts, c.ref_id
          FROM c
          CROSS JOIN LATERAL (SELECT count(DISTINCT x.message_id) AS n
                                FROM queen.dead_letter_queue x WHERE x.partition_id = c.pid) dl
          CROSS JOIN LATERAL (SELECT coalesce(sum(pc.total_messages_consumed), 0)::bigint AS n
                                FROM queen.partition_consumers pc
                               WHERE pc.partition_id = c.pid) cs
        ON CONFLICT (partition_id) DO UPDATE SET
            total = EXCLUDED.total, after_ref = EXCLUDED.after_ref,
            inflight = EXCLUDED.inflight, lease_expires_at = EXCLUDED.lease_expires_at,
            dead = EXCLUDED.dead, consumed = EXCLUDED.consumed, groups = EXCLUDED.groups,
            scanned_at = EXCLUDED.scanned_at, counted_ts = EXCLUDED.counted_ts,
            counted_id = EXCLUDED.counted_id, counted_at = EXCLUDED.counted_at,
            full_at = EXCLUDED.full_at, ref_ts = EXCLUDED.ref_ts, ref_id = EXCLUDED.ref_id
        RETURNING s.queue_id
    ), acc AS (
        -- the rows found appended, per queue, until the queue roll-up takes them as
        -- the window's "ingested" (queen.stats_rollup_queues)
        INSERT INTO queen.stats AS s (stat_type, stat_key, queue_id, details)
        SELECT 'queue', c.qid::text, c.qid, jsonb_build_object('ingestPending', sum(c.appended))
          FROM c GROUP BY c.qid HAVING sum(c.appended) > 0
        ON CONFLICT (stat_type, stat_key) DO UPDATE SET
            details = s.details || jsonb_build_object('ingestPending',
                coalesce((s.details->>'ingestPending')::bigint, 0)
                + (EXCLUDED.details->>'ingestPending')::bigint)
        RETURNING 1
    )
    SELECT count(*)::int FROM ins
$$;

-- queen.stats_rollup(p): the round described at the top of this file, plus `stale` in the answer (partitions that
-- needed a rescan when the round began, this round's included) and `last` in the
-- argument (the broker's last round of a cycle: roll the queues up even if full).
-- Forced ('-infinity') partitions come first, then never-scanned ones, then the
-- oldest scans, so a partition created during a forced cycle cannot take a marked
-- one's place, and one scanned earlier in the cycle comes after all the others. The
-- rescan gets the reconcile horizon so that a partition is counted from scratch at
-- least that often.
CREATE OR REPLACE FUNCTION queen.stats_rollup(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_batch     int := greatest(coalesce((p->>'batchSize')::int, 1000), 1);
    v_reconcile timestamptz := now() - greatest(coalesce((p->>'reconcileMs')::bigint, 120000), 1000)
                               * interval '1 millisecond';
    v_pids      uuid[];
    v_run       bigint;
    v_n         int := 0;
    v_q         int := 0;
    v_stale     bigint := 0;
BEGIN
    IF NOT pg_try_advisory_xact_lock(737004) THEN
        RETURN jsonb_build_object('job', 'stats', 'ran', false, 'rows', 0);
    END IF;
    INSERT INTO queen.job_runs (job, broker, started_at)
    VALUES ('stats', p->>'broker', clock_timestamp()) RETURNING id INTO v_run;
    IF coalesce((p->>'force')::boolean, false) THEN
        UPDATE queen.partition_stats SET scanned_at = '-infinity';
    END IF;
    -- the oldest-scanned v_batch of the stale partitions, and how many are stale: the
    -- caller chains only as many rounds as that count needs (a partition pushed to in
    -- the stats margin is stale again right after its scan, so "until a round comes
    -- back short" never ended under steady push)
    SELECT array_agg(x.pid) FILTER (WHERE x.rn <= v_batch), count(*)
      INTO v_pids, v_stale
      FROM (
        SELECT pl.partition_id AS pid,
               row_number() OVER (
                   ORDER BY CASE WHEN ps.scanned_at = '-infinity' THEN 0
                                 WHEN ps.scanned_at IS NULL THEN 1 ELSE 2 END,
                            ps.scanned_at) AS rn
          FROM queen.partition_lookup pl
          LEFT JOIN queen.partition_stats ps ON ps.partition_id = pl.partition_id
         WHERE ps.partition_id IS NULL
            OR ps.scanned_at < pl.updated_at
            OR ps.scanned_at < v_reconcile
            OR EXISTS (SELECT 1 FROM queen.partition_consumers pc
                        WHERE pc.partition_id = pl.partition_id
                          AND greatest(pc.last_consumed_at, pc.lease_acquired_at, pc.created_at)
                              >= ps.scanned_at)) x;
    IF v_pids IS NOT NULL THEN
        v_n := queen.stats_scan_partitions(v_pids, v_reconcile);
    END IF;
    -- the queue rows once the cycle's partitions are done: this round came back
    -- short, or covered every stale partition, or the broker says it is the last
    IF v_n < v_batch OR v_stale <= v_batch OR coalesce((p->>'last')::boolean, false) THEN
        v_q := queen.stats_rollup_queues();
    END IF;
    DELETE FROM queen.job_runs r WHERE r.job = 'stats' AND r.started_at < now() - interval '1 day';
    UPDATE queen.job_runs SET finished_at = clock_timestamp(), rows = v_n WHERE id = v_run;
    RETURN jsonb_build_object('job', 'stats', 'ran', true, 'rows', v_n, 'queues', v_q,
                              'stale', v_stale);
END $$;
