-- Catalogue readers over the roll-up (replaces the live-only versions of
-- sql/011 and queen.cg_lagging of sql/010). A scope of at most
-- queen.stats_live_max_partitions() partitions (and a small last roll-up) is
-- counted live, exactly as before; a larger one reads queen.partition_stats
-- (sql/015), whose age the overview reports as statsAge.

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

-- Per-queue sums (namespaces, tasks, overview, queues list).
CREATE OR REPLACE FUNCTION queen.queue_sums(p_tenant uuid)
RETURNS TABLE (qid uuid, namespace text, task text, parts bigint, total bigint,
               pending bigint, processing bigint, completed bigint, dead bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_qids uuid[] := queen.tenant_qids(p_tenant, NULL, NULL);
    v_roll boolean := queen.stats_use_rollup(v_qids);
BEGIN
    RETURN QUERY
    SELECT q.id, q.namespace, q.task, count(c.pid),
           coalesce(sum(c.total), 0)::bigint, coalesce(sum(c.pending), 0)::bigint,
           coalesce(sum(c.processing), 0)::bigint, coalesce(sum(c.completed), 0)::bigint,
           coalesce(sum(c.dead), 0)::bigint
      FROM queen.queues q
      LEFT JOIN queen.pcounts(v_qids, v_roll) c ON c.qid = q.id
     WHERE q.id = ANY (v_qids)
     GROUP BY q.id, q.namespace, q.task;
END $$;

-- ---------------------------------------------------------------------------
-- queen.res_queues(p)  in {tenant, namespace|null, task|null}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.res_queues(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_qids uuid[] := queen.tenant_qids(
        coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001'),
        p->>'namespace', p->>'task');
    v_roll boolean := queen.stats_use_rollup(v_qids);
BEGIN
    RETURN (
    WITH s AS (
        SELECT c.qid, count(*) AS parts, sum(c.total)::bigint AS total,
               sum(c.pending)::bigint AS pending, sum(c.processing)::bigint AS processing
          FROM queen.pcounts(v_qids, v_roll) c GROUP BY c.qid)
    SELECT jsonb_build_object('queues', coalesce(jsonb_agg(jsonb_build_object(
               'id', q.id, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
               'priority', q.priority, 'createdAt', queen.iso(q.created_at),
               'partitions', coalesce(s.parts, 0),
               'messages', jsonb_build_object('total', coalesce(s.total, 0),
                                              'pending', coalesce(s.pending, 0),
                                              'processing', coalesce(s.processing, 0)))
             ORDER BY q.name), '[]'::jsonb),
           'statsAge', queen.stats_age(v_qids, v_roll))
      FROM queen.queues q LEFT JOIN s ON s.qid = q.id
     WHERE q.id = ANY (v_qids));
END $$;

-- ---------------------------------------------------------------------------
-- queen.res_queue(p)  in {tenant, queue}  out {found, ...queue detail}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.res_queue(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    q       record;
    v_parts jsonb;
    v_tot   jsonb;
    v_roll  boolean;
BEGIN
    SELECT * INTO q FROM queen.queues x
     WHERE x.tenant_id = coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001')
       AND x.name = p->>'queue';
    IF NOT FOUND THEN
        RETURN jsonb_build_object('found', false);
    END IF;
    v_roll := queen.stats_use_rollup(ARRAY[q.id]);
    WITH x AS (
        SELECT pt.id AS pid, pt.name, pt.created_at AS created, c.total, c.pending,
               c.processing, c.completed, c.dead,
               (SELECT m.created_at FROM queen.messages m WHERE m.partition_id = pt.id
                 ORDER BY m.created_at, m.id LIMIT 1) AS oldest,
               CASE WHEN c.total > 0 THEN pl.last_message_created_at END AS newest
          FROM queen.pcounts(ARRAY[q.id], v_roll) c
          JOIN queen.partitions pt ON pt.id = c.pid
          JOIN queen.partition_lookup pl ON pl.partition_id = c.pid)
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
        'totals', v_tot,
        'statsAge', queen.stats_age(ARRAY[q.id], v_roll));
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
    v_known  boolean;
BEGIN
    SELECT q.id INTO v_qid FROM queen.queues q WHERE q.tenant_id = v_tenant AND q.name = p->>'queue';
    IF v_qid IS NULL THEN
        RETURN jsonb_build_object('found', false);
    END IF;
    IF NOT queen.stats_use_rollup(ARRAY[v_qid]) THEN
        -- small queue: the exact live figures of sql/011
        RETURN queen.res_depth_live(p);
    END IF;
    IF v_group IS NOT NULL THEN
        SELECT EXISTS (SELECT 1 FROM queen.consumer_groups_metadata m
                        WHERE m.queue_id = v_qid AND m.consumer_group = v_group
                          AND m.conflation IS NOT NULL AND m.conflation <> 'null'::jsonb)
          INTO v_conf;
        v_known := EXISTS (SELECT 1 FROM queen.consumer_groups_metadata m
                            WHERE m.queue_id = v_qid AND m.consumer_group = v_group)
                   OR EXISTS (SELECT 1 FROM queen.partition_consumers pc
                                JOIN queen.partition_lookup pl ON pl.partition_id = pc.partition_id
                               WHERE pc.consumer_group = v_group AND pl.queue_id = v_qid);
    END IF;
    WITH s AS (
        SELECT pt.name,
               CASE WHEN v_group IS NULL THEN coalesce(ps.after_ref, 0)
                    WHEN v_known THEN coalesce((ps.groups->v_group->>'lag')::bigint, 0)
                    ELSE coalesce(ps.total, 0) END AS pend
          FROM queen.partitions pt
          LEFT JOIN queen.partition_stats ps ON ps.partition_id = pt.id
         WHERE pt.queue_id = v_qid)
    SELECT coalesce(jsonb_agg(jsonb_build_object('partition', s.name, 'pending', s.pend)
                    ORDER BY s.name), '[]'::jsonb),
           coalesce(sum(s.pend), 0), count(*) FILTER (WHERE s.pend > 0)
      INTO v_parts, v_pend, v_ppend FROM s;
    RETURN jsonb_build_object('found', true, 'queue', p->>'queue', 'group', v_group,
        'pending', v_pend, 'partitionsPending', v_ppend, 'conflation', v_conf,
        'effectivePending', CASE WHEN v_conf THEN v_ppend ELSE v_pend END,
        'partitions', v_parts, 'statsAge', queen.stats_age(ARRAY[v_qid], true));
END $$;

-- ---------------------------------------------------------------------------
-- queen.res_overview(p)  in {tenant}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.res_overview(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_qids   uuid[] := queen.tenant_qids(v_tenant, NULL, NULL);
    v_roll   boolean := queen.stats_use_rollup(v_qids);
    v_r      jsonb;
BEGIN
    IF NOT v_roll THEN
        RETURN queen.res_overview_live(p);
    END IF;
    WITH s AS (SELECT x.* FROM queen.queue_sums(v_tenant) x),
    l AS (SELECT extract(epoch FROM now() - (e.value->>'oldest')::timestamptz) AS tl,
                 (e.value->>'lag')::bigint AS ol
            FROM queen.partition_stats ps, jsonb_each(ps.groups) e
           WHERE ps.queue_id = ANY (v_qids)),
    th AS (SELECT coalesce(sum((st.details->>'ingestedPerSecond')::numeric), 0) AS ing,
                  coalesce(sum((st.details->>'processedPerSecond')::numeric), 0) AS prc
             FROM queen.stats st WHERE st.stat_type = 'queue' AND st.queue_id = ANY (v_qids))
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
        'throughput', (SELECT jsonb_build_object('ingestedPerSecond', th.ing,
                                                 'processedPerSecond', th.prc) FROM th),
        'timestamp', queen.iso(now()),
        'statsAge', queen.stats_age(v_qids, true))
      INTO v_r;
    RETURN v_r;
END $$;

-- ---------------------------------------------------------------------------
-- queen.cg_lagging(p)  in {tenant, minLagSeconds, limit|null, offset|null}
--   (paging applies to the roll-up path: the live path has at most
--   stats_live_max_partitions() partitions per group)
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.cg_lagging(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_qids   uuid[] := queen.tenant_qids(v_tenant, NULL, NULL);
    v_min    numeric := coalesce((p->>'minLagSeconds')::numeric, 3600);
BEGIN
    IF NOT queen.stats_use_rollup(v_qids) THEN
        RETURN queen.cg_lagging_live(p);
    END IF;
    RETURN (
    WITH s AS (
        SELECT e.key AS grp, ps.partition_id AS pid, (e.value->>'lag')::bigint AS lag,
               (e.value->>'oldest')::timestamptz AS oldest,
               extract(epoch FROM now() - (e.value->>'oldest')::timestamptz) AS lag_s
          FROM queen.partition_stats ps, jsonb_each(ps.groups) e
         WHERE ps.queue_id = ANY (v_qids)
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'consumer_group', s.grp,
               'queue_name', q.name,
               'partition_name', pt.name,
               'partition_id', s.pid,
               'worker_id', pc.worker_id,
               'offset_lag', s.lag,
               'time_lag_seconds', floor(s.lag_s)::bigint,
               'lag_hours', round((s.lag_s / 3600)::numeric, 2),
               'oldest_unconsumed_at', queen.iso(s.oldest),
               'last_consumed_at', queen.iso(pc.last_consumed_at))
             ORDER BY s.lag_s DESC, s.grp, q.name, pt.name), '[]'::jsonb)
      FROM (SELECT * FROM s WHERE s.lag_s >= v_min
             ORDER BY s.lag_s DESC, s.grp, s.pid
             LIMIT (p->>'limit')::int OFFSET coalesce((p->>'offset')::int, 0)) s
      JOIN queen.partitions pt ON pt.id = s.pid
      JOIN queen.queues q ON q.id = pt.queue_id
      LEFT JOIN queen.partition_consumers pc
             ON pc.partition_id = s.pid AND pc.consumer_group = s.grp);
END $$;


-- The live versions (sql/011, sql/010), used for small scopes.

CREATE OR REPLACE FUNCTION queen.res_depth_live(p jsonb) RETURNS jsonb
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

CREATE OR REPLACE FUNCTION queen.res_overview_live(p jsonb) RETURNS jsonb
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

CREATE OR REPLACE FUNCTION queen.cg_lagging_live(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH s AS (
        SELECT *, extract(epoch FROM now() - oldest_unconsumed_at) AS lag_s
          FROM queen.cg_state(
            coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001'),
            NULL, NULL, true)
         WHERE has_lag
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'consumer_group', s.consumer_group,
               'queue_name', s.queue_name,
               'partition_name', s.partition_name,
               'partition_id', s.partition_id,
               'worker_id', s.worker_id,
               'offset_lag', s.offset_lag,
               'time_lag_seconds', floor(s.lag_s)::bigint,
               'lag_hours', round((s.lag_s / 3600)::numeric, 2),
               'oldest_unconsumed_at', queen.iso(s.oldest_unconsumed_at),
               'last_consumed_at', queen.iso(s.last_consumed_at))
             ORDER BY s.lag_s DESC, s.consumer_group, s.queue_name, s.partition_name), '[]'::jsonb)
      FROM s
     WHERE s.lag_s >= coalesce((p->>'minLagSeconds')::numeric, 3600)
$$;
