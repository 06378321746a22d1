-- Whole-queue message listing at scale (replaces queen.msg_list of sql/012).
-- Without a status filter or an explicit `to`, the newest-first page of
-- limit+offset = k messages can only come from the k partitions whose newest
-- message (by position: created_at, then id) is newest (every other
-- partition's messages are older than each of theirs), so only those partitions are read, k messages each; `total` is then
-- exact up to queen.msg_count_cap() and reports the cap beyond it (a count of a
-- million-row window on the request path would defeat the page bound).
-- Filtered listings read the whole window as before.

CREATE OR REPLACE FUNCTION queen.msg_count_cap() RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT 10000::bigint $$;

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
    ), rows AS (
        SELECT m.id, m.transaction_id, m.partition_id, m.trace_id, m.producer_sub,
               m.created_at, parts.*, c.ts AS cts, c.id AS cid, c.leased,
               EXISTS (SELECT 1 FROM queen.dead_letter_queue d WHERE d.message_id = m.id) AS dead
          FROM parts
          LEFT JOIN LATERAL queen.ref_cursor(parts.pid) c ON true
          CROSS JOIN LATERAL (SELECT mm.* FROM queen.messages mm
                               WHERE mm.partition_id = parts.pid
                                 AND mm.created_at >= v_from AND mm.created_at <= v_to
                               ORDER BY mm.created_at DESC, mm.id DESC
                               LIMIT CASE WHEN v_fast THEN v_k END) m
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
    SELECT CASE WHEN v_fast THEN v_total ELSE (SELECT count(*) FROM f) END,
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
