-- Consumer-group listings at scale and per-function planner settings.
--
-- queen.cg_list reads the stats roll-up (sql/015) for scopes over
-- queen.stats_live_max_partitions() partitions: lag per (group, queue) comes
-- from partition_stats.groups, live leases and metadata from their own small
-- tables. queen.cg_lagging takes `limit`/`offset` (the most lagging first; the
-- shard defaults the limit) so a queue with every partition behind answers a
-- bounded page instead of megabytes.
--
-- JIT is off for the operator readers: their row estimates are large (lateral
-- per-partition probes), which makes PostgreSQL spend ~80 ms compiling
-- expressions for queries that run in a few milliseconds.

CREATE OR REPLACE FUNCTION queen.cg_list(p jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_tenant uuid := coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001');
    v_qids   uuid[] := queen.tenant_qids(v_tenant, NULL, NULL);
BEGIN
    IF NOT queen.stats_use_rollup(v_qids) THEN
        RETURN queen.cg_list_live(p);
    END IF;
    RETURN (
    WITH pairs AS (
        SELECT DISTINCT m.consumer_group AS grp, m.queue_id AS qid
          FROM queen.consumer_groups_metadata m WHERE m.queue_id = ANY (v_qids)
        UNION
        SELECT e.key, ps.queue_id FROM queen.partition_stats ps, jsonb_object_keys(ps.groups) e(key)
         WHERE ps.queue_id = ANY (v_qids)
        UNION
        SELECT DISTINCT pc.consumer_group, pl.queue_id
          FROM queen.partition_consumers pc
          JOIN queen.partition_lookup pl ON pl.partition_id = pc.partition_id
         WHERE pl.queue_id = ANY (v_qids)
    ), lag AS (
        SELECT e.key AS grp, ps.queue_id AS qid, count(*) AS lagging,
               max(extract(epoch FROM now() - (e.value->>'oldest')::timestamptz)) AS max_lag
          FROM queen.partition_stats ps, jsonb_each(ps.groups) e
         WHERE ps.queue_id = ANY (v_qids)
         GROUP BY 1, 2
    ), live AS (
        SELECT pc.consumer_group AS grp, pl.queue_id AS qid,
               count(*) FILTER (WHERE pc.lease_expires_at > now()) AS members,
               max(pc.last_consumed_at) AS last_at
          FROM queen.partition_consumers pc
          JOIN queen.partition_lookup pl ON pl.partition_id = pc.partition_id
         WHERE pl.queue_id = ANY (v_qids)
         GROUP BY 1, 2
    ), g AS (
        SELECT pr.grp, pr.qid, q.name AS qname, coalesce(lv.members, 0) AS members,
               coalesce(l.lagging, 0) AS lagging, coalesce(l.max_lag, 0)::bigint AS max_lag,
               lv.last_at
          FROM pairs pr JOIN queen.queues q ON q.id = pr.qid
          LEFT JOIN lag l ON l.grp = pr.grp AND l.qid = pr.qid
          LEFT JOIN live lv ON lv.grp = pr.grp AND lv.qid = pr.qid
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'name', g.grp,
               'topics', jsonb_build_array(g.qname),
               'queueName', g.qname,
               'members', g.members,
               'partitionsWithLag', g.lagging,
               'totalLag', NULL,
               'maxTimeLag', g.max_lag,
               'state', CASE WHEN g.max_lag > 300 AND g.members = 0
                                  AND (g.last_at IS NULL OR g.last_at < now() - interval '1 hour')
                             THEN 'Dead'
                             WHEN g.max_lag > 300 THEN 'Lagging'
                             ELSE 'Stable' END,
               'subscriptionMode', m.subscription_mode,
               'subscriptionTimestamp', queen.iso(m.subscription_timestamp),
               'subscriptionCreatedAt', queen.iso(m.created_at))
             ORDER BY g.grp, g.qname), '[]'::jsonb)
      FROM g
      LEFT JOIN LATERAL (SELECT x.* FROM queen.consumer_groups_metadata x
                          WHERE x.queue_id = g.qid AND x.consumer_group = g.grp
                          ORDER BY (x.partition_name = '') DESC, x.created_at LIMIT 1) m ON true);
END $$;

CREATE OR REPLACE FUNCTION queen.cg_list_live(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH s AS (
        SELECT * FROM queen.cg_state(
            coalesce(queen.try_uuid(p->>'tenant'), '00000000-0000-0000-0000-000000000001'),
            NULL, NULL, false)
    ), g AS (
        SELECT s.consumer_group, s.queue_id, s.queue_name,
               count(*) FILTER (WHERE s.lease_active) AS members,
               count(*) FILTER (WHERE s.has_lag) AS lagging,
               coalesce(max(extract(epoch FROM now() - s.oldest_unconsumed_at)), 0)::bigint AS max_lag,
               max(s.last_consumed_at) AS last_at
          FROM s GROUP BY s.consumer_group, s.queue_id, s.queue_name
    )
    SELECT coalesce(jsonb_agg(jsonb_build_object(
               'name', g.consumer_group,
               'topics', jsonb_build_array(g.queue_name),
               'queueName', g.queue_name,
               'members', g.members,
               'partitionsWithLag', g.lagging,
               'totalLag', NULL,
               'maxTimeLag', g.max_lag,
               'state', CASE WHEN g.max_lag > 300 AND g.members = 0
                                  AND (g.last_at IS NULL OR g.last_at < now() - interval '1 hour')
                             THEN 'Dead'
                             WHEN g.max_lag > 300 THEN 'Lagging'
                             ELSE 'Stable' END,
               'subscriptionMode', m.subscription_mode,
               'subscriptionTimestamp', queen.iso(m.subscription_timestamp),
               'subscriptionCreatedAt', queen.iso(m.created_at))
             ORDER BY g.consumer_group, g.queue_name), '[]'::jsonb)
      FROM g
      LEFT JOIN LATERAL (SELECT x.* FROM queen.consumer_groups_metadata x
                          WHERE x.queue_id = g.queue_id AND x.consumer_group = g.consumer_group
                          ORDER BY (x.partition_name = '') DESC, x.created_at LIMIT 1) m ON true
$$;

DO $$
DECLARE
    f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['msg_list', 'msg_detail', 'cg_list', 'cg_list_live', 'cg_lagging',
                             'cg_lagging_live', 'cg_detail', 'res_queues', 'res_queue',
                             'res_depth', 'res_depth_live', 'res_namespaces', 'res_tasks',
                             'res_overview', 'res_overview_live', 'res_partitions',
                             'status_view', 'stats_rollup', 'dlq_list', 'trace_by_name',
                             'trace_names'] LOOP
        IF to_regprocedure('queen.' || f || '(jsonb)') IS NOT NULL THEN
            EXECUTE format('ALTER FUNCTION queen.%I(jsonb) SET jit = off', f);
        END IF;
    END LOOP;
END $$;
