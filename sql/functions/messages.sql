-- Messages: listing, detail, delete, retry from the DLQ, manual move to the DLQ.

-- Messages and dead letters (http-api.md §9): listing with filters and paging,
-- detail, delete, retry/replay from the DLQ, manual move to the DLQ, DLQ delete.
--
-- A message's status is relative to its partition's reference cursor (the
-- queue-mode cursor, else the furthest-behind named group): completed at or
-- before it, dead_letter with a DLQ row, processing after it under a live
-- lease, else pending. Listings read messages per partition through
-- messages_partition_pos_idx within the time window (default: last hour).

-- The reference cursor of a partition: (ts, id, lease live).
CREATE OR REPLACE FUNCTION queen.ref_cursor(p_pid uuid,
    OUT ts timestamptz, OUT id uuid, OUT leased boolean)
LANGUAGE sql STABLE AS $$
    SELECT pc.last_consumed_created_at, pc.last_consumed_id,
           coalesce(pc.lease_expires_at > now(), false)
      FROM queen.partition_consumers pc
     WHERE pc.partition_id = p_pid
     ORDER BY (pc.consumer_group = '__QUEUE_MODE__') DESC,
              pc.last_consumed_created_at NULLS FIRST, pc.last_consumed_id
     LIMIT 1
$$;

-- Status of message (mts, mid) in partition pid.
CREATE OR REPLACE FUNCTION queen.msg_status(p_pid uuid, p_mid uuid, p_mts timestamptz)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM queen.dead_letter_queue d WHERE d.message_id = p_mid)
            THEN 'dead_letter'
        WHEN c.ts IS NOT NULL AND (p_mts, p_mid) <= (c.ts, c.id) THEN 'completed'
        WHEN coalesce(c.leased, false) THEN 'processing'
        ELSE 'pending' END
      FROM (SELECT 1) one LEFT JOIN queen.ref_cursor(p_pid) c ON true
$$;

-- Queue mode of a set of queues: {hasQueueMode, busGroupsCount, type}.
CREATE OR REPLACE FUNCTION queen.queues_mode(p_qids uuid[]) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH g AS (
        SELECT m.consumer_group FROM queen.consumer_groups_metadata m
         WHERE m.queue_id = ANY (p_qids)
        UNION
        SELECT pc.consumer_group FROM queen.partition_lookup pl
          JOIN queen.partition_consumers pc ON pc.partition_id = pl.partition_id
         WHERE pl.queue_id = ANY (p_qids)
    ), s AS (
        SELECT bool_or(consumer_group = '__QUEUE_MODE__') AS qm,
               count(*) FILTER (WHERE consumer_group <> '__QUEUE_MODE__') AS bus FROM g
    )
    SELECT jsonb_build_object('hasQueueMode', coalesce(s.qm, false) OR s.bus = 0,
        'busGroupsCount', s.bus,
        'type', CASE WHEN s.bus = 0 THEN 'queue' WHEN coalesce(s.qm, false) THEN 'hybrid'
                     ELSE 'bus' END)
      FROM s
$$;

-- ---------------------------------------------------------------------------
-- queen.msg_detail(p)  in {tenant, partitionId, transactionId}  out {found, ...}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.msg_detail(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE SET jit = off AS $$
DECLARE
    r record;
BEGIN
    SELECT m.*, pt.name AS pname, q.id AS qid, q.name AS qname, q.namespace AS qns,
           q.task AS qtask, q.lease_time, q.retry_limit, q.retry_delay, q.ttl, q.priority
      INTO r
      FROM queen.messages m
      JOIN queen.partitions pt ON pt.id = m.partition_id
      JOIN queen.queues q ON q.id = pt.queue_id
     WHERE m.partition_id = queen.try_uuid(p->>'partitionId')
       AND m.transaction_id = p->>'transactionId'
       AND q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    IF NOT FOUND THEN
        RETURN jsonb_build_object('found', false);
    END IF;
    RETURN jsonb_build_object('found', true,
        'id', r.id, 'transactionId', r.transaction_id, 'partitionId', r.partition_id,
        'queuePath', r.qname || '/' || r.pname, 'queue', r.qname, 'partition', r.pname,
        'namespace', r.qns, 'task', r.qtask,
        'status', queen.msg_status(r.partition_id, r.id, r.created_at),
        'payload', r.payload, 'data', r.payload, 'isEncrypted', r.is_encrypted,
        'traceId', r.trace_id, 'producerSub', r.producer_sub,
        'createdAt', queen.iso(r.created_at),
        'errorMessage', (SELECT d.error_message FROM queen.dead_letter_queue d
                          WHERE d.message_id = r.id ORDER BY d.failed_at DESC LIMIT 1),
        'retryCount', coalesce((SELECT max(d.retry_count) FROM queen.dead_letter_queue d
                                 WHERE d.message_id = r.id), 0),
        'leaseExpiresAt', (SELECT queen.iso(max(pc.lease_expires_at))
                             FROM queen.partition_consumers pc
                            WHERE pc.partition_id = r.partition_id
                              AND pc.lease_expires_at > now()
                              AND (pc.last_consumed_created_at IS NULL
                                   OR (r.created_at, r.id) > (pc.last_consumed_created_at,
                                                              pc.last_consumed_id))),
        'queueConfig', jsonb_build_object('leaseTime', r.lease_time, 'retryLimit', r.retry_limit,
                                          'retryDelay', r.retry_delay, 'ttl', r.ttl,
                                          'priority', r.priority),
        'mode', queen.queues_mode(ARRAY[r.qid]),
        'consumerGroups', coalesce((SELECT jsonb_agg(jsonb_build_object(
                'name', pc.consumer_group,
                'consumed', pc.last_consumed_created_at IS NOT NULL
                            AND (r.created_at, r.id) <= (pc.last_consumed_created_at,
                                                         pc.last_consumed_id),
                'leaseExpiresAt', CASE WHEN pc.lease_expires_at > now()
                                       THEN queen.iso(pc.lease_expires_at) END)
              ORDER BY pc.consumer_group)
              FROM queen.partition_consumers pc WHERE pc.partition_id = r.partition_id),
            '[]'::jsonb));
END $$;

-- ---------------------------------------------------------------------------
-- queen.msg_delete(p)  in {tenant, partitionId, transactionId}  out {found}
--   DLQ rows and traces cascade; cursors are positions and stay valid.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.msg_delete(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_n int;
BEGIN
    DELETE FROM queen.messages m USING queen.partitions pt, queen.queues q
     WHERE m.partition_id = queen.try_uuid(p->>'partitionId')
       AND m.transaction_id = p->>'transactionId'
       AND pt.id = m.partition_id AND q.id = pt.queue_id
       AND q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN jsonb_build_object('found', v_n > 0);
END $$;

-- ---------------------------------------------------------------------------
-- queen.msg_retry(p)  in {tenant, newId, dlqId | (partitionId, transactionId)}
--   Re-pushes the dead letter's payload into its queue/partition with
--   transaction id 'dlq:<dlq row id>' and deletes the DLQ row (one transaction).
--   out {found, result, queue, partition, consumerGroup, dlqId,
--        originalTransactionId, replayedAs, dlqRowRemoved}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.msg_retry(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    d        record;
    v_res    jsonb;
    v_n      int;
BEGIN
    SELECT x.id AS dlq_id, x.consumer_group, m.transaction_id, m.payload, m.is_encrypted,
           m.trace_id, m.producer_sub, pt.name AS pname, q.name AS qname
      INTO d
      FROM queen.dead_letter_queue x
      JOIN queen.messages m ON m.id = x.message_id
      JOIN queen.partitions pt ON pt.id = x.partition_id
      JOIN queen.queues q ON q.id = pt.queue_id
     WHERE q.tenant_id = v_tenant
       AND CASE WHEN p ? 'dlqId' THEN x.id = queen.try_uuid(p->>'dlqId')
                ELSE x.partition_id = queen.try_uuid(p->>'partitionId')
                     AND m.transaction_id = p->>'transactionId' END
     ORDER BY x.failed_at DESC
     LIMIT 1
     FOR UPDATE OF x;
    IF NOT FOUND THEN
        RETURN jsonb_build_object('found', false);
    END IF;
    v_res := queen.push_items(v_tenant, jsonb_build_array(jsonb_build_object(
        'queue', d.qname, 'partition', d.pname, 'id', p->>'newId',
        'txid', 'dlq:' || d.dlq_id, 'traceId', d.trace_id, 'payload', d.payload,
        'encrypted', d.is_encrypted, 'sub', d.producer_sub))) -> 0;
    DELETE FROM queen.dead_letter_queue x WHERE x.id = d.dlq_id;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN jsonb_build_object('found', true,
        'result', CASE WHEN v_res->>'status' = 'duplicate' THEN 'duplicate' ELSE 'moved' END,
        'queue', d.qname, 'partition', d.pname, 'consumerGroup', d.consumer_group,
        'dlqId', d.dlq_id, 'originalTransactionId', d.transaction_id,
        'replayedAs', jsonb_build_object('index', 0, 'message_id', v_res->'message_id',
            'transaction_id', v_res->'transaction_id', 'queueName', d.qname,
            'status', v_res->'status', 'offset', NULL),
        'dlqRowRemoved', v_n > 0);
END $$;

-- ---------------------------------------------------------------------------
-- queen.msg_to_dlq(p)  in {tenant, partitionId, transactionId}  out {found, rows}
--   A DLQ row for every group whose cursor has not passed the message
--   (queue mode when no group consumes the queue).
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.msg_to_dlq(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    r   record;
    v_n int;
BEGIN
    SELECT m.id, m.created_at, m.partition_id, pt.queue_id INTO r
      FROM queen.messages m
      JOIN queen.partitions pt ON pt.id = m.partition_id
      JOIN queen.queues q ON q.id = pt.queue_id
     WHERE m.partition_id = queen.try_uuid(p->>'partitionId')
       AND m.transaction_id = p->>'transactionId'
       AND q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    IF NOT FOUND THEN
        RETURN jsonb_build_object('found', false);
    END IF;
    INSERT INTO queen.dead_letter_queue (message_id, partition_id, consumer_group, error_message,
                                         retry_count, original_created_at)
    SELECT r.id, r.partition_id, g.grp, 'Moved to DLQ manually', 0, r.created_at
      FROM (SELECT pc.consumer_group AS grp FROM queen.partition_consumers pc
             WHERE pc.partition_id = r.partition_id
               AND (pc.last_consumed_created_at IS NULL
                    OR (r.created_at, r.id) > (pc.last_consumed_created_at, pc.last_consumed_id))
            UNION
            SELECT m.consumer_group FROM queen.consumer_groups_metadata m
             WHERE m.queue_id = r.queue_id
               AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers pc
                                WHERE pc.partition_id = r.partition_id
                                  AND pc.consumer_group = m.consumer_group)
            UNION
            SELECT '__QUEUE_MODE__'
             WHERE NOT EXISTS (SELECT 1 FROM queen.partition_consumers pc
                                WHERE pc.partition_id = r.partition_id)
               AND NOT EXISTS (SELECT 1 FROM queen.consumer_groups_metadata m
                                WHERE m.queue_id = r.queue_id)) g
    ON CONFLICT (message_id, consumer_group) DO NOTHING;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN jsonb_build_object('found', true, 'rows', v_n);
END $$;

-- Whole-queue message listing at scale.
-- Without a status filter or an explicit `to`, the newest-first page of
-- limit+offset = k messages can only come from the k partitions whose newest
-- message (by position: created_at, then id) is newest (every other
-- partition's messages are older than each of theirs), so only those partitions are read, k messages each; `total` is then
-- exact up to queen.msg_count_cap() and reports the cap beyond it (a count of a
-- million-row window on the request path would defeat the page bound).
-- Filtered listings read the whole window as before.

CREATE OR REPLACE FUNCTION queen.msg_count_cap() RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT 10000::bigint $$;

-- Whole-queue message listing, page first. At 1,000,000 messages a version
-- that read limit+offset messages from each of the limit+offset freshest
-- partitions (k² rows: 40,000 for a page of 200) and computed the status, the DLQ check and the row of
-- every one before sorting. Here the k² candidates are read as positions only
-- (partition, created_at, id from messages_partition_pos_idx), sorted, and
-- without a status filter cut to the first limit+offset before anything else is
-- looked at. A status filter reads per-status position ranges
-- (queen.msg_status_candidates); its `total` is capped like the fast path's.

-- Candidates of a status-filtered page: the limit+offset (= k) newest messages
-- of status p_status in the window, as positions, and their count up to
-- queen.msg_count_cap(). A status is a position range of each partition against
-- its reference cursor (completed: at or before it; pending: after it, no live
-- lease; processing: after it, live lease), minus dead-lettered messages; or the
-- DLQ rows (dead_letter). Instead of computing the status of every message of
-- the window (the earlier plan: 23 s, or the statement timeout, at 1,000,000
-- messages), each partition's newest in-range message is found with one index
-- probe (LIMIT 1 + its DLQ rows, which are skipped), only the k partitions with
-- the newest such message are read further (k + DLQ rows each), and the merged
-- candidates are cut to k.
CREATE OR REPLACE FUNCTION queen.msg_status_candidates(p_qids uuid[], p_part text,
    p_status text, p_from timestamptz, p_to timestamptz, p_k int,
    OUT pids uuid[], OUT tss timestamptz[], OUT ids uuid[], OUT total bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_zero uuid := '00000000-0000-0000-0000-000000000000';
BEGIN
    IF p_status = 'dead_letter' THEN
        WITH d AS (
            SELECT DISTINCT m.partition_id AS pid, m.created_at AS ts, m.id
              FROM queen.dead_letter_queue dl
              JOIN queen.partitions pt ON pt.id = dl.partition_id
              JOIN queen.messages m ON m.id = dl.message_id
             WHERE pt.queue_id = ANY (p_qids) AND (p_part IS NULL OR pt.name = p_part)
               AND m.created_at >= p_from AND m.created_at <= p_to
        ), page AS (SELECT * FROM d ORDER BY d.ts DESC, d.id DESC LIMIT p_k)
        SELECT (SELECT array_agg(page.pid) FROM page), (SELECT array_agg(page.ts) FROM page),
               (SELECT array_agg(page.id) FROM page),
               (SELECT count(*) FROM (SELECT 1 FROM d LIMIT queen.msg_count_cap()) z)
          INTO pids, tss, ids, total;
        RETURN;
    END IF;
    WITH cur AS MATERIALIZED (
        -- scope partitions with their reference cursor (-infinity: none; as
        -- queen.ref_cursor, in one pass), lease, newest message and DLQ rows
        SELECT pt.id AS pid, coalesce(c.ts, '-infinity') AS cts, coalesce(c.id, v_zero) AS cid,
               coalesce(c.leased, false) AS leased, pl.last_message_created_at AS lts,
               pl.last_message_id AS lid, coalesce(dq.n, 0) AS nd
          FROM queen.partitions pt
          JOIN queen.partition_lookup pl ON pl.partition_id = pt.id
          LEFT JOIN (
              SELECT DISTINCT ON (pc.partition_id) pc.partition_id, pc.last_consumed_created_at AS ts,
                     pc.last_consumed_id AS id, coalesce(pc.lease_expires_at > now(), false) AS leased
                FROM queen.partition_consumers pc
                JOIN queen.partition_lookup l2 ON l2.partition_id = pc.partition_id
               WHERE l2.queue_id = ANY (p_qids)
               ORDER BY pc.partition_id, (pc.consumer_group = '__QUEUE_MODE__') DESC,
                        pc.last_consumed_created_at NULLS FIRST, pc.last_consumed_id) c
            ON c.partition_id = pt.id
          LEFT JOIN (
              SELECT d.partition_id, count(*) AS n FROM queen.dead_letter_queue d
                JOIN queen.partition_lookup l3 ON l3.partition_id = d.partition_id
               WHERE l3.queue_id = ANY (p_qids) GROUP BY d.partition_id) dq
            ON dq.partition_id = pt.id
         WHERE pt.queue_id = ANY (p_qids) AND (p_part IS NULL OR pt.name = p_part)
    ), scope AS (
        -- quick: the partition's newest message is its newest pending/processing
        -- candidate when it is after the cursor (no DLQ rows to skip, inside `to`)
        SELECT cur.*, (p_status <> 'completed' AND cur.nd = 0 AND cur.lts IS NOT NULL
                       AND cur.lts <= p_to) AS quick
          FROM cur
         WHERE (p_status = 'completed' AND cur.cts > '-infinity')
            OR (p_status <> 'completed' AND (p_status = 'processing') = cur.leased)
    ), best AS (
        SELECT scope.*, b.ts AS bts, b.id AS bid FROM scope
         CROSS JOIN LATERAL (
            SELECT scope.lts AS ts, scope.lid AS id
             WHERE scope.quick AND scope.lts >= p_from
               AND (scope.lts, scope.lid) > (scope.cts, scope.cid)
            UNION ALL
            SELECT x.ts, x.id FROM (
                SELECT r.created_at AS ts, r.id FROM (
                    SELECT mm.created_at, mm.id FROM queen.messages mm
                     WHERE mm.partition_id = scope.pid
                       AND mm.created_at >= p_from AND mm.created_at <= p_to
                       AND ((p_status = 'completed' AND (mm.created_at, mm.id) <= (scope.cts, scope.cid))
                         OR (p_status <> 'completed' AND (mm.created_at, mm.id) > (scope.cts, scope.cid)))
                     ORDER BY mm.created_at DESC, mm.id DESC LIMIT 1 + scope.nd) r
                 WHERE scope.nd = 0 OR NOT EXISTS (SELECT 1 FROM queen.dead_letter_queue d
                                                    WHERE d.message_id = r.id)
                 ORDER BY r.created_at DESC, r.id DESC LIMIT 1) x
             WHERE NOT scope.quick) b
    ), top AS (
        SELECT * FROM best ORDER BY best.bts DESC, best.bid DESC LIMIT p_k
    ), cand AS (
        SELECT top.pid, r.created_at AS ts, r.id FROM top
         CROSS JOIN LATERAL (
            SELECT mm.created_at, mm.id FROM queen.messages mm
             WHERE mm.partition_id = top.pid
               AND mm.created_at >= p_from AND mm.created_at <= p_to
               AND ((p_status = 'completed' AND (mm.created_at, mm.id) <= (top.cts, top.cid))
                 OR (p_status <> 'completed' AND (mm.created_at, mm.id) > (top.cts, top.cid)))
             ORDER BY mm.created_at DESC, mm.id DESC LIMIT p_k + top.nd) r
         WHERE top.nd = 0 OR NOT EXISTS (SELECT 1 FROM queen.dead_letter_queue d
                                          WHERE d.message_id = r.id)
    ), page AS (SELECT * FROM cand ORDER BY cand.ts DESC, cand.id DESC LIMIT p_k)
    SELECT (SELECT array_agg(page.pid) FROM page), (SELECT array_agg(page.ts) FROM page),
           (SELECT array_agg(page.id) FROM page),
           (SELECT count(*) FROM (
                SELECT 1 FROM scope CROSS JOIN LATERAL (
                    SELECT mm.id FROM queen.messages mm
                     WHERE mm.partition_id = scope.pid
                       AND mm.created_at >= p_from AND mm.created_at <= p_to
                       AND ((p_status = 'completed' AND (mm.created_at, mm.id) <= (scope.cts, scope.cid))
                         OR (p_status <> 'completed' AND (mm.created_at, mm.id) > (scope.cts, scope.cid)))) r
                 WHERE scope.nd = 0 OR NOT EXISTS (SELECT 1 FROM queen.dead_letter_queue d
                                                    WHERE d.message_id = r.id)
                 LIMIT queen.msg_count_cap()) z)
      INTO pids, tss, ids, total;
    pids := coalesce(pids, '{}'); tss := coalesce(tss, '{}'); ids := coalesce(ids, '{}');
END $$;

CREATE OR REPLACE FUNCTION queen.msg_list(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE SET jit = off AS $$
DECLARE
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_to     timestamptz := coalesce((p->>'to')::timestamptz, now());
    v_from   timestamptz := coalesce((p->>'from')::timestamptz,
                                     least(now(), v_to) - interval '1 hour');
    v_status text := p->>'status';
    v_qids   uuid[];
    v_total  bigint;
    v_msgs   jsonb;
    v_k      int := greatest((p->>'limit')::int, 0) + greatest((p->>'offset')::int, 0);
    -- newest-first page without a status filter or an explicit end: only the
    -- k partitions with the newest last message can hold the k newest messages
    v_fast   boolean := v_status IS NULL AND p->>'to' IS NULL;
    v_cut    timestamptz;
    v_cut_id uuid;
    -- status filter: the page's candidate positions (see queen.msg_status_candidates)
    v_cp     uuid[];
    v_cts    timestamptz[];
    v_cid    uuid[];
BEGIN
    SELECT array_agg(q.id) INTO v_qids FROM queen.queues q
     WHERE q.tenant_id = v_tenant
       AND (p->>'queue' IS NULL OR q.name = p->>'queue')
       AND (p->>'namespace' IS NULL OR q.namespace = p->>'namespace')
       AND (p->>'task' IS NULL OR q.task = p->>'task');
    v_qids := coalesce(v_qids, '{}');
    IF v_fast THEN
        -- The slot bound is implied by "last_message_created_at >= v_from" (same rows) and
        -- makes it a range of partition_lookup_slot_idx; ordering by the slot first (it
        -- is monotone in the time, so the order is the same) lets an incremental sort stop
        -- after the newest slots that hold k partitions.
        SELECT x.ts, x.id INTO v_cut, v_cut_id FROM (
            SELECT pl.last_message_created_at AS ts, pl.last_message_id AS id
              FROM queen.partition_lookup pl JOIN queen.partitions pt ON pt.id = pl.partition_id
             WHERE pl.queue_id = ANY (v_qids) AND pl.last_message_created_at >= v_from
               AND pl.last_message_slot >= queen.lookup_slot(v_from)
               AND (p->>'partition' IS NULL OR pt.name = p->>'partition')
             ORDER BY pl.last_message_slot DESC, pl.last_message_created_at DESC,
                      pl.last_message_id DESC
             OFFSET greatest(v_k - 1, 0) LIMIT 1) x;
        IF v_cut IS NULL THEN  -- fewer than k partitions: all of them
            v_cut := '-infinity';
            v_cut_id := '00000000-0000-0000-0000-000000000000';
        END IF;
        -- total: exact up to queen.msg_count_cap(), then that cap
        SELECT count(*) INTO v_total FROM (
            SELECT 1 FROM queen.partition_lookup pl
              JOIN queen.partitions pt ON pt.id = pl.partition_id
             CROSS JOIN LATERAL (SELECT 1 FROM queen.messages mm
                                  WHERE mm.partition_id = pl.partition_id
                                    AND mm.created_at >= v_from AND mm.created_at <= v_to) m
             WHERE pl.queue_id = ANY (v_qids) AND pl.last_message_created_at >= v_from
               AND pl.last_message_slot >= queen.lookup_slot(v_from)
               AND (p->>'partition' IS NULL OR pt.name = p->>'partition')
             LIMIT queen.msg_count_cap()) z;
    END IF;
    IF v_status IS NOT NULL THEN
        SELECT c.pids, c.tss, c.ids, c.total INTO v_cp, v_cts, v_cid, v_total
          FROM queen.msg_status_candidates(v_qids, p->>'partition', v_status, v_from, v_to, v_k) c;
    END IF;
    WITH parts AS (
        SELECT pt.id AS pid, pt.name AS pname, q.id AS qid, q.name AS qname, q.namespace,
               q.task, q.priority
          FROM queen.partitions pt JOIN queen.queues q ON q.id = pt.queue_id
         WHERE q.id = ANY (v_qids) AND (p->>'partition' IS NULL OR pt.name = p->>'partition')
           AND (v_status IS NULL OR pt.id = ANY (v_cp))
           AND (NOT v_fast OR EXISTS (SELECT 1 FROM queen.partition_lookup pl
                                       WHERE pl.partition_id = pt.id
                                         AND pl.last_message_created_at >= v_from
                                         AND (pl.last_message_created_at, pl.last_message_id)
                                             >= (v_cut, v_cut_id)))
    ), groups AS (
        SELECT g.qid, count(*) AS n FROM (
            SELECT m.queue_id AS qid, m.consumer_group FROM queen.consumer_groups_metadata m
             WHERE m.queue_id = ANY (v_qids) AND m.consumer_group <> '__QUEUE_MODE__'
            UNION
            SELECT pl.queue_id, pc.consumer_group FROM queen.partition_lookup pl
              JOIN queen.partition_consumers pc ON pc.partition_id = pl.partition_id
             WHERE pl.queue_id = ANY (v_qids) AND pc.consumer_group <> '__QUEUE_MODE__') g
         GROUP BY g.qid
    ), pos AS (
        -- positions only (index range per partition, no payload, no status)
        SELECT m.id, m.created_at, parts.*
          FROM parts
          CROSS JOIN LATERAL (SELECT mm.id, mm.created_at FROM queen.messages mm
                               WHERE mm.partition_id = parts.pid
                                 AND mm.created_at >= v_from AND mm.created_at <= v_to
                               ORDER BY mm.created_at DESC, mm.id DESC
                               LIMIT CASE WHEN v_fast THEN v_k END) m
         WHERE v_status IS NULL
        UNION ALL
        SELECT u.id, u.created_at, parts.*
          FROM unnest(v_cp, v_cts, v_cid) AS u(pid, created_at, id)
          JOIN parts ON parts.pid = u.pid
         WHERE v_status IS NOT NULL
    ), pre AS (
        -- without a status filter only the first limit+offset positions can be on
        -- the page: status, DLQ and row reads are done for those alone
        SELECT * FROM pos ORDER BY pos.created_at DESC, pos.id DESC
         LIMIT CASE WHEN v_status IS NULL THEN v_k END
    ), rows AS (
        SELECT pre.id, m.transaction_id, m.partition_id, m.trace_id, m.producer_sub,
               pre.created_at, pre.pid, pre.pname, pre.qid, pre.qname, pre.namespace,
               pre.task, pre.priority, c.ts AS cts, c.id AS cid, c.leased,
               EXISTS (SELECT 1 FROM queen.dead_letter_queue d WHERE d.message_id = pre.id) AS dead
          FROM pre
          JOIN queen.messages m ON m.partition_id = pre.pid AND m.created_at = pre.created_at
                               AND m.id = pre.id
          LEFT JOIN LATERAL queen.ref_cursor(pre.pid) c ON true
    ), st AS (
        SELECT rows.*, CASE WHEN dead THEN 'dead_letter'
                            WHEN cts IS NOT NULL AND (created_at, id) <= (cts, cid) THEN 'completed'
                            WHEN coalesce(leased, false) THEN 'processing'
                            ELSE 'pending' END AS status
          FROM rows
    ), f AS (
        SELECT * FROM st WHERE v_status IS NULL OR st.status = v_status
    ), page AS (
        SELECT * FROM f ORDER BY f.created_at DESC, f.id DESC
         LIMIT (p->>'limit')::int OFFSET (p->>'offset')::int
    )
    SELECT CASE WHEN v_status IS NULL AND NOT v_fast THEN (SELECT count(*) FROM pos)
                ELSE v_total END,
           coalesce((SELECT jsonb_agg(jsonb_build_object(
                'id', x.id, 'transactionId', x.transaction_id, 'partitionId', x.partition_id,
                'queuePath', x.qname || '/' || x.pname, 'queue', x.qname, 'partition', x.pname,
                'namespace', x.namespace, 'task', x.task, 'status', x.status,
                'queueStatus', x.status,
                'busStatus', jsonb_build_object(
                    'consumedBy', (SELECT count(*) FROM queen.partition_consumers pc
                                    WHERE pc.partition_id = x.pid
                                      AND pc.consumer_group <> '__QUEUE_MODE__'
                                      AND pc.last_consumed_created_at IS NOT NULL
                                      AND (x.created_at, x.id) <= (pc.last_consumed_created_at,
                                                                   pc.last_consumed_id)),
                    'totalGroups', coalesce((SELECT g.n FROM groups g WHERE g.qid = x.qid), 0)),
                'traceId', x.trace_id, 'producerSub', x.producer_sub,
                'queuePriority', x.priority, 'createdAt', queen.iso(x.created_at),
                'leaseExpiresAt', CASE WHEN x.status = 'processing' THEN
                    (SELECT queen.iso(max(pc.lease_expires_at)) FROM queen.partition_consumers pc
                      WHERE pc.partition_id = x.pid) END)
              ORDER BY x.created_at DESC, x.id DESC) FROM page x), '[]'::jsonb)
      INTO v_total, v_msgs;
    RETURN jsonb_build_object('messages', v_msgs, 'mode', queen.queues_mode(v_qids),
                              'total', v_total);
END $$;
