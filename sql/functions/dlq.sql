-- Dead-letter queue: listing and delete.

-- Dead-letter queue listing.

-- ---------------------------------------------------------------------------
-- queen.dlq_list(p)
--   in : {tenant, queue|null, consumerGroup|null, partition|null, from|null, to|null,
--         limit, offset}
--   out: {messages:[{id, transactionId, partitionId, queue, partition, consumerGroup,
--                    errorMessage, retryCount, data, producerSub, createdAt, failedAt,
--                    isEncrypted}],
--         pagination:{limit, offset}, total}      -- ordered by failed_at desc
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.dlq_list(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE SET jit = off AS $$
DECLARE
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_queue  text := p->>'queue';
    v_group  text := p->>'consumerGroup';
    v_part   text := p->>'partition';
    v_from   timestamptz := (p->>'from')::timestamptz;
    v_to     timestamptz := (p->>'to')::timestamptz;
    v_limit  int := greatest(coalesce((p->>'limit')::numeric::int, 100), 0);
    v_offset int := greatest(coalesce((p->>'offset')::numeric::int, 0), 0);
    v_total  bigint;
    v_msgs   jsonb;
BEGIN
    SELECT count(*) INTO v_total
      FROM queen.dead_letter_queue d
      JOIN queen.partitions pt ON pt.id = d.partition_id
      JOIN queen.queues q ON q.id = pt.queue_id
     WHERE q.tenant_id = v_tenant
       AND (v_queue IS NULL OR q.name = v_queue)
       AND (v_group IS NULL OR d.consumer_group = v_group)
       AND (v_part IS NULL OR pt.name = v_part)
       AND (v_from IS NULL OR d.failed_at >= v_from)
       AND (v_to IS NULL OR d.failed_at <= v_to);

    SELECT coalesce(jsonb_agg(x.j ORDER BY x.failed_at DESC, x.id DESC), '[]'::jsonb) INTO v_msgs
      FROM (SELECT d.id, d.failed_at, jsonb_build_object(
                   'id', d.id,
                   'transactionId', m.transaction_id,
                   'partitionId', d.partition_id,
                   'queue', q.name,
                   'partition', pt.name,
                   'consumerGroup', d.consumer_group,
                   'errorMessage', d.error_message,
                   'retryCount', d.retry_count,
                   'data', m.payload,
                   'producerSub', m.producer_sub,
                   'createdAt', queen.iso(coalesce(d.original_created_at, m.created_at)),
                   'failedAt', queen.iso(d.failed_at),
                   'isEncrypted', m.is_encrypted) AS j
              FROM queen.dead_letter_queue d
              JOIN queen.partitions pt ON pt.id = d.partition_id
              JOIN queen.queues q ON q.id = pt.queue_id
              JOIN queen.messages m ON m.id = d.message_id
             WHERE q.tenant_id = v_tenant
               AND (v_queue IS NULL OR q.name = v_queue)
               AND (v_group IS NULL OR d.consumer_group = v_group)
               AND (v_part IS NULL OR pt.name = v_part)
               AND (v_from IS NULL OR d.failed_at >= v_from)
               AND (v_to IS NULL OR d.failed_at <= v_to)
             ORDER BY d.failed_at DESC, d.id DESC
             LIMIT v_limit OFFSET v_offset) x;

    RETURN jsonb_build_object('messages', v_msgs,
                              'pagination', jsonb_build_object('limit', v_limit, 'offset', v_offset),
                              'total', v_total);
END $$;

-- Messages and dead letters (http-api.md §9): listing with filters and paging,
-- detail, delete, retry/replay from the DLQ, manual move to the DLQ, DLQ delete.
--
-- A message's status is relative to its partition's reference cursor (the
-- queue-mode cursor, else the furthest-behind named group): completed at or
-- before it, dead_letter with a DLQ row, processing after it under a live
-- lease, else pending. Listings read messages per partition through
-- messages_partition_pos_idx within the time window (default: last hour).

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
