-- Resource catalogue (http-api.md §8): queues, one queue, depth, namespaces,
-- tasks, overview, partitions, delete and clear.
--
-- Counts per partition are index-only ranges over messages_partition_pos_idx
-- (partition_id, created_at, id) relative to the partition's reference cursor:
-- the queue-mode cursor when one exists, else the furthest-behind named group.
-- Paged listings count only the partitions of the page.

-- ---------------------------------------------------------------------------
-- queen.part_counts(pid) -> (total, pending, processing, completed, dead_letter)
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.part_counts(p_pid uuid,
    OUT total bigint, OUT pending bigint, OUT processing bigint,
    OUT completed bigint, OUT dead_letter bigint)
LANGUAGE plpgsql STABLE AS $$
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

-- ---------------------------------------------------------------------------
-- queen.res_queues(p)  in {tenant, namespace|null, task|null}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.res_queues(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('queues', coalesce(jsonb_agg(jsonb_build_object(
               'id', q.id, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
               'priority', q.priority, 'createdAt', queen.iso(q.created_at),
               'partitions', s.parts,
               'messages', jsonb_build_object('total', s.total, 'pending', s.pending,
                                              'processing', s.processing))
             ORDER BY q.name), '[]'::jsonb))
      FROM queen.queues q
      CROSS JOIN LATERAL (
          SELECT count(*) AS parts, coalesce(sum(c.total), 0) AS total,
                 coalesce(sum(c.pending), 0) AS pending,
                 coalesce(sum(c.processing), 0) AS processing
            FROM queen.partition_lookup pl
            CROSS JOIN LATERAL queen.part_counts(pl.partition_id) c
           WHERE pl.queue_id = q.id) s
     WHERE q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
       AND (p->>'namespace' IS NULL OR q.namespace = p->>'namespace')
       AND (p->>'task' IS NULL OR q.task = p->>'task')
$$;

-- ---------------------------------------------------------------------------
-- queen.res_queue(p)  in {tenant, queue}  out {found, ...queue detail}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.res_queue(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    q      record;
    v_parts jsonb;
    v_tot  jsonb;
BEGIN
    SELECT * INTO q FROM queen.queues x
     WHERE x.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
       AND x.name = p->>'queue';
    IF NOT FOUND THEN
        RETURN jsonb_build_object('found', false);
    END IF;
    WITH x AS (
        SELECT pt.id AS pid, pt.name, pt.created_at AS created, c.total, c.pending,
               c.processing, c.completed, c.dead_letter AS dead,
               (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = pt.id
                 ORDER BY m.created_at, m.id LIMIT 1) AS oldest,
               CASE WHEN c.total > 0 THEN pl.last_message_created_at END AS newest
          FROM queen.partitions pt
          JOIN queen.partition_lookup pl ON pl.partition_id = pt.id
          CROSS JOIN LATERAL queen.part_counts(pt.id) c
         WHERE pt.queue_id = q.id)
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'id', x.pid, 'name', x.name, 'createdAt', queen.iso(x.created),
               'stats', queen.counts_json(x.total, x.pending, x.processing, x.completed, x.dead),
               'oldestMessage', queen.iso(x.oldest), 'newestMessage', queen.iso(x.newest))
             ORDER BY x.name), '[]'::jsonb),
           queen.counts_json(coalesce(sum(x.total), 0)::bigint, coalesce(sum(x.pending), 0)::bigint,
                             coalesce(sum(x.processing), 0)::bigint,
                             coalesce(sum(x.completed), 0)::bigint, coalesce(sum(x.dead), 0)::bigint)
      INTO v_parts, v_tot FROM x;
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
        'totals', v_tot);
END $$;

-- ---------------------------------------------------------------------------
-- queen.res_queue_delete(p)  in {tenant, queue}  out {existed}
--   One statement: partitions, lookup rows, cursors, metadata, DLQ rows and
--   traces cascade from queues; messages go by the partitions trigger.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.res_queue_delete(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_n int;
BEGIN
    DELETE FROM queen.queues q
     WHERE q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
       AND q.name = p->>'queue';
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN jsonb_build_object('existed', v_n > 0);
END $$;

-- ---------------------------------------------------------------------------
-- queen.res_depth(p)  in {tenant, queue, group|null}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.res_depth(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_group  text := p->>'group';
    v_qid    uuid;
    v_parts  jsonb;
    v_pend   bigint;
    v_ppend  bigint;
    v_conf   boolean := false;
BEGIN
    SELECT q.id INTO v_qid FROM queen.queues q WHERE q.tenant_id = v_tenant AND q.name = p->>'queue';
    IF v_qid IS NULL THEN
        RETURN jsonb_build_object('found', false);
    END IF;
    IF v_group IS NOT NULL THEN
        SELECT EXISTS (SELECT 1 FROM queen.consumer_groups_metadata m
                        WHERE m.queue_id = v_qid AND m.consumer_group = v_group
                          AND m.conflation IS NOT NULL AND m.conflation <> 'null'::jsonb)
          INTO v_conf;
        WITH s AS (
            SELECT pt.name, coalesce(cs.offset_lag,
                       (SELECT count(*) FROM queen.messages m WHERE m.partition_id = pt.id)) AS pend
              FROM queen.partitions pt
              LEFT JOIN queen.cg_state(v_tenant, v_group, p->>'queue', true) cs
                     ON cs.partition_id = pt.id
             WHERE pt.queue_id = v_qid)
        SELECT coalesce(jsonb_agg(jsonb_build_object('partition', s.name, 'pending', s.pend)
                        ORDER BY s.name), '[]'::jsonb),
               coalesce(sum(s.pend), 0), count(*) FILTER (WHERE s.pend > 0)
          INTO v_parts, v_pend, v_ppend FROM s;
    ELSE
        WITH s AS (
            SELECT pt.name, c.pending + c.processing AS pend
              FROM queen.partitions pt CROSS JOIN LATERAL queen.part_counts(pt.id) c
             WHERE pt.queue_id = v_qid)
        SELECT coalesce(jsonb_agg(jsonb_build_object('partition', s.name, 'pending', s.pend)
                        ORDER BY s.name), '[]'::jsonb),
               coalesce(sum(s.pend), 0), count(*) FILTER (WHERE s.pend > 0)
          INTO v_parts, v_pend, v_ppend FROM s;
    END IF;
    RETURN jsonb_build_object('found', true, 'queue', p->>'queue', 'group', v_group,
        'pending', v_pend, 'partitionsPending', v_ppend, 'conflation', v_conf,
        'effectivePending', CASE WHEN v_conf THEN v_ppend ELSE v_pend END,
        'partitions', v_parts);
END $$;

-- Per-queue sums for the namespace/task/overview catalogues.
CREATE OR REPLACE FUNCTION queen.queue_sums(p_tenant uuid)
RETURNS TABLE (qid uuid, namespace text, task text, parts bigint, total bigint,
               pending bigint, processing bigint, completed bigint, dead bigint)
LANGUAGE sql STABLE AS $$
    SELECT q.id, q.namespace, q.task, count(pl.partition_id),
           coalesce(sum(c.total), 0)::bigint, coalesce(sum(c.pending), 0)::bigint,
           coalesce(sum(c.processing), 0)::bigint, coalesce(sum(c.completed), 0)::bigint,
           coalesce(sum(c.dead_letter), 0)::bigint
      FROM queen.queues q
      LEFT JOIN queen.partition_lookup pl ON pl.queue_id = q.id
      LEFT JOIN LATERAL queen.part_counts(pl.partition_id) c ON pl.partition_id IS NOT NULL
     WHERE q.tenant_id = p_tenant
     GROUP BY q.id, q.namespace, q.task
$$;

-- queen.res_namespaces(p) / queen.res_tasks(p)  in {tenant}
CREATE OR REPLACE FUNCTION queen.res_namespaces(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('namespaces', coalesce(jsonb_agg(jsonb_build_object(
               'namespace', s.namespace, 'queues', s.queues, 'partitions', s.parts,
               'messages', jsonb_build_object('total', s.total, 'pending', s.pending))
             ORDER BY s.namespace), '[]'::jsonb))
      FROM (SELECT x.namespace, count(*) AS queues, sum(x.parts) AS parts,
                   sum(x.total) AS total, sum(x.pending) AS pending
              FROM queen.queue_sums(coalesce(queen.try_uuid(p->>'tenant'),
                                             '00000000-0000-0000-0000-000000000001')) x
             WHERE x.namespace IS NOT NULL GROUP BY x.namespace) s
$$;

CREATE OR REPLACE FUNCTION queen.res_tasks(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('tasks', coalesce(jsonb_agg(jsonb_build_object(
               'task', s.task, 'queues', s.queues, 'partitions', s.parts,
               'messages', jsonb_build_object('total', s.total, 'pending', s.pending))
             ORDER BY s.task), '[]'::jsonb))
      FROM (SELECT x.task, count(*) AS queues, sum(x.parts) AS parts,
                   sum(x.total) AS total, sum(x.pending) AS pending
              FROM queen.queue_sums(coalesce(queen.try_uuid(p->>'tenant'),
                                             '00000000-0000-0000-0000-000000000001')) x
             WHERE x.task IS NOT NULL GROUP BY x.task) s
$$;

-- ---------------------------------------------------------------------------
-- queen.res_overview(p)  in {tenant}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.res_overview(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH t AS (SELECT coalesce(queen.try_uuid(p->>'tenant'),
                               '00000000-0000-0000-0000-000000000001') AS tenant),
    s AS (SELECT x.* FROM t, queen.queue_sums(t.tenant) x),
    l AS (SELECT extract(epoch FROM now() - c.oldest_unconsumed_at) AS tl, c.offset_lag AS ol
            FROM t, queen.cg_state(t.tenant, NULL, NULL, true) c WHERE c.has_lag),
    ing AS (SELECT count(*) AS n FROM t
              JOIN queen.queues q ON q.tenant_id = t.tenant
              JOIN queen.partition_lookup pl ON pl.queue_id = q.id
               AND pl.last_message_created_at > now() - interval '60 seconds'
              JOIN queen.messages m ON m.partition_id = pl.partition_id
               AND m.created_at > now() - interval '60 seconds')
    SELECT jsonb_build_object(
        'queues', (SELECT count(*) FROM s),
        'partitions', (SELECT coalesce(sum(parts), 0) FROM s),
        'namespaces', (SELECT count(DISTINCT namespace) FROM s),
        'tasks', (SELECT count(DISTINCT task) FROM s),
        'messages', (SELECT queen.counts_json(coalesce(sum(total), 0)::bigint,
                         coalesce(sum(pending), 0)::bigint, coalesce(sum(processing), 0)::bigint,
                         coalesce(sum(completed), 0)::bigint, coalesce(sum(dead), 0)::bigint)
                       FROM s),
        'lag', (SELECT jsonb_build_object(
                    'time', jsonb_build_object(
                        'avg', coalesce(round(avg(tl)::numeric, 3), 0),
                        'median', coalesce(round((percentile_cont(0.5) WITHIN GROUP (ORDER BY tl))::numeric, 3), 0),
                        'min', coalesce(round(min(tl)::numeric, 3), 0),
                        'max', coalesce(round(max(tl)::numeric, 3), 0)),
                    'offset', jsonb_build_object(
                        'avg', coalesce(round(avg(ol)::numeric, 3), 0),
                        'median', coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY ol), 0),
                        'min', coalesce(min(ol), 0), 'max', coalesce(max(ol), 0)))
                  FROM l),
        'throughput', jsonb_build_object(
            'ingestedPerSecond', (SELECT round(n / 60.0, 3) FROM ing),
            'processedPerSecond', 0),
        'timestamp', queen.iso(now()),
        'statsAge', 0)
$$;

-- ---------------------------------------------------------------------------
-- queen.res_partitions(p)  in {tenant, queue|null, limit, offset}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.res_partitions(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH base AS (
        SELECT pt.id, pt.name, q.name AS qname, pt.created_at, pt.last_activity
          FROM queen.partitions pt JOIN queen.queues q ON q.id = pt.queue_id
         WHERE q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'),
                                      '00000000-0000-0000-0000-000000000001')
           AND (p->>'queue' IS NULL OR q.name = p->>'queue')
    ), page AS (
        SELECT * FROM base ORDER BY qname, name
         LIMIT (p->>'limit')::int OFFSET (p->>'offset')::int
    )
    SELECT jsonb_build_object(
        'partitions', coalesce((SELECT jsonb_agg(jsonb_build_object(
                'id', x.id, 'name', x.name, 'queue', x.qname,
                'createdAt', queen.iso(x.created_at), 'lastActivity', queen.iso(x.last_activity),
                'messages', jsonb_build_object('total', c.total, 'pending', c.pending + c.processing))
              ORDER BY x.qname, x.name)
              FROM page x CROSS JOIN LATERAL queen.part_counts(x.id) c), '[]'::jsonb),
        'total', (SELECT count(*) FROM base),
        'pagination', jsonb_build_object('limit', (p->>'limit')::int,
                                         'offset', (p->>'offset')::int))
$$;

-- ---------------------------------------------------------------------------
-- queen.queue_clear(p)  in {tenant, queue, partition|null}
--   out {found, partitionFound, deleted}
--   Deletes the messages (DLQ rows and traces cascade) and resets every
--   group's cursor there to the start, releasing leases.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.queue_clear(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    v_qid  uuid;
    v_pids uuid[];
    v_n    int;
BEGIN
    SELECT q.id INTO v_qid FROM queen.queues q
     WHERE q.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
       AND q.name = p->>'queue';
    IF v_qid IS NULL THEN
        RETURN jsonb_build_object('found', false);
    END IF;
    SELECT array_agg(pt.id ORDER BY pt.id) INTO v_pids FROM queen.partitions pt
     WHERE pt.queue_id = v_qid AND (p->>'partition' IS NULL OR pt.name = p->>'partition');
    IF v_pids IS NULL AND p->>'partition' IS NOT NULL THEN
        RETURN jsonb_build_object('found', true, 'partitionFound', false);
    END IF;
    v_pids := coalesce(v_pids, '{}');
    -- serialise with pushes into these partitions (push locks the lookup rows)
    PERFORM 1 FROM queen.partition_lookup pl WHERE pl.partition_id = ANY (v_pids)
     ORDER BY pl.partition_id FOR NO KEY UPDATE;
    DELETE FROM queen.messages m WHERE m.partition_id = ANY (v_pids);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    UPDATE queen.partition_consumers pc SET
        last_consumed_id = '00000000-0000-0000-0000-000000000000',
        last_consumed_created_at = NULL,
        worker_id = NULL, lease_expires_at = NULL, lease_acquired_at = NULL,
        batch_size = 0, acked_count = 0, batch_retry_count = 0, behind = false
     WHERE pc.partition_id = ANY (v_pids);
    RETURN jsonb_build_object('found', true, 'partitionFound', true, 'deleted', v_n);
END $$;
