-- Whole-queue message listing, page first (replaces queen.msg_list of sql/018;
-- same answer). At 1,000,000 messages the 018 version read limit+offset
-- messages from each of the limit+offset freshest partitions (k² rows: 40,000
-- for a page of 200) and computed the status, the DLQ check and the row of
-- every one before sorting. Here the k² candidates are read as positions only
-- (partition, created_at, id from messages_partition_pos_idx), sorted, and
-- without a status filter cut to the first limit+offset before anything else is
-- looked at; with a status filter every candidate still needs its status.

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
    v_k      int := greatest((p->>'limit')::int, 0) + greatest((p->>'offset')::int, 0);
    -- newest-first page without a status filter or an explicit end: only the
    -- k partitions with the newest last message can hold the k newest messages
    v_fast   boolean := v_status IS NULL AND p->>'to' IS NULL;
    v_cut    timestamptz;
    v_cut_id uuid;
BEGIN
    SELECT array_agg(q.id) INTO v_qids FROM queen.queues q
     WHERE q.tenant_id = v_tenant
       AND (p->>'queue' IS NULL OR q.name = p->>'queue')
       AND (p->>'namespace' IS NULL OR q.namespace = p->>'namespace')
       AND (p->>'task' IS NULL OR q.task = p->>'task');
    v_qids := coalesce(v_qids, '{}');
    IF v_fast THEN
        SELECT x.ts, x.id INTO v_cut, v_cut_id FROM (
            SELECT pl.last_message_created_at AS ts, pl.last_message_id AS id
              FROM queen.partition_lookup pl JOIN queen.partitions pt ON pt.id = pl.partition_id
             WHERE pl.queue_id = ANY (v_qids) AND pl.last_message_created_at >= v_from
               AND (p->>'partition' IS NULL OR pt.name = p->>'partition')
             ORDER BY pl.last_message_created_at DESC, pl.last_message_id DESC
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
               AND (p->>'partition' IS NULL OR pt.name = p->>'partition')
             LIMIT queen.msg_count_cap()) z;
    END IF;
    WITH parts AS (
        SELECT pt.id AS pid, pt.name AS pname, q.id AS qid, q.name AS qname, q.namespace,
               q.task, q.priority
          FROM queen.partitions pt JOIN queen.queues q ON q.id = pt.queue_id
         WHERE q.id = ANY (v_qids) AND (p->>'partition' IS NULL OR pt.name = p->>'partition')
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
    SELECT CASE WHEN v_fast THEN v_total WHEN v_status IS NULL THEN (SELECT count(*) FROM pos)
                ELSE (SELECT count(*) FROM f) END,
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

-- Operator reader: no JIT compile (as sql/019).
ALTER FUNCTION queen.msg_list(jsonb) SET jit = off;
