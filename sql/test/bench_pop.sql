-- Pop latency with 10,000 partitions in one queue (plus one with a backlog), reported as NOTICEs.
SELECT queen.configure('{"queue":"bench.wide"}');
SELECT queen.push_batch(jsonb_build_object('items', (
  SELECT jsonb_agg(jsonb_build_object('queue', 'bench.wide', 'partition', 'w' || g, 'id', qt.uuid7(),
                   'txid', 't' || g, 'payload', '{}'::jsonb, 'encrypted', false) ORDER BY g)
    FROM generate_series(1, 10000) g)));
-- mark everything consumed by queue mode (as if drained), so most partitions are idle
INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_consumed_id, last_consumed_created_at)
SELECT pl.partition_id, '__QUEUE_MODE__', pl.last_message_id, pl.last_message_created_at
  FROM queen.partition_lookup pl JOIN queen.queues q ON q.id = pl.queue_id
 WHERE q.name = 'bench.wide' AND pl.last_message_id IS NOT NULL
ON CONFLICT (partition_id, consumer_group) DO UPDATE
   SET last_consumed_id = EXCLUDED.last_consumed_id, last_consumed_created_at = EXCLUDED.last_consumed_created_at;
ANALYZE queen.partition_lookup; ANALYZE queen.partition_consumers; ANALYZE queen.partitions;
SELECT qt.push_n('bench.wide', 'w5000', 'late', 10);
