-- Incremental stats roll-up (issue 3: "statistics are computed incrementally or by a
-- bounded background job"). Redefines queen.stats_rollup (sql/015) with the same
-- contract and replaces stats_scan_partitions(uuid[]) by a two-argument version.
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
-- older stats_rollup, as sql/015 briefly is again while a booting broker re-applies
-- the files one by one). Scopes small enough to be counted live (sql/015:
-- stats_use_rollup) never read these rows.

DO $$
BEGIN
    -- guarded, so that a boot does not take an exclusive lock on the table when the
    -- columns exist already
    IF NOT EXISTS (SELECT 1 FROM pg_attribute
                    WHERE attrelid = 'queen.partition_stats'::regclass
                      AND attname = 'counted_at' AND NOT attisdropped) THEN
        ALTER TABLE queen.partition_stats
            ADD COLUMN IF NOT EXISTS counted_ts timestamptz,  -- position counted up to
            ADD COLUMN IF NOT EXISTS counted_id uuid,         --   (created_at, id)
            ADD COLUMN IF NOT EXISTS counted_at timestamptz,  -- scanned_at of that scan
            ADD COLUMN IF NOT EXISTS full_at    timestamptz;  -- last count from scratch
    END IF;
END $$;

-- Partitions rows were deleted from, and when (clock time of the deleting
-- statement). Written by the trigger below, read by the rescan; no foreign key: a
-- partition delete removes its messages from a trigger, after the partition row.
CREATE TABLE IF NOT EXISTS queen.stats_deleted (
    partition_id uuid PRIMARY KEY,
    deleted_at   timestamptz NOT NULL
);

CREATE OR REPLACE FUNCTION queen.messages_stamp_deletes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen.stats_deleted AS s (partition_id, deleted_at)
    SELECT d.partition_id, clock_timestamp()
      FROM (SELECT DISTINCT o.partition_id FROM old_rows o) d
     WHERE EXISTS (SELECT 1 FROM queen.partitions pt WHERE pt.id = d.partition_id)
    ON CONFLICT (partition_id) DO UPDATE SET deleted_at = EXCLUDED.deleted_at;
    -- a partition deleted meanwhile leaves a row nobody reads again: drop those
    DELETE FROM queen.stats_deleted s
     WHERE s.partition_id IN (SELECT DISTINCT o.partition_id FROM old_rows o)
       AND NOT EXISTS (SELECT 1 FROM queen.partitions pt WHERE pt.id = s.partition_id);
    RETURN NULL;
END $$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                    WHERE tgname = 'messages_stamp_deletes'
                      AND tgrelid = 'queen.messages'::regclass) THEN
        CREATE TRIGGER messages_stamp_deletes
            AFTER DELETE ON queen.messages
            REFERENCING OLD TABLE AS old_rows
            FOR EACH STATEMENT EXECUTE FUNCTION queen.messages_stamp_deletes();
    END IF;
END $$;

DROP FUNCTION IF EXISTS queen.stats_scan_partitions(uuid[]);

-- Rescans the given partitions into queen.partition_stats; returns how many. A
-- partition whose last full count is older than p_full_before is counted from
-- scratch (see the file header for the other cases).
CREATE OR REPLACE FUNCTION queen.stats_scan_partitions(p_pids uuid[], p_full_before timestamptz)
RETURNS int LANGUAGE sql AS $$
    WITH d AS MATERIALIZED (
        SELECT pl.partition_id AS pid, pl.queue_id AS qid, pt.name AS pname,
               pl.last_message_created_at AS last_ts, pl.last_message_id AS last_id,
               ps.total AS old_total, ps.counted_ts, ps.counted_id, ps.full_at,
               (ps.partition_id IS NULL OR ps.counted_ts IS NULL OR ps.full_at IS NULL
                OR ps.full_at < p_full_before OR ps.scanned_at = '-infinity'
                OR ps.counted_at IS DISTINCT FROM ps.scanned_at
                OR EXISTS (SELECT 1 FROM queen.stats_deleted x
                            WHERE x.partition_id = pl.partition_id
                              AND x.deleted_at >= ps.scanned_at)) AS full
          FROM queen.partition_lookup pl
          JOIN queen.partitions pt ON pt.id = pl.partition_id
          LEFT JOIN queen.partition_stats ps ON ps.partition_id = pl.partition_id
         WHERE pl.partition_id = ANY (p_pids)
    ), ins AS (
        INSERT INTO queen.partition_stats AS s (partition_id, queue_id, total, after_ref, inflight,
                                               lease_expires_at, dead, consumed, groups, scanned_at,
                                               counted_ts, counted_id, counted_at, full_at)
        SELECT d.pid, d.qid, t.n,
               CASE WHEN r.ts IS NULL THEN t.n ELSE a.n END,
               coalesce(r.inflight, 0), r.lease_exp, dl.n, cs.n,
               queen.stats_groups(d.pid, d.qid, d.pname, d.last_ts, d.last_id),
               now() - queen.stats_margin(),
               d.last_ts, d.last_id, now() - queen.stats_margin(),
               CASE WHEN d.full THEN now() - queen.stats_margin() ELSE d.full_at END
          FROM d
          CROSS JOIN LATERAL (
              SELECT CASE WHEN d.full THEN
                          (SELECT count(*) FROM queen.messages m WHERE m.partition_id = d.pid)
                     ELSE d.old_total
                          + (SELECT count(*) FROM queen.messages m
                              WHERE m.partition_id = d.pid
                                AND (m.created_at, m.id) > (d.counted_ts, d.counted_id))
                     END AS n) t
          LEFT JOIN LATERAL (
              SELECT pc.last_consumed_created_at AS ts, pc.last_consumed_id AS id,
                     greatest(pc.batch_size - pc.acked_count, 0) AS inflight,
                     pc.lease_expires_at AS lease_exp
                FROM queen.partition_consumers pc WHERE pc.partition_id = d.pid
               ORDER BY (pc.consumer_group = '__QUEUE_MODE__') DESC,
                        pc.last_consumed_created_at NULLS FIRST, pc.last_consumed_id
               LIMIT 1) r ON true
          CROSS JOIN LATERAL (SELECT count(*) AS n FROM queen.messages m
                               WHERE r.ts IS NOT NULL AND m.partition_id = d.pid
                                 AND (m.created_at, m.id) > (r.ts, r.id)) a
          CROSS JOIN LATERAL (SELECT count(DISTINCT x.message_id) AS n
                                FROM queen.dead_letter_queue x WHERE x.partition_id = d.pid) dl
          CROSS JOIN LATERAL (SELECT coalesce(sum(pc.total_messages_consumed), 0)::bigint AS n
                                FROM queen.partition_consumers pc
                               WHERE pc.partition_id = d.pid) cs
        ON CONFLICT (partition_id) DO UPDATE SET
            total = EXCLUDED.total, after_ref = EXCLUDED.after_ref,
            inflight = EXCLUDED.inflight, lease_expires_at = EXCLUDED.lease_expires_at,
            dead = EXCLUDED.dead, consumed = EXCLUDED.consumed, groups = EXCLUDED.groups,
            scanned_at = EXCLUDED.scanned_at, counted_ts = EXCLUDED.counted_ts,
            counted_id = EXCLUDED.counted_id, counted_at = EXCLUDED.counted_at,
            full_at = EXCLUDED.full_at
        RETURNING 1
    )
    SELECT count(*)::int FROM ins
$$;

-- queen.stats_rollup(p): as sql/015, plus `stale` in the answer (partitions that
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
