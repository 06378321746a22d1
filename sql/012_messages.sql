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
-- queen.msg_list(p)  in {tenant, queue, partition, namespace, task, status,
--                        from, to, limit, offset}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.msg_list(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_to     timestamptz := coalesce((p->>'to')::timestamptz, now());
    v_from   timestamptz := coalesce((p->>'from')::timestamptz,
                                     least(now(), v_to) - interval '1 hour');
    v_status text := p->>'status';
    v_qids   uuid[];
    v_total  bigint;
    v_msgs   jsonb;
BEGIN
    SELECT array_agg(q.id) INTO v_qids FROM queen.queues q
     WHERE q.tenant_id = v_tenant
       AND (p->>'queue' IS NULL OR q.name = p->>'queue')
       AND (p->>'namespace' IS NULL OR q.namespace = p->>'namespace')
       AND (p->>'task' IS NULL OR q.task = p->>'task');
    v_qids := coalesce(v_qids, '{}');
    WITH parts AS (
        SELECT pt.id AS pid, pt.name AS pname, q.id AS qid, q.name AS qname, q.namespace,
               q.task, q.priority
          FROM queen.partitions pt JOIN queen.queues q ON q.id = pt.queue_id
         WHERE q.id = ANY (v_qids) AND (p->>'partition' IS NULL OR pt.name = p->>'partition')
    ), groups AS (
        SELECT g.qid, count(*) AS n FROM (
            SELECT m.queue_id AS qid, m.consumer_group FROM queen.consumer_groups_metadata m
             WHERE m.queue_id = ANY (v_qids) AND m.consumer_group <> '__QUEUE_MODE__'
            UNION
            SELECT pl.queue_id, pc.consumer_group FROM queen.partition_lookup pl
              JOIN queen.partition_consumers pc ON pc.partition_id = pl.partition_id
             WHERE pl.queue_id = ANY (v_qids) AND pc.consumer_group <> '__QUEUE_MODE__') g
         GROUP BY g.qid
    ), rows AS (
        SELECT m.id, m.transaction_id, m.partition_id, m.trace_id, m.producer_sub,
               m.created_at, parts.*, c.ts AS cts, c.id AS cid, c.leased,
               EXISTS (SELECT 1 FROM queen.dead_letter_queue d WHERE d.message_id = m.id) AS dead
          FROM parts
          LEFT JOIN LATERAL queen.ref_cursor(parts.pid) c ON true
          CROSS JOIN LATERAL (SELECT mm.* FROM queen.messages mm
                               WHERE mm.partition_id = parts.pid
                                 AND mm.created_at >= v_from AND mm.created_at <= v_to) m
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
    SELECT (SELECT count(*) FROM f),
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

-- ---------------------------------------------------------------------------
-- queen.msg_detail(p)  in {tenant, partitionId, transactionId}  out {found, ...}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.msg_detail(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
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

-- ---------------------------------------------------------------------------
-- queen.dlq_delete(p)  in {tenant, queue, consumerGroup|null}  out {found, deleted}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.dlq_delete(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_qid uuid;
    v_n   int;
BEGIN
    SELECT q.id INTO v_qid FROM queen.queues q
     WHERE q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
       AND q.name = p->>'queue';
    IF v_qid IS NULL THEN
        RETURN jsonb_build_object('found', false);
    END IF;
    DELETE FROM queen.dead_letter_queue d USING queen.partitions pt
     WHERE pt.id = d.partition_id AND pt.queue_id = v_qid
       AND (p->>'consumerGroup' IS NULL OR d.consumer_group = p->>'consumerGroup');
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN jsonb_build_object('found', true, 'deleted', v_n);
END $$;
