-- Metrics snapshot for GET /metrics/prometheus.

-- Metrics snapshot for GET /metrics/prometheus (issue 7).
--
-- queen.metrics_snapshot(p) -> jsonb
-- In  {maxQueues?: int (default 10000, clamped 1..100000)}
-- Out {queues: [{queue, pushMessagesPerMinute, lagMsAvg, lagMsMax, dlq}],
--      queueCount, dlqTotal, timersPending, maintenance: bool, popMaintenance: bool}
--
-- Bounded: at most maxQueues queues (by name); push rate reads only the partitions whose
-- newest message is under a minute old (index range on messages(partition_id, created_at));
-- lag probes one index entry per cursor that is behind its partition's newest message.
-- Lag of a cursor = now() - created_at of the first message after it; a partition with
-- messages and no cursor at all counts from its first message (nobody consumes it).
CREATE OR REPLACE FUNCTION queen.metrics_snapshot(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
WITH lim AS (
    SELECT LEAST(GREATEST(COALESCE((p->>'maxQueues')::int, 10000), 1), 100000) AS n
), q AS (
    SELECT id, name FROM queen.queues ORDER BY name LIMIT (SELECT n FROM lim)
), pushed AS (
    SELECT pl.queue_id, count(*) AS n
      FROM queen.partition_lookup pl
      JOIN queen.messages m
        ON m.partition_id = pl.partition_id
       AND m.created_at > now() - interval '60 seconds'
     WHERE pl.last_message_created_at > now() - interval '60 seconds'
     GROUP BY pl.queue_id
), cursors AS (
    SELECT pl.queue_id, pl.partition_id,
           COALESCE(pc.last_consumed_created_at, '-infinity'::timestamptz) AS at_ts,
           COALESCE(pc.last_consumed_id, '00000000-0000-0000-0000-000000000000'::uuid) AS at_id
      FROM queen.partition_lookup pl
      LEFT JOIN queen.partition_consumers pc ON pc.partition_id = pl.partition_id
     WHERE pl.last_message_created_at IS NOT NULL
       AND (pc.partition_id IS NULL
            OR pc.last_consumed_created_at IS NULL
            OR pl.last_message_created_at > pc.last_consumed_created_at
            OR (pl.last_message_created_at = pc.last_consumed_created_at
                AND pl.last_message_id > pc.last_consumed_id))
), lag AS (
    SELECT c.queue_id,
           avg(extract(epoch FROM now() - f.created_at) * 1000) AS avg_ms,
           max(extract(epoch FROM now() - f.created_at) * 1000) AS max_ms
      FROM cursors c
      CROSS JOIN LATERAL (
          SELECT m.created_at FROM queen.messages m
           WHERE m.partition_id = c.partition_id
             AND (m.created_at, m.id) > (c.at_ts, c.at_id)
           ORDER BY m.created_at, m.id LIMIT 1) f
     GROUP BY c.queue_id
), dlq AS (
    SELECT pt.queue_id, count(*) AS n
      FROM queen.dead_letter_queue d
      JOIN queen.partitions pt ON pt.id = d.partition_id
     GROUP BY pt.queue_id
)
SELECT jsonb_build_object(
    'queues', COALESCE((
        SELECT jsonb_agg(jsonb_build_object(
                   'queue', q.name,
                   'pushMessagesPerMinute', COALESCE(pushed.n, 0),
                   'lagMsAvg', COALESCE(round(lag.avg_ms), 0),
                   'lagMsMax', COALESCE(round(lag.max_ms), 0),
                   'dlq', COALESCE(dlq.n, 0)) ORDER BY q.name)
          FROM q
          LEFT JOIN pushed ON pushed.queue_id = q.id
          LEFT JOIN lag ON lag.queue_id = q.id
          LEFT JOIN dlq ON dlq.queue_id = q.id), '[]'::jsonb),
    'queueCount', (SELECT count(*) FROM queen.queues),
    'dlqTotal', (SELECT count(*) FROM queen.dead_letter_queue),
    'timersPending', (SELECT count(*) FROM queen.log_timers),
    'maintenance', COALESCE((SELECT (value->>'enabled')::boolean FROM queen.system_state
                              WHERE key = 'maintenance_mode'), false),
    'popMaintenance', COALESCE((SELECT (value->>'enabled')::boolean FROM queen.system_state
                                 WHERE key = 'pop_maintenance_mode'), false))
$$;
