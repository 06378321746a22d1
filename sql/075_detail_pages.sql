-- Bounded queue detail views (issue 3, scale): GET /api/v1/resources/queues/{q}
-- (replaces queen.res_queue of sql/016) and GET /api/v1/status/queues/{q}
-- (queen.status_queue, replacing the 'queue' view of queen.status_view, sql/017,
-- which the broker no longer calls).
--
-- Decision (the spec lists every partition and is silent on paging): the
-- `partitions` array is one page, ordered by partition name, of at most
-- `limit` partitions (the broker's default 1,000, at most 10,000) from
-- `offset`, read through partitions_queue_name_key; `pagination{limit,
-- offset, total}` says how many partitions the queue has. `totals` still
-- cover the whole queue: they sum queen.pcounts (live for at most 1,000
-- partitions, else the roll-up, whose age is `statsAge`; computed once for
-- both) without building a JSON object or probing messages per partition
-- outside the page, which was the cost of these views at 10,000 partitions
-- (~1-3 s). A queue of at most `limit` partitions answers exactly as
-- before, plus `pagination`.

-- ---------------------------------------------------------------------------
-- queen.res_queue(p)  in {tenant, queue, limit?, offset?}  out {found, ...detail}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.res_queue(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    q        record;
    v_limit  int := greatest(coalesce((p->>'limit')::int, 1000), 1);
    v_offset int := greatest(coalesce((p->>'offset')::int, 0), 0);
    v_parts  jsonb;
    v_total  bigint;
    v_tot    jsonb;
    v_roll   boolean;
BEGIN
    SELECT * INTO q FROM queen.queues x
     WHERE x.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
       AND x.name = p->>'queue';
    IF NOT FOUND THEN
        RETURN jsonb_build_object('found', false);
    END IF;
    v_roll := queen.stats_use_rollup(ARRAY[q.id]);
    WITH c AS MATERIALIZED (
        SELECT * FROM queen.pcounts(ARRAY[q.id], v_roll)
    ), page AS (
        SELECT pt.id, pt.name, pt.created_at FROM queen.partitions pt
         WHERE pt.queue_id = q.id ORDER BY pt.name LIMIT v_limit OFFSET v_offset
    ), x AS (
        SELECT page.id AS pid, page.name, page.created_at AS created, c.total, c.pending,
               c.processing, c.completed, c.dead,
               (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = page.id
                 ORDER BY m.created_at, m.id LIMIT 1) AS oldest,
               CASE WHEN c.total > 0 THEN pl.last_message_created_at END AS newest
          FROM page JOIN c ON c.pid = page.id
          JOIN queen.partition_lookup pl ON pl.partition_id = page.id)
    SELECT (SELECT coalesce(jsonb_agg(jsonb_build_object(
               'id', x.pid, 'name', x.name, 'createdAt', queen.iso(x.created),
               'stats', queen.counts_json(x.total, x.pending, x.processing, x.completed, x.dead),
               'oldestMessage', queen.iso(x.oldest), 'newestMessage', queen.iso(x.newest))
             ORDER BY x.name), '[]'::jsonb) FROM x),
           (SELECT count(*) FROM c),
           (SELECT queen.counts_json(coalesce(sum(c.total), 0)::bigint,
                       coalesce(sum(c.pending), 0)::bigint, coalesce(sum(c.processing), 0)::bigint,
                       coalesce(sum(c.completed), 0)::bigint, coalesce(sum(c.dead), 0)::bigint)
              FROM c)
      INTO v_parts, v_total, v_tot;
    RETURN jsonb_build_object(
        'found', true,
        'id', q.id, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
        'createdAt', queen.iso(q.created_at),
        'config', jsonb_build_object(
            'leaseTime', q.lease_time, 'retryLimit', q.retry_limit, 'retryDelay', q.retry_delay,
            'ttl', q.ttl, 'priority', q.priority, 'maxQueueSize', q.max_queue_size,
            'deadLetterQueue', q.dead_letter_queue, 'dlqAfterMaxRetries', q.dlq_after_max_retries,
            'delayedProcessing', q.delayed_processing, 'windowBuffer', q.window_buffer,
            'retentionSeconds', q.retention_seconds,
            'completedRetentionSeconds', q.completed_retention_seconds,
            'retentionEnabled', q.retention_enabled, 'encryptionEnabled', q.encryption_enabled,
            'maxWaitTimeSeconds', q.max_wait_time_seconds),
        'partitions', v_parts,
        'pagination', jsonb_build_object('limit', v_limit, 'offset', v_offset, 'total', v_total),
        'totals', v_tot,
        'statsAge', queen.stats_age(ARRAY[q.id], v_roll));
END $$;

-- ---------------------------------------------------------------------------
-- queen.status_queue(p)  in {tenant, queue, limit?, offset?}
--   out {found, queue{...}, partitions[page], pagination, totals, statsAge}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.status_queue(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    q        record;
    v_limit  int := greatest(coalesce((p->>'limit')::int, 1000), 1);
    v_offset int := greatest(coalesce((p->>'offset')::int, 0), 0);
    v_parts  jsonb;
    v_total  bigint;
    v_tot    jsonb;
    v_roll   boolean;
BEGIN
    SELECT * INTO q FROM queen.queues x
     WHERE x.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
       AND x.name = p->>'queue';
    IF NOT FOUND THEN
        RETURN jsonb_build_object('found', false);
    END IF;
    v_roll := queen.stats_use_rollup(ARRAY[q.id]);
    WITH c AS MATERIALIZED (
        SELECT * FROM queen.pcounts(ARRAY[q.id], v_roll)
    ), page AS (
        SELECT pt.id, pt.name, pt.created_at, pt.last_activity FROM queen.partitions pt
         WHERE pt.queue_id = q.id ORDER BY pt.name LIMIT v_limit OFFSET v_offset
    ), x AS (
        SELECT page.*,
               queen.counts_json(c.total, c.pending, c.processing, c.completed, c.dead) AS j,
               (SELECT jsonb_build_object(
                           'totalConsumed', coalesce(sum(pc.total_messages_consumed), 0),
                           'batchesConsumed', coalesce(sum(pc.total_batches_consumed), 0))
                  FROM queen.partition_consumers pc WHERE pc.partition_id = page.id) AS cur
          FROM page JOIN c ON c.pid = page.id)
    SELECT (SELECT coalesce(jsonb_agg(jsonb_build_object(
               'id', x.id, 'name', x.name, 'createdAt', queen.iso(x.created_at),
               'messages', x.j, 'stats', x.j, 'cursor', x.cur,
               'lastActivity', queen.iso(x.last_activity)) ORDER BY x.name), '[]'::jsonb) FROM x),
           (SELECT count(*) FROM c),
           (SELECT queen.counts_json(coalesce(sum(c.total), 0)::bigint,
                       coalesce(sum(c.pending), 0)::bigint, coalesce(sum(c.processing), 0)::bigint,
                       coalesce(sum(c.completed), 0)::bigint, coalesce(sum(c.dead), 0)::bigint)
              FROM c)
      INTO v_parts, v_total, v_tot;
    RETURN jsonb_build_object(
        'found', true,
        'queue', jsonb_build_object(
            'id', q.id, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
            'priority', q.priority, 'createdAt', queen.iso(q.created_at),
            'config', jsonb_build_object(
                'leaseTime', q.lease_time, 'retryLimit', q.retry_limit,
                'retryDelay', q.retry_delay, 'ttl', q.ttl, 'maxQueueSize', q.max_queue_size,
                'deadLetterQueue', q.dead_letter_queue)),
        'partitions', v_parts,
        'pagination', jsonb_build_object('limit', v_limit, 'offset', v_offset, 'total', v_total),
        'totals', v_tot,
        'statsAge', queen.stats_age(ARRAY[q.id], v_roll));
END $$;

-- Operator readers run millisecond queries: no JIT compile (as sql/019).
ALTER FUNCTION queen.res_queue(jsonb) SET jit = off;
ALTER FUNCTION queen.status_queue(jsonb) SET jit = off;
