-- Status and analytics views for the dashboard.

-- Status and analytics views for the dashboard (http-api.md §12). One entry
-- point, queen.status_view(p), dispatching on p.view. Time series read
-- queen.stats_history (written per queue and minute by the stats roll-up,
-- functions/stats.sql); counts come from queen.pcounts (live for small scopes, else the
-- roll-up); nothing here scans queen.messages for a large scope. Figures only
-- the broker process knows (request counters, workers) are added by the shard
-- (src/api/status.rs).

-- Bucket size in minutes for a time range (§12): ≤ 60 min → 1; ≤ 6 h → 5;
-- ≤ 24 h → 15; ≤ 7 d → 60; else 360.
CREATE OR REPLACE FUNCTION queen.bucket_minutes(p_from timestamptz, p_to timestamptz)
RETURNS int LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_to - p_from <= interval '60 minutes' THEN 1
                WHEN p_to - p_from <= interval '6 hours' THEN 5
                WHEN p_to - p_from <= interval '24 hours' THEN 15
                WHEN p_to - p_from <= interval '7 days' THEN 60
                ELSE 360 END
$$;

-- Start of the bucket of `bm` minutes that holds ts.
CREATE OR REPLACE FUNCTION queen.bucket_floor(ts timestamptz, bm int) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_timestamp(floor(extract(epoch FROM ts) / (bm * 60)) * (bm * 60))
$$;

-- History rows of a set of queues in [from, to], summed per bucket of bm minutes;
-- every bucket of the range appears (zeros when nothing happened).
CREATE OR REPLACE FUNCTION queen.history_series(p_qids uuid[], p_from timestamptz,
                                                p_to timestamptz, p_bm int)
RETURNS TABLE (bucket timestamptz, ingested bigint, processed bigint, failed bigint,
               pending bigint, lag_avg numeric, lag_max numeric)
LANGUAGE sql STABLE AS $$
    WITH b AS (
        SELECT generate_series(queen.bucket_floor(p_from, p_bm), p_to,
                               p_bm * interval '1 minute') AS bucket
    ), h AS (
        SELECT queen.bucket_floor(h.bucket_time, p_bm) AS bucket,
               sum((h.data->>'ingested')::bigint) AS ingested,
               sum((h.data->>'processed')::bigint) AS processed,
               sum((h.data->>'failed')::bigint) AS failed,
               max((h.data->>'pending')::bigint) AS pending,
               avg((h.data->>'lagAvg')::numeric) AS lag_avg,
               max((h.data->>'lagMax')::numeric) AS lag_max
          FROM queen.stats_history h
         WHERE h.stat_type = 'queue' AND h.queue_id = ANY (p_qids)
           AND h.bucket_time >= queen.bucket_floor(p_from, p_bm) AND h.bucket_time <= p_to
         GROUP BY 1
    )
    SELECT b.bucket, coalesce(h.ingested, 0), coalesce(h.processed, 0), coalesce(h.failed, 0),
           coalesce(h.pending, 0), round(coalesce(h.lag_avg, 0), 3), round(coalesce(h.lag_max, 0), 3)
      FROM b LEFT JOIN h ON h.bucket = b.bucket
$$;

-- The series as the JSON points of /status and /status/analytics.
CREATE OR REPLACE FUNCTION queen.series_json(p_qids uuid[], p_from timestamptz,
                                             p_to timestamptz, p_bm int)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'timestamp', queen.iso(s.bucket),
               'ingested', s.ingested, 'processed', s.processed, 'failed', s.failed,
               'ingestedPerSecond', round(s.ingested / (p_bm * 60.0), 3),
               'processedPerSecond', round(s.processed / (p_bm * 60.0), 3),
               'pending', s.pending, 'lagAvg', s.lag_avg, 'lagMax', s.lag_max,
               'messages', jsonb_build_object('ingested', s.ingested, 'processed', s.processed,
                                              'failed', s.failed, 'pending', s.pending))
             ORDER BY s.bucket), '[]'::jsonb)
      FROM queen.history_series(p_qids, p_from, p_to, p_bm) s
$$;

-- Counts JSON of one queue row set: {total, pending, processing, completed, failed, deadLetter}.
CREATE OR REPLACE FUNCTION queen.status_queue_rows(p_qids uuid[])
RETURNS TABLE (qid uuid, parts bigint, j jsonb, lag jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_roll boolean := queen.stats_use_rollup(p_qids);
BEGIN
    RETURN QUERY
    SELECT q.id, count(c.pid),
           queen.counts_json(coalesce(sum(c.total), 0)::bigint, coalesce(sum(c.pending), 0)::bigint,
                             coalesce(sum(c.processing), 0)::bigint,
                             coalesce(sum(c.completed), 0)::bigint, coalesce(sum(c.dead), 0)::bigint),
           jsonb_build_object('avg', coalesce(round(max(st.avg_lag_seconds)::numeric, 3), 0),
                              'max', coalesce(round(max(st.max_lag_seconds)::numeric, 3), 0))
      FROM queen.queues q
      LEFT JOIN queen.pcounts(p_qids, v_roll) c ON c.qid = q.id
      LEFT JOIN queen.stats st ON st.stat_type = 'queue' AND st.stat_key = q.id::text
     WHERE q.id = ANY (p_qids)
     GROUP BY q.id;
END $$;

-- ---------------------------------------------------------------------------
-- queen.status_view(p)
--   in {view, tenant, queue?, namespace?, task?, from?, to?, limit?, offset?,
--       interval?, hostname?, workerId?}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.status_view(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE SET jit = off AS $$
DECLARE
    v_view   text := p->>'view';
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_qids   uuid[];
    v_to     timestamptz := coalesce((p->>'to')::timestamptz, now());
    v_from   timestamptz;
    v_bm     int;
    v_limit  int := coalesce((p->>'limit')::int, 100);
    v_offset int := coalesce((p->>'offset')::int, 0);
    v_roll   boolean;
    q        record;
    v_r      jsonb;
BEGIN
    SELECT coalesce(array_agg(x.id), '{}') INTO v_qids FROM queen.queues x
     WHERE x.tenant_id = v_tenant
       AND (p->>'queue' IS NULL OR x.name = p->>'queue')
       AND (p->>'namespace' IS NULL OR x.namespace = p->>'namespace')
       AND (p->>'task' IS NULL OR x.task = p->>'task');
    IF v_view IN ('analytics') THEN
        v_from := coalesce((p->>'from')::timestamptz, v_to - interval '24 hours');
    ELSE
        v_from := coalesce((p->>'from')::timestamptz, v_to - interval '1 hour');
    END IF;
    v_bm := queen.bucket_minutes(v_from, v_to);

    IF v_view = 'status' THEN
        v_roll := queen.stats_use_rollup(v_qids);
        SELECT jsonb_build_object(
            'timeRange', jsonb_build_object('from', queen.iso(v_from), 'to', queen.iso(v_to)),
            'bucketMinutes', v_bm,
            'throughput', queen.series_json(v_qids, v_from, v_to, v_bm),
            'queues', coalesce((SELECT jsonb_agg(jsonb_build_object(
                          'id', x.id, 'name', x.name, 'namespace', x.namespace, 'task', x.task,
                          'priority', x.priority, 'partitions', r.parts, 'messages', r.j,
                          'lag', r.lag) ORDER BY x.name)
                          FROM queen.status_queue_rows(v_qids) r
                          JOIN queen.queues x ON x.id = r.qid), '[]'::jsonb),
            'messages', (SELECT queen.counts_json(coalesce(sum(c.total), 0)::bigint,
                             coalesce(sum(c.pending), 0)::bigint, coalesce(sum(c.processing), 0)::bigint,
                             coalesce(sum(c.completed), 0)::bigint, coalesce(sum(c.dead), 0)::bigint)
                           FROM queen.pcounts(v_qids, v_roll) c),
            'leases', (SELECT jsonb_build_object(
                           'active', count(DISTINCT pc.worker_id),
                           'partitionsWithLeases', count(DISTINCT pc.partition_id),
                           'totalBatchSize', coalesce(sum(pc.batch_size), 0),
                           'totalAcked', coalesce(sum(pc.acked_count), 0))
                         FROM queen.partition_consumers pc
                         JOIN queen.partition_lookup pl ON pl.partition_id = pc.partition_id
                        WHERE pc.worker_id IS NOT NULL AND pc.lease_expires_at > now()
                          AND pl.queue_id = ANY (v_qids)),
            'deadLetterQueue', (SELECT jsonb_build_object(
                           'totalMessages', count(*),
                           'affectedPartitions', count(DISTINCT d.partition_id),
                           'topErrors', coalesce((
                               SELECT jsonb_agg(jsonb_build_object('error', e.err, 'count', e.n)
                                                ORDER BY e.n DESC, e.err)
                                 FROM (SELECT coalesce(d2.error_message, '') AS err, count(*) AS n
                                         FROM queen.dead_letter_queue d2
                                         JOIN queen.partitions p2 ON p2.id = d2.partition_id
                                        WHERE p2.queue_id = ANY (v_qids)
                                        GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 5) e), '[]'::jsonb))
                         FROM queen.dead_letter_queue d
                         JOIN queen.partitions pt ON pt.id = d.partition_id
                        WHERE pt.queue_id = ANY (v_qids)),
            'statsAge', queen.stats_age(v_qids, v_roll))
          INTO v_r;
        v_r := v_r || jsonb_build_object('pointCount', jsonb_array_length(v_r->'throughput'));
        RETURN v_r;

    ELSIF v_view = 'queues' THEN
        RETURN (
        WITH page AS (
            SELECT x.* FROM queen.queues x WHERE x.id = ANY (v_qids)
             ORDER BY x.name LIMIT v_limit OFFSET v_offset
        )
        SELECT jsonb_build_object(
            'queues', coalesce((SELECT jsonb_agg(jsonb_build_object(
                          'id', pg.id, 'name', pg.name, 'namespace', pg.namespace,
                          'task', pg.task, 'priority', pg.priority,
                          'createdAt', queen.iso(pg.created_at), 'partitions', r.parts,
                          'messages', r.j, 'lag', r.lag,
                          'throughput', jsonb_build_object(
                              'ingestedPerSecond', coalesce((st.details->>'ingestedPerSecond')::numeric, 0),
                              'processedPerSecond', coalesce((st.details->>'processedPerSecond')::numeric, 0)))
                          ORDER BY pg.name)
                          FROM page pg
                          JOIN queen.status_queue_rows((SELECT coalesce(array_agg(id), '{}') FROM page)) r
                            ON r.qid = pg.id
                          LEFT JOIN queen.stats st
                                 ON st.stat_type = 'queue' AND st.stat_key = pg.id::text), '[]'::jsonb),
            'pagination', jsonb_build_object('limit', v_limit, 'offset', v_offset,
                                             'total', cardinality(v_qids))));

    ELSIF v_view = 'queue' THEN
        SELECT * INTO q FROM queen.queues x WHERE x.tenant_id = v_tenant AND x.name = p->>'queue';
        IF NOT FOUND THEN
            RETURN jsonb_build_object('found', false);
        END IF;
        v_roll := queen.stats_use_rollup(ARRAY[q.id]);
        WITH x AS (
            SELECT pt.id, pt.name, pt.created_at, pt.last_activity, c.*,
                   queen.counts_json(c.total, c.pending, c.processing, c.completed, c.dead) AS j,
                   (SELECT jsonb_build_object(
                               'totalConsumed', coalesce(sum(pc.total_messages_consumed), 0),
                               'batchesConsumed', coalesce(sum(pc.total_batches_consumed), 0))
                      FROM queen.partition_consumers pc WHERE pc.partition_id = pt.id) AS cur
              FROM queen.pcounts(ARRAY[q.id], v_roll) c
              JOIN queen.partitions pt ON pt.id = c.pid)
        SELECT jsonb_build_object(
            'found', true,
            'queue', jsonb_build_object(
                'id', q.id, 'name', q.name, 'namespace', q.namespace, 'task', q.task,
                'priority', q.priority, 'createdAt', queen.iso(q.created_at),
                'config', jsonb_build_object(
                    'leaseTime', q.lease_time, 'retryLimit', q.retry_limit,
                    'retryDelay', q.retry_delay, 'ttl', q.ttl, 'maxQueueSize', q.max_queue_size,
                    'deadLetterQueue', q.dead_letter_queue)),
            'partitions', coalesce(jsonb_agg(jsonb_build_object(
                'id', x.id, 'name', x.name, 'createdAt', queen.iso(x.created_at),
                'messages', x.j, 'stats', x.j, 'cursor', x.cur,
                'lastActivity', queen.iso(x.last_activity)) ORDER BY x.name), '[]'::jsonb),
            'totals', queen.counts_json(coalesce(sum(x.total), 0)::bigint,
                          coalesce(sum(x.pending), 0)::bigint, coalesce(sum(x.processing), 0)::bigint,
                          coalesce(sum(x.completed), 0)::bigint, coalesce(sum(x.dead), 0)::bigint),
            'statsAge', queen.stats_age(ARRAY[q.id], v_roll))
          INTO v_r FROM x;
        RETURN v_r;

    ELSIF v_view = 'analytics' THEN
        v_bm := CASE p->>'interval' WHEN 'minute' THEN 1 WHEN 'day' THEN 1440 ELSE 60 END;
        RETURN jsonb_build_object(
            'dataPoints', queen.series_json(v_qids, v_from, v_to, v_bm),
            'interval', coalesce(p->>'interval', 'hour'),
            'from', queen.iso(v_from), 'to', queen.iso(v_to));

    ELSIF v_view IN ('queue_lag', 'queue_ops') THEN
        RETURN jsonb_build_object(
            'timeRange', jsonb_build_object('from', queen.iso(v_from), 'to', queen.iso(v_to)),
            'bucketMinutes', v_bm,
            'queues', coalesce((SELECT jsonb_agg(jsonb_build_object(
                'queue', x.name,
                'series', (SELECT jsonb_agg(CASE WHEN v_view = 'queue_lag' THEN
                                   jsonb_build_object('timestamp', queen.iso(s.bucket),
                                       'lagAvgSeconds', s.lag_avg, 'lagMaxSeconds', s.lag_max,
                                       'pending', s.pending)
                               ELSE jsonb_build_object('timestamp', queen.iso(s.bucket),
                                       'push', s.ingested, 'ack', s.processed,
                                       'failed', s.failed)
                               END ORDER BY s.bucket)
                             FROM queen.history_series(ARRAY[x.id], v_from, v_to, v_bm) s))
                ORDER BY x.name)
                FROM queen.queues x WHERE x.id = ANY (v_qids)), '[]'::jsonb));

    ELSIF v_view = 'retention' THEN
        RETURN (
        WITH h AS (
            SELECT queen.bucket_floor(r.executed_at, v_bm) AS bucket, r.retention_type,
                   sum(r.messages_deleted)::bigint AS n
              FROM queen.retention_history r
              JOIN queen.partitions pt ON pt.id = r.partition_id
             WHERE pt.queue_id = ANY (v_qids)
               AND r.executed_at >= v_from AND r.executed_at <= v_to
             GROUP BY 1, 2
        )
        SELECT jsonb_build_object(
            'timeRange', jsonb_build_object('from', queen.iso(v_from), 'to', queen.iso(v_to)),
            'bucketMinutes', v_bm,
            'series', coalesce((SELECT jsonb_agg(jsonb_build_object(
                          'timestamp', queen.iso(h.bucket), 'retention_type', h.retention_type,
                          'messagesDeleted', h.n) ORDER BY h.bucket, h.retention_type) FROM h),
                          '[]'::jsonb),
            'totals', coalesce((SELECT jsonb_object_agg(t.retention_type, t.n) FROM
                          (SELECT h.retention_type, sum(h.n) AS n FROM h GROUP BY 1) t),
                          '{}'::jsonb)));

    ELSIF v_view = 'postgres' THEN
        RETURN jsonb_build_object(
            'databaseSize', pg_database_size(current_database()),
            'tables', coalesce((SELECT jsonb_agg(jsonb_build_object(
                          'name', t.relname, 'totalBytes', pg_total_relation_size(t.relid),
                          'rows', t.n_live_tup, 'deadRows', t.n_dead_tup)
                          ORDER BY pg_total_relation_size(t.relid) DESC)
                          FROM pg_stat_user_tables t WHERE t.schemaname = 'queen'), '[]'::jsonb),
            'connections', (SELECT jsonb_build_object(
                          'total', count(*),
                          'active', count(*) FILTER (WHERE a.state = 'active'),
                          'idle', count(*) FILTER (WHERE a.state = 'idle'),
                          'max', current_setting('max_connections')::int)
                          FROM pg_stat_activity a WHERE a.datname = current_database()),
            'cacheHitRatio', (SELECT round(coalesce(sum(d.blks_hit)::numeric
                                  / nullif(sum(d.blks_hit) + sum(d.blks_read), 0), 0), 4)
                                FROM pg_stat_database d WHERE d.datname = current_database()),
            'timestamp', queen.iso(now()));

    ELSIF v_view = 'system_metrics' THEN
        RETURN (
        WITH r AS (
            SELECT sm.hostname, sm.port, sm.worker_id,
                   jsonb_agg(jsonb_build_object('timestamp', queen.iso(sm.ts), 'metrics', sm.metrics)
                             ORDER BY sm.ts) AS series
              FROM queen.system_metrics sm
             WHERE sm.ts >= v_from AND sm.ts <= v_to
               AND (p->>'hostname' IS NULL OR sm.hostname = p->>'hostname')
               AND (p->>'workerId' IS NULL OR sm.worker_id = p->>'workerId')
             GROUP BY 1, 2, 3
        )
        SELECT jsonb_build_object(
            'timeRange', jsonb_build_object('from', queen.iso(v_from), 'to', queen.iso(v_to)),
            'replicas', coalesce((SELECT jsonb_agg(jsonb_build_object(
                            'hostname', r.hostname, 'port', r.port, 'workerId', r.worker_id,
                            'timeSeries', r.series) ORDER BY r.hostname, r.port, r.worker_id)
                            FROM r), '[]'::jsonb),
            'replicaCount', (SELECT count(*) FROM r),
            'bucketMinutes', v_bm,
            'pointCount', coalesce((SELECT sum(jsonb_array_length(r.series)) FROM r), 0)));

    ELSIF v_view = 'worker_metrics' THEN
        RETURN (
        WITH s AS (SELECT * FROM queen.history_series(v_qids, v_from, v_to, v_bm))
        SELECT jsonb_build_object(
            'timeRange', jsonb_build_object('from', queen.iso(v_from), 'to', queen.iso(v_to)),
            'bucketMinutes', v_bm,
            'timeSeries', queen.series_json(v_qids, v_from, v_to, v_bm),
            'queues', coalesce((SELECT jsonb_agg(jsonb_build_object(
                          'queue', x.name, 'ingested', t.ingested, 'processed', t.processed,
                          'failed', t.failed) ORDER BY x.name)
                          FROM queen.queues x CROSS JOIN LATERAL (
                              SELECT coalesce(sum(hs.ingested), 0) AS ingested,
                                     coalesce(sum(hs.processed), 0) AS processed,
                                     coalesce(sum(hs.failed), 0) AS failed
                                FROM queen.history_series(ARRAY[x.id], v_from, v_to, v_bm) hs) t
                         WHERE x.id = ANY (v_qids)), '[]'::jsonb),
            'summary', (SELECT jsonb_build_object(
                            'ingested', coalesce(sum(s.ingested), 0),
                            'processed', coalesce(sum(s.processed), 0),
                            'failed', coalesce(sum(s.failed), 0)) FROM s),
            'pointCount', (SELECT count(*) FROM s)));
    END IF;
    RAISE EXCEPTION 'Unknown status view: %', v_view;
END $$;

-- The bounded queue detail view (GET /api/v1/status/queues/{q}): one page of
-- partitions, as queen.res_queue in functions/resources.sql (same decision).

-- ---------------------------------------------------------------------------
-- queen.status_queue(p)  in {tenant, queue, limit?, offset?}
--   out {found, queue{...}, partitions[page], pagination, totals, statsAge}
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.status_queue(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE SET jit = off AS $$
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
