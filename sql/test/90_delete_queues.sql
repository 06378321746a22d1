-- external test suites reset state with DELETE FROM queen.queues under a running broker
SELECT qt.pop('pop.a', 'g1', 10);
DELETE FROM queen.queues;
DO $$
DECLARE r jsonb;
BEGIN
  ASSERT (SELECT count(*) FROM queen.partitions) = 0 AND (SELECT count(*) FROM queen.messages) = 0
     AND (SELECT count(*) FROM queen.partition_lookup) = 0 AND (SELECT count(*) FROM queen.partition_consumers) = 0
     AND (SELECT count(*) FROM queen.consumer_groups_metadata) = 0 AND (SELECT count(*) FROM queen.dead_letter_queue) = 0,
     'cascade';
  r := qt.push('pop.a', 'Default', ARRAY['1', '2']);
  ASSERT r->0->>'status' = 'queued' AND r->1->>'status' = 'queued', r::text;
  r := qt.pop('pop.a', 'g1', 10);
  ASSERT qt.txids(r) = '1,2', r::text;
  r := queen.configure('{"queue":"cfg.q"}');
  ASSERT (r->>'configured')::boolean;
END $$;
