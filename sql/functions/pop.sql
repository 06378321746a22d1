-- Pop: claim partitions under a lease and read a batch (column answer and the jsonb wrapper).

-- Pop answering in columns (issue 2: drain pop b100 + ack/batch at >= 1.5x the original).
-- queen.pop once built one jsonb object per message (ten keys, a to_char per timestamp)
-- and concatenated them: 2.5-3.8 ms of a pop of 100 in PostgreSQL, against ~0.3 ms to
-- read the same rows as arrays. queen.pop_compact is the same claim and read, statement
-- for statement (candidate sources, try-lock, cursor re-read under the lock, lease or
-- autoAck cursor move, append-order read after the cursor), answering one array per
-- column; the broker builds the §4 JSON on a DB thread (src/store/pop_compact.rs).
-- queen.pop is a wrapper over it, so the claim logic has one copy and
-- SQL-level callers keep the jsonb shape.

-- ---------------------------------------------------------------------------
-- The claim logic of a pop, shared by queen.pop_compact and queen.pop_conflated
-- (only the read of the messages differs between them): the candidate
-- partitions, the try-lock and cursor re-read under it, and the lease (or
-- autoAck cursor move). All three are plpgsql so that their statements keep
-- cached plans per session, as they did inline.
-- ---------------------------------------------------------------------------

-- The oldest created_at a pop may still deliver from queue p_qid at p_now: a
-- message older than the queue's maxWaitTimeSeconds is never delivered (issue 15),
-- even before the eviction job removes it (sql/functions/jobs.sql,
-- 'max_wait_time_eviction'). Read once per claimed candidate (one primary-key
-- probe); the readers compare it as a plain lower bound on created_at, so the
-- message scan stays a range of messages_partition_pos_idx. A SQL function
-- called from a cached plan is planned at every call (~0.07 ms), so
-- queen.pop_compact calls it only when one of its queues sets the bound.
CREATE OR REPLACE FUNCTION queen.pop_oldest_deliverable(p_qid uuid, p_now timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT p_now - q.max_wait_time_seconds * interval '1 second'
                       FROM queen.queues q
                      WHERE q.id = p_qid AND q.max_wait_time_seconds > 0),
                    '-infinity'::timestamptz)
$$;

-- The subscription start of p_group in partition p_pid of queue p_qid when the group
-- registered partition-level subscriptions there (pop form with a partition): that
-- partition's own row wins, else p_queue_start (the queue-wide row's start). Called by
-- queen.pop_candidates only for a cursor-less partition of a queue that has such rows.
CREATE OR REPLACE FUNCTION queen.pop_partition_start(p_pid uuid, p_qid uuid, p_group text,
    p_queue_start timestamptz)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT coalesce((SELECT coalesce(m.subscription_timestamp, '-infinity'::timestamptz)
                       FROM queen.partitions pt
                       JOIN queen.consumer_groups_metadata m
                         ON m.queue_id = p_qid AND m.consumer_group = p_group
                        AND m.partition_name = pt.name AND m.namespace = '' AND m.task = ''
                      WHERE pt.id = p_pid),
                    p_queue_start)
$$;

-- How deep pop_candidates' second sweep may go (rows per queue) for pop
-- arguments p: 8192 on a pop's first attempt, none on a long-poll re-check
-- (the broker sets "recheck"; between re-checks new data is found by the
-- recency source, expired or released leases by the suspects). The broker also
-- sets it on a first attempt whose lane's sweep came back empty under 250 ms ago
-- with nothing pushed since (src/shard/sweeps.rs). ~2.3 us a row.
CREATE OR REPLACE FUNCTION queen.pop_sweep_depth(p jsonb) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN coalesce((p->>'recheck')::boolean, false) THEN 0 ELSE 8192 END
$$;

-- Where the next deep sweep starts: the n-th point of the golden-ratio sequence
-- (n * 0.618... mod 1, in 32-bit fixed point: 2654435769 = 2^32 / phi) over the
-- partition-id space, n from one sequence shared by every pop. Any run of k
-- consecutive points leaves no gap wider than about 1.9 / k of the space (1.78 / 32 at
-- k = 32), so sweeps of a fraction f of a queue's partitions, taken one after another,
-- cover all of it after about 1.9 / f of them (21 at f = 8%); random starts leave a
-- region unswept with probability (1 - f)^k (issue 18: at 100,000 partitions, f = 8%,
-- a group drain's last messages sat in one unswept region for more than 5 s).
-- The bound is for consecutive points: deep sweeps of other queues or groups in
-- between take points too, and one drain then sees a subset of the sequence, which
-- covers less evenly (about like random starts, worse when other sweepers take turns
-- in a strict rotation). A counter per queue and group would keep the bound; this
-- one needs no state and no lock. Partition ids are random (v4) uuids, so equal
-- shares of the id space hold about equal shares of the partitions. Numeric for the
-- product, which overflows bigint: n is taken mod 2^32, so the sequence never jumps.
CREATE OR REPLACE FUNCTION queen.pop_sweep_start() RETURNS uuid
LANGUAGE sql VOLATILE AS $$
    SELECT (lpad(to_hex(((nextval('queen.pop_sweep_seq') % 4294967296)::numeric * 2654435769
                         % 4294967296)::bigint), 8, '0')
            || '-0000-0000-0000-000000000000')::uuid
$$;

-- The partitions a pop of p_group may claim in the queues p_qids (only
-- p_part, when given), best first, at most p_limit: no live lease, something
-- after the group's position (from partition_lookup, no message scan), window
-- buffer satisfied; highest priority, then oldest cursor first.
--
-- Cost per pop bounded whatever the partition count (issue 18). Three sources, each an
-- ordered index range that streams: a partition it yields is tested at once (its lookup
-- row, one probe of its cursor row) and the source stops after p_limit claimable
-- partitions or 256 tested per queue (1,024 over all queues):
--  * recency: partitions written in the current 10-second slot or the one before
--    (partition_lookup_slot_idx), from a random partition inside each slot; new data is
--    found at once while fewer than 256 partitions of a queue are written per slot;
--  * suspects: the group's rows that are leased, retrying or released behind its
--    partition's newest message (partition_consumers_suspect_idx), from a random point;
--  * sweep: the queue's partitions in partition-id order from a random point, wrapping
--    (partition_lookup_queue_pid_idx): the backlog nobody has looked at yet.
-- With <= 256 partitions per queue the sweep tests every partition (exact); over more,
-- an empty answer is followed by one deeper sweep of up to p_deep partitions per
-- queue (see the end of the function). With at most 256 over all the target queues,
-- one plain statement tests every partition instead of the three sources. The
-- claimable partitions found (at most 3 * p_limit) are ranked by priority, then oldest
-- cursor, so a backlog found by the sweep still goes before fresh data.
--
-- Before, the candidate query probed every source row (up to ~1,100 at 10,000
-- partitions) for its lookup row, partition name and two consumer_groups_metadata rows,
-- and the recency source read and sorted every lookup row of the queue whenever the
-- statistics were stale: ~10 ms a pop at 10,000 partitions. Now the group's metadata is
-- read once per queue (a per-partition row only where the group registered one), the
-- partition name only for the rows returned, and the planner may only use index scans
-- (stale statistics made it choose bitmap scans and sorts of the whole queue).
CREATE OR REPLACE FUNCTION queen.pop_candidates(p_qids uuid[], p_part text, p_group text,
    p_now timestamptz, p_limit int, p_deep int)
RETURNS TABLE (partition_id uuid, pname text, qid uuid, qname text, priority int,
               lease_time int, delayed_processing int, cur_ts timestamptz, cur_id uuid,
               last_ts timestamptz, last_id uuid)
LANGUAGE plpgsql
-- Cached generic plans: a custom plan knows the length of p_qids and so always
-- looked cheaper to PostgreSQL, which then planned the sources anew at every pop
-- (~0.25 ms, more than running them); the plan shape is the same.
SET plan_cache_mode = force_generic_plan
-- Every access below is an ordered index range or a key probe; these keep a stale
-- row estimate from turning a range into a scan and sort of the whole queue.
SET enable_seqscan = off
SET enable_bitmapscan = off
AS $$
#variable_conflict use_column
DECLARE
    v_qm   boolean := p_group = '__QUEUE_MODE__';
    v_rand uuid := gen_random_uuid();
    v_slot bigint := queen.lookup_slot(p_now);
    v_nil  uuid := '00000000-0000-0000-0000-000000000000';
    v_near  int := 256;   -- rows per queue of the recency and suspect sources
    v_sweep int := 256;   -- rows per queue of the sweep
BEGIN
    IF p_part IS NOT NULL THEN
        -- the partition form: the named partition of each target queue
        RETURN QUERY
        WITH qs AS MATERIALIZED (
            SELECT q.id, q.name, q.priority, q.lease_time, q.delayed_processing, q.window_buffer,
                   CASE WHEN v_qm THEN '-infinity'::timestamptz
                        ELSE coalesce((SELECT coalesce(m.subscription_timestamp, '-infinity'::timestamptz)
                                         FROM queen.consumer_groups_metadata m
                                        WHERE m.queue_id = q.id AND m.consumer_group = p_group
                                          AND m.partition_name = '' AND m.namespace = '' AND m.task = ''),
                                      '-infinity'::timestamptz) END AS sub_ts
              FROM queen.queues q
             WHERE q.id = ANY (p_qids))
        SELECT pl.partition_id, pt.name, qs.id, qs.name, qs.priority, qs.lease_time,
               qs.delayed_processing, c.cur_ts, c.cur_id,
               pl.last_message_created_at, pl.last_message_id
          FROM qs
          JOIN queen.partitions pt ON pt.queue_id = qs.id AND pt.name = p_part
          JOIN queen.partition_lookup pl ON pl.partition_id = pt.id
          LEFT JOIN LATERAL (SELECT y.lease_expires_at, y.last_consumed_created_at, y.last_consumed_id
                               FROM queen.partition_consumers y
                              WHERE y.partition_id = pl.partition_id AND y.consumer_group = p_group
                             OFFSET 0) pc ON true
         CROSS JOIN LATERAL (
               SELECT CASE WHEN pc.last_consumed_created_at IS NOT NULL THEN pc.last_consumed_created_at
                           WHEN v_qm THEN qs.sub_ts
                           ELSE queen.pop_partition_start(pl.partition_id, qs.id, p_group, qs.sub_ts)
                      END AS cur_ts,
                      coalesce(pc.last_consumed_id, v_nil) AS cur_id) c
         WHERE pl.last_message_created_at IS NOT NULL
           AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= p_now)
           AND (qs.window_buffer <= 0
                OR pl.last_message_created_at <= p_now - qs.window_buffer * interval '1 second')
           AND (pl.last_message_created_at, pl.last_message_id) > (c.cur_ts, c.cur_id)
         ORDER BY qs.priority DESC, c.cur_ts, pl.partition_id
         LIMIT p_limit;
        RETURN;
    END IF;

    -- At most 256 partitions over all the target queues (the common case): the
    -- sweep below would test every one of them, so one plain statement tests them
    -- all, in the same order. The three sources bound the cost over thousands of
    -- partitions, but over a few their plan (about a hundred nodes, set up at every
    -- execution) cost a pop more than running it (issue 18: 0.27 -> 0.17 ms a call
    -- at 10 partitions, pgbench).
    IF (SELECT count(*) FROM (SELECT 1 FROM queen.partition_lookup z
                               WHERE z.queue_id = ANY (p_qids) LIMIT 257) k) <= 256 THEN
        RETURN QUERY
        WITH qs AS MATERIALIZED (
            SELECT q.id, q.name, q.priority, q.lease_time, q.delayed_processing, q.window_buffer,
                   CASE WHEN v_qm THEN '-infinity'::timestamptz
                        ELSE coalesce((SELECT coalesce(m.subscription_timestamp, '-infinity'::timestamptz)
                                         FROM queen.consumer_groups_metadata m
                                        WHERE m.queue_id = q.id AND m.consumer_group = p_group
                                          AND m.partition_name = '' AND m.namespace = '' AND m.task = ''),
                                      '-infinity'::timestamptz) END AS sub_ts,
                   NOT v_qm AND EXISTS (SELECT 1 FROM queen.consumer_groups_metadata m
                                         WHERE m.queue_id = q.id AND m.consumer_group = p_group
                                           AND m.partition_name <> '' AND m.namespace = ''
                                           AND m.task = '') AS pmeta
              FROM queen.queues q
             WHERE q.id = ANY (p_qids))
        SELECT pl.partition_id, pt.name, qs.id, qs.name, qs.priority, qs.lease_time,
               qs.delayed_processing, c.cur_ts, c.cur_id,
               pl.last_message_created_at, pl.last_message_id
          FROM qs
          JOIN queen.partition_lookup pl ON pl.queue_id = qs.id
          LEFT JOIN LATERAL (SELECT y.lease_expires_at, y.last_consumed_created_at, y.last_consumed_id
                               FROM queen.partition_consumers y
                              WHERE y.partition_id = pl.partition_id AND y.consumer_group = p_group
                             OFFSET 0) pc ON true
         CROSS JOIN LATERAL (
               SELECT CASE WHEN pc.last_consumed_created_at IS NOT NULL THEN pc.last_consumed_created_at
                           WHEN qs.pmeta THEN queen.pop_partition_start(pl.partition_id, qs.id, p_group, qs.sub_ts)
                           ELSE qs.sub_ts END AS cur_ts,
                      coalesce(pc.last_consumed_id, v_nil) AS cur_id) c
         CROSS JOIN LATERAL (SELECT x.name FROM queen.partitions x WHERE x.id = pl.partition_id OFFSET 0) pt
         WHERE pl.last_message_created_at IS NOT NULL
           AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= p_now)
           AND (qs.window_buffer <= 0
                OR pl.last_message_created_at <= p_now - qs.window_buffer * interval '1 second')
           AND (pl.last_message_created_at, pl.last_message_id) > (c.cur_ts, c.cur_id)
         ORDER BY qs.priority DESC, c.cur_ts, pl.partition_id >= v_rand DESC, pl.partition_id
         LIMIT p_limit;
        RETURN;
    END IF;

    LOOP
        RETURN QUERY
        WITH qs AS MATERIALIZED (
            -- per target queue, once: its options and the group's queue-wide subscription
            -- start; pmeta when the group also registered per-partition starts there.
            -- Higher priority first (sources stop early); equal priorities in random order
            -- so that no queue of a discovery pop is always reached last.
            SELECT q.id, q.name, q.priority, q.lease_time, q.delayed_processing, q.window_buffer,
                   CASE WHEN v_qm THEN '-infinity'::timestamptz
                        ELSE coalesce((SELECT coalesce(m.subscription_timestamp, '-infinity'::timestamptz)
                                         FROM queen.consumer_groups_metadata m
                                        WHERE m.queue_id = q.id AND m.consumer_group = p_group
                                          AND m.partition_name = '' AND m.namespace = '' AND m.task = ''),
                                      '-infinity'::timestamptz) END AS sub_ts,
                   NOT v_qm AND EXISTS (SELECT 1 FROM queen.consumer_groups_metadata m
                                         WHERE m.queue_id = q.id AND m.consumer_group = p_group
                                           AND m.partition_name <> '' AND m.namespace = ''
                                           AND m.task = '') AS pmeta
              FROM queen.queues q
             WHERE q.id = ANY (p_qids)
             ORDER BY q.priority DESC, random()
        ), rec AS (
            SELECT r.*, c.cur_ts, c.cur_id FROM (
                SELECT qs.*, x.pid, x.lts, x.lid FROM qs CROSS JOIN LATERAL (
                    SELECT y.* FROM unnest(ARRAY[v_slot + 1, v_slot, v_slot - 1]) AS b(slot)
                     CROSS JOIN LATERAL (
                          (SELECT pl.partition_id AS pid, pl.last_message_created_at AS lts,
                                  pl.last_message_id AS lid
                             FROM queen.partition_lookup pl
                            WHERE pl.queue_id = qs.id AND pl.last_message_slot = b.slot
                              AND pl.partition_id >= v_rand
                            ORDER BY pl.partition_id LIMIT v_near)
                          UNION ALL
                          (SELECT pl.partition_id, pl.last_message_created_at, pl.last_message_id
                             FROM queen.partition_lookup pl
                            WHERE pl.queue_id = qs.id AND pl.last_message_slot = b.slot
                              AND pl.partition_id < v_rand
                            ORDER BY pl.partition_id LIMIT v_near)) y
                     LIMIT v_near) x
                 LIMIT v_near * 4) r
              LEFT JOIN LATERAL (SELECT y.lease_expires_at, y.last_consumed_created_at, y.last_consumed_id
                                   FROM queen.partition_consumers y
                                  WHERE y.partition_id = r.pid AND y.consumer_group = p_group
                                 OFFSET 0) pc ON true
             CROSS JOIN LATERAL (
                   SELECT CASE WHEN pc.last_consumed_created_at IS NOT NULL THEN pc.last_consumed_created_at
                               WHEN r.pmeta THEN queen.pop_partition_start(r.pid, r.id, p_group, r.sub_ts)
                               ELSE r.sub_ts END AS cur_ts,
                          coalesce(pc.last_consumed_id, v_nil) AS cur_id) c
             WHERE r.lts IS NOT NULL
               AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= p_now)
               AND (r.window_buffer <= 0 OR r.lts <= p_now - r.window_buffer * interval '1 second')
               AND (r.lts, r.lid) > (c.cur_ts, c.cur_id)
             LIMIT p_limit
        ), sus AS (
            SELECT r.*, c.cur_ts, c.cur_id FROM (
                SELECT qs.*, x.pid, x.lts, x.lid FROM qs CROSS JOIN LATERAL (
                    SELECT pl.partition_id AS pid, pl.last_message_created_at AS lts,
                           pl.last_message_id AS lid
                      FROM ((SELECT s.partition_id FROM queen.partition_consumers s
                              WHERE s.consumer_group = p_group
                                AND (s.behind OR s.batch_retry_count > 0)
                                AND s.partition_id >= v_rand
                              ORDER BY s.partition_id LIMIT v_near)
                            UNION ALL
                            (SELECT s.partition_id FROM queen.partition_consumers s
                              WHERE s.consumer_group = p_group
                                AND (s.behind OR s.batch_retry_count > 0)
                                AND s.partition_id < v_rand
                              ORDER BY s.partition_id LIMIT v_near)) s
                     CROSS JOIN LATERAL (SELECT z.* FROM queen.partition_lookup z
                                          WHERE z.partition_id = s.partition_id OFFSET 0) pl
                     WHERE pl.queue_id = qs.id
                     LIMIT v_near) x
                 LIMIT v_near * 4) r
              LEFT JOIN LATERAL (SELECT y.lease_expires_at, y.last_consumed_created_at, y.last_consumed_id
                                   FROM queen.partition_consumers y
                                  WHERE y.partition_id = r.pid AND y.consumer_group = p_group
                                 OFFSET 0) pc ON true
             CROSS JOIN LATERAL (
                   SELECT CASE WHEN pc.last_consumed_created_at IS NOT NULL THEN pc.last_consumed_created_at
                               WHEN r.pmeta THEN queen.pop_partition_start(r.pid, r.id, p_group, r.sub_ts)
                               ELSE r.sub_ts END AS cur_ts,
                          coalesce(pc.last_consumed_id, v_nil) AS cur_id) c
             WHERE r.lts IS NOT NULL
               AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= p_now)
               AND (r.window_buffer <= 0 OR r.lts <= p_now - r.window_buffer * interval '1 second')
               AND (r.lts, r.lid) > (c.cur_ts, c.cur_id)
             LIMIT p_limit
        ), swp AS (
            SELECT r.*, c.cur_ts, c.cur_id FROM (
                SELECT qs.*, x.pid, x.lts, x.lid FROM qs CROSS JOIN LATERAL (
                    SELECT y.* FROM (
                          (SELECT pl.partition_id AS pid, pl.last_message_created_at AS lts,
                                  pl.last_message_id AS lid
                             FROM queen.partition_lookup pl
                            WHERE pl.queue_id = qs.id AND pl.partition_id >= v_rand
                            ORDER BY pl.partition_id LIMIT v_sweep)
                          UNION ALL
                          (SELECT pl.partition_id, pl.last_message_created_at, pl.last_message_id
                             FROM queen.partition_lookup pl
                            WHERE pl.queue_id = qs.id AND pl.partition_id < v_rand
                            ORDER BY pl.partition_id LIMIT v_sweep)) y
                     LIMIT v_sweep) x
                 LIMIT v_sweep * 4) r
              LEFT JOIN LATERAL (SELECT y.lease_expires_at, y.last_consumed_created_at, y.last_consumed_id
                                   FROM queen.partition_consumers y
                                  WHERE y.partition_id = r.pid AND y.consumer_group = p_group
                                 OFFSET 0) pc ON true
             CROSS JOIN LATERAL (
                   SELECT CASE WHEN pc.last_consumed_created_at IS NOT NULL THEN pc.last_consumed_created_at
                               WHEN r.pmeta THEN queen.pop_partition_start(r.pid, r.id, p_group, r.sub_ts)
                               ELSE r.sub_ts END AS cur_ts,
                          coalesce(pc.last_consumed_id, v_nil) AS cur_id) c
             WHERE r.lts IS NOT NULL
               AND (pc.lease_expires_at IS NULL OR pc.lease_expires_at <= p_now)
               AND (r.window_buffer <= 0 OR r.lts <= p_now - r.window_buffer * interval '1 second')
               AND (r.lts, r.lid) > (c.cur_ts, c.cur_id)
             LIMIT p_limit
        ), best AS (
            -- one row per partition (a partition may come from two sources), best first;
            -- ties (untouched partitions share a start) rotate with v_rand so that
            -- concurrent pops do not all try the same partitions first
            SELECT d.* FROM (
                SELECT DISTINCT ON (a.pid) a.*
                  FROM (SELECT * FROM rec UNION ALL SELECT * FROM sus UNION ALL SELECT * FROM swp) a
                 ORDER BY a.pid) d
             ORDER BY d.priority DESC, d.cur_ts, d.pid >= v_rand DESC, d.pid
             LIMIT p_limit
        )
        SELECT best.pid, pt.name, best.id, best.name, best.priority, best.lease_time,
               best.delayed_processing, best.cur_ts, best.cur_id, best.lts, best.lid
          FROM best
         CROSS JOIN LATERAL (SELECT x.name FROM queen.partitions x WHERE x.id = best.pid OFFSET 0) pt
         ORDER BY best.priority DESC, best.cur_ts, best.pid >= v_rand DESC, best.pid;
        -- An empty answer over a queue of more than 256 partitions is inconclusive: the
        -- sweep saw only 256 of them. Left so, the tail of a backlog spread over many
        -- partitions is found by chance, one sweep per long-poll re-check (issue 18: a
        -- 10,000-partition group drain spent 40% of its time on its last 2% of
        -- messages). So sweep once more, deeper, from the next point of a sequence that
        -- spreads successive deep sweeps evenly (queen.pop_sweep_start), with the
        -- recency and suspect sources (already read) off. Bounded: at most p_deep rows
        -- per queue, only when nothing was found, and only on a pop's first attempt
        -- (queen.pop_sweep_depth): an idle consumer of a large queue pays it once per
        -- request, not once per long-poll re-check.
        EXIT WHEN FOUND OR v_near = 0 OR coalesce(p_deep, 0) <= v_sweep
               OR NOT EXISTS (SELECT 1 FROM unnest(p_qids) AS t(qid)
                               WHERE (SELECT count(*) FROM (SELECT 1 FROM queen.partition_lookup z
                                                             WHERE z.queue_id = t.qid LIMIT 257) k) > 256);
        v_near := 0;
        v_sweep := p_deep;
        v_rand := queen.pop_sweep_start();
    END LOOP;
END $$;

-- Takes the try-lock of (p_pid, p_group) (never blocks on a busy pair) and
-- re-reads the cursor row under it (fresh snapshot). ok is false when the lock
-- is busy or a live lease holds the partition; else (cur_ts, cur_id) is the
-- position to read after (p_cur_ts, the subscription start, without a cursor).
-- The lock, once taken, is held to the end of the transaction either way.
CREATE OR REPLACE FUNCTION queen.pop_lock(p_pid uuid, p_group text, p_now timestamptz,
    p_cur_ts timestamptz, OUT ok boolean, OUT cur_ts timestamptz, OUT cur_id uuid)
LANGUAGE plpgsql AS $$
DECLARE
    v_pc record;
BEGIN
    ok := false;
    IF NOT pg_try_advisory_xact_lock(queen.lock_key(p_pid, p_group)) THEN
        RETURN;
    END IF;
    SELECT x.lease_expires_at, x.last_consumed_created_at, x.last_consumed_id
      INTO v_pc
      FROM queen.partition_consumers x
     WHERE x.partition_id = p_pid AND x.consumer_group = p_group;
    IF FOUND THEN
        IF v_pc.lease_expires_at IS NOT NULL AND v_pc.lease_expires_at > p_now THEN
            RETURN;
        END IF;
        IF v_pc.last_consumed_created_at IS NOT NULL THEN
            cur_ts := v_pc.last_consumed_created_at;
            cur_id := v_pc.last_consumed_id;
        ELSE
            cur_ts := p_cur_ts;
            cur_id := '00000000-0000-0000-0000-000000000000';
        END IF;
    ELSE
        cur_ts := p_cur_ts;
        cur_id := '00000000-0000-0000-0000-000000000000';
    END IF;
    ok := true;
END $$;

-- Claims (p_pid, p_group) for the p_n messages just read, the newest of them
-- (p_last_ts, p_last_id): under autoAck the cursor moves onto it (behind when
-- the partition's newest message, (p_newest_ts, p_newest_id), is further),
-- else a lease p_lease is set for p_lease_s seconds (else the queue's
-- p_lease_time, else 60). claimed is false when the row was leased meanwhile
-- (lost the race: skip the partition); expires is the lease end either way.
CREATE OR REPLACE FUNCTION queen.pop_claim(p_pid uuid, p_group text, p_auto boolean,
    p_lease uuid, p_now timestamptz, p_lease_s int, p_lease_time int, p_n int,
    p_last_ts timestamptz, p_last_id uuid, p_newest_ts timestamptz, p_newest_id uuid,
    OUT claimed boolean, OUT expires timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    v_lease_len int := coalesce(p_lease_s, p_lease_time, 60);
    v_exp       timestamptz;
    v_behind    boolean;
    v_ok        boolean;
BEGIN
    IF v_lease_len IS NULL OR v_lease_len <= 0 THEN
        v_lease_len := 60;
    END IF;
    v_exp := p_now + v_lease_len * interval '1 second';
    expires := v_exp;

    IF p_auto THEN
        v_behind := (p_newest_ts, p_newest_id) > (p_last_ts, p_last_id);
        INSERT INTO queen.partition_consumers AS x
               (partition_id, consumer_group, last_consumed_id, last_consumed_created_at,
                total_messages_consumed, total_batches_consumed, last_consumed_at,
                batch_size, acked_count, behind)
        VALUES (p_pid, p_group, p_last_id, p_last_ts, p_n, 1, p_now, p_n, p_n, v_behind)
        ON CONFLICT (partition_id, consumer_group) DO UPDATE SET
            last_consumed_id = EXCLUDED.last_consumed_id,
            last_consumed_created_at = EXCLUDED.last_consumed_created_at,
            total_messages_consumed = x.total_messages_consumed + EXCLUDED.total_messages_consumed,
            total_batches_consumed = x.total_batches_consumed + 1,
            last_consumed_at = EXCLUDED.last_consumed_at,
            lease_expires_at = NULL,
            lease_acquired_at = NULL,
            worker_id = NULL,
            batch_size = EXCLUDED.batch_size,
            acked_count = EXCLUDED.acked_count,
            batch_retry_count = 0,
            behind = EXCLUDED.behind
         WHERE x.lease_expires_at IS NULL OR x.lease_expires_at <= now()
        RETURNING true INTO v_ok;
    ELSE
        -- a leased row is behind (sql/schema/012_hot_leases.sql): pop's suspect
        -- index finds it through that flag once the lease expires
        INSERT INTO queen.partition_consumers AS x
               (partition_id, consumer_group, lease_expires_at, lease_acquired_at, worker_id,
                batch_size, acked_count, behind)
        VALUES (p_pid, p_group, v_exp, p_now, p_lease, p_n, 0, true)
        ON CONFLICT (partition_id, consumer_group) DO UPDATE SET
            lease_expires_at = EXCLUDED.lease_expires_at,
            lease_acquired_at = EXCLUDED.lease_acquired_at,
            worker_id = EXCLUDED.worker_id,
            batch_size = EXCLUDED.batch_size,
            acked_count = 0,
            behind = true
         WHERE x.lease_expires_at IS NULL OR x.lease_expires_at <= now()
        RETURNING true INTO v_ok;
    END IF;
    claimed := v_ok IS NOT NULL;
END $$;

-- ---------------------------------------------------------------------------
-- queen.pop_compact(p)
--   in : as queen.pop (below).
--   out: claimed (partitions claimed), first_queue, first_partition, first_pid,
--        lease_expires (null under autoAck or when nothing was claimed);
--        part_ids[k], part_names[k], queue_names[k] per claimed partition k (1-based);
--        per message i: m_part[i] (its k), m_id, m_txid, m_trace, m_payload, m_sub,
--        m_created, m_enc. Messages of one partition are contiguous, partitions in
--        claim order; within a partition order by (m_created, m_id).
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.pop_compact(p jsonb,
    OUT claimed int, OUT first_queue text, OUT first_partition text, OUT first_pid uuid,
    OUT lease_expires timestamptz,
    OUT part_ids uuid[], OUT part_names text[], OUT queue_names text[],
    OUT m_part int[], OUT m_id uuid[], OUT m_txid text[], OUT m_trace uuid[],
    OUT m_payload jsonb[], OUT m_sub text[], OUT m_created timestamptz[], OUT m_enc boolean[])
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant   uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_queue    text := p->>'queue';
    v_part     text := p->>'partition';
    v_ns       text := p->>'namespace';
    v_task     text := p->>'task';
    v_group    text := coalesce(nullif(p->>'group', ''), '__QUEUE_MODE__');
    v_batch    int  := greatest(coalesce((p->>'batch')::numeric::int, 1), 1);
    v_maxparts int  := least(greatest(coalesce((p->>'partitions')::numeric::int, 1), 1), 64);
    v_lease_s  int  := (p->>'leaseSeconds')::numeric::int;
    v_auto     boolean := coalesce((p->>'autoAck')::boolean, false);
    v_mode     text := lower(coalesce(p->>'subMode', 'all'));
    v_from_txt text := p->>'subFrom';
    v_lease    uuid := coalesce(queen.try_uuid(p->>'leaseId'), gen_random_uuid());
    v_now      timestamptz := now();
    v_qm       boolean;
    v_from     timestamptz;
    v_qids     uuid[];
    v_remaining int;
    v_claimed  int := 0;
    v_has_first boolean := false;
    v_first_q  text;
    v_first_p  text;
    v_first_pid uuid;
    v_first_exp timestamptz;
    c          record;
    v_l        record;
    v_k        record;
    v_cur_ts   timestamptz;
    v_cur_id   uuid;
    v_exp      timestamptz;
    v_n        int;
    v_last_id  uuid;
    v_last_ts  timestamptz;
    b_id       uuid[];
    b_txid     text[];
    b_trace    uuid[];
    b_payload  jsonb[];
    b_sub      text[];
    b_created  timestamptz[];
    b_enc      boolean[];
    v_limit    int;
    v_maxwait  boolean;   -- some target queue sets maxWaitTimeSeconds
    v_oldest   timestamptz := '-infinity';
BEGIN
    v_qm := v_group = '__QUEUE_MODE__';
    IF v_part IS NOT NULL THEN
        v_maxparts := 1;
    END IF;

    -- target queues (priority order matters only for discovery)
    IF v_queue IS NOT NULL THEN
        SELECT array_agg(q.id), bool_or(q.max_wait_time_seconds > 0) INTO v_qids, v_maxwait
          FROM queen.queues q WHERE q.tenant_id = v_tenant AND q.name = v_queue;
    ELSE
        SELECT array_agg(q.id), bool_or(q.max_wait_time_seconds > 0) INTO v_qids, v_maxwait
          FROM queen.queues q
         WHERE q.tenant_id = v_tenant
           AND (v_ns IS NULL OR q.namespace = v_ns)
           AND (v_task IS NULL OR q.task = v_task);
    END IF;

    claimed := 0;
    IF v_qids IS NULL THEN
        RETURN;
    END IF;

    -- subscription registration for named groups (first registration wins)
    IF NOT v_qm THEN
        IF v_from_txt IS NOT NULL AND lower(v_from_txt) = 'now' THEN
            v_mode := 'new';
        END IF;
        IF v_mode IN ('new', 'new-only') THEN
            v_mode := 'new';
            v_from := v_now;
        ELSIF v_mode = 'timestamp' AND v_from_txt IS NOT NULL THEN
            v_from := v_from_txt::timestamptz;
        ELSE
            v_mode := 'all';
            v_from := NULL;
        END IF;
        INSERT INTO queen.consumer_groups_metadata
               (queue_id, consumer_group, queue_name, partition_name, namespace, task,
                subscription_mode, subscription_timestamp)
        SELECT q.id, v_group, q.name, coalesce(v_part, ''), '', '', v_mode, v_from
          FROM queen.queues q
         WHERE q.id = ANY (v_qids)
           AND NOT EXISTS (SELECT 1 FROM queen.consumer_groups_metadata m
                            WHERE m.queue_id = q.id AND m.consumer_group = v_group
                              AND m.partition_name = coalesce(v_part, '')
                              AND m.namespace = '' AND m.task = '')
         ORDER BY q.id
        ON CONFLICT (queue_id, consumer_group, partition_name, namespace, task) DO NOTHING;
    END IF;

    v_remaining := v_batch;
    v_limit := v_maxparts * 4 + 8;

    FOR c IN SELECT * FROM queen.pop_candidates(v_qids, v_part, v_group, v_now, v_limit,
                                                queen.pop_sweep_depth(p)) LOOP
        EXIT WHEN v_claimed >= v_maxparts OR v_remaining <= 0;

        -- the try-lock, then the cursor re-read under it (queen.pop_lock)
        v_l := queen.pop_lock(c.partition_id, v_group, v_now, c.cur_ts);
        CONTINUE WHEN NOT v_l.ok;
        v_cur_ts := v_l.cur_ts;
        v_cur_id := v_l.cur_id;
        IF v_maxwait THEN
            v_oldest := queen.pop_oldest_deliverable(c.qid, v_now);
        END IF;

        -- read after the cursor in position order, skipping delayed messages
        -- (columns, not one jsonb object per message: the broker builds the JSON;
        -- the rows come from the ordered subquery and the broker re-sorts by
        -- (createdAt, id) anyway, so no per-aggregate sort)
        SELECT count(*)::int, array_agg(m.id), array_agg(m.transaction_id),
               array_agg(m.trace_id), array_agg(m.payload), array_agg(m.producer_sub),
               array_agg(m.created_at), array_agg(m.is_encrypted),
               (array_agg(m.id ORDER BY m.created_at DESC, m.id DESC))[1],
               max(m.created_at)
          INTO v_n, b_id, b_txid, b_trace, b_payload, b_sub, b_created, b_enc,
               v_last_id, v_last_ts
          FROM (SELECT * FROM queen.messages mm
                 WHERE mm.partition_id = c.partition_id
                   AND (mm.created_at, mm.id) > (v_cur_ts, v_cur_id)
                   AND mm.created_at >= v_oldest
                   AND (c.delayed_processing <= 0
                        OR mm.created_at <= v_now - c.delayed_processing * interval '1 second')
                 ORDER BY mm.created_at, mm.id
                 LIMIT v_remaining) m;

        -- nothing deliverable: the partition is not claimed (released at once)
        CONTINUE WHEN v_n = 0;

        v_k := queen.pop_claim(c.partition_id, v_group, v_auto, v_lease, v_now, v_lease_s,
                               c.lease_time, v_n, v_last_ts, v_last_id, c.last_ts, c.last_id);
        -- lost the race (leased meanwhile): skip this partition
        CONTINUE WHEN NOT v_k.claimed;
        v_exp := v_k.expires;

        v_claimed := v_claimed + 1;
        part_ids := part_ids || c.partition_id;
        part_names := part_names || c.pname;
        queue_names := queue_names || c.qname;
        m_part := m_part || array_fill(v_claimed, ARRAY[v_n]);
        m_id := m_id || b_id;
        m_txid := m_txid || b_txid;
        m_trace := m_trace || b_trace;
        m_payload := m_payload || b_payload;
        m_sub := m_sub || b_sub;
        m_created := m_created || b_created;
        m_enc := m_enc || b_enc;
        v_remaining := v_remaining - v_n;
        IF NOT v_has_first THEN
            v_has_first := true;
            v_first_q := c.qname;
            v_first_p := c.pname;
            v_first_pid := c.partition_id;
            v_first_exp := CASE WHEN v_auto THEN NULL ELSE v_exp END;
        END IF;
    END LOOP;

    claimed := v_claimed;
    IF v_claimed > 0 THEN
        first_queue := v_first_q;
        first_partition := v_first_p;
        first_pid := v_first_pid;
        lease_expires := v_first_exp;
    END IF;
END $$;

-- ---------------------------------------------------------------------------
-- queen.pop(p): the jsonb contract (sql/README.md, C), built from queen.pop_compact.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.pop(p jsonb) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_build_object(
        'messages', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                       'id', u.id, 'transactionId', u.txid, 'traceId', u.trace,
                       'data', u.payload, 'producerSub', u.sub,
                       'createdAt', queen.iso(u.created), 'partitionId', r.part_ids[u.k],
                       'partition', r.part_names[u.k], 'queue', r.queue_names[u.k],
                       'isEncrypted', u.enc) ORDER BY u.k, u.created, u.id)
              FROM unnest(r.m_part, r.m_id, r.m_txid, r.m_trace, r.m_payload, r.m_sub,
                          r.m_created, r.m_enc) AS u(k, id, txid, trace, payload, sub, created, enc)),
            '[]'::jsonb),
        'partitionsClaimed', r.claimed,
        'queue', r.first_queue,
        'partition', r.first_partition,
        'partitionId', r.first_pid,
        'leaseExpiresAt', queen.iso(r.lease_expires))
      FROM queen.pop_compact(p) r
$$;
