-- subscriptions: all / new / timestamp, fixed at the first registration (also an empty first pop).
SELECT qt.push('sub.a', 'Default', ARRAY['h1']);
SELECT qt.push('sub.a', 'Default', ARRAY['h2', 'h3']);
SELECT pg_sleep(0.01);
DO $$
DECLARE r jsonb;
BEGIN
  r := qt.pop('sub.a', 'gnew', 10, '{"subMode":"new","autoAck":true}');
  ASSERT jsonb_array_length(r->'messages') = 0, 'new group: no history ' || r::text;
  ASSERT (SELECT subscription_mode FROM queen.consumer_groups_metadata WHERE consumer_group = 'gnew') = 'new';
  r := qt.pop('sub.a', 'gall', 10, '{"subMode":"all","autoAck":true}');
  ASSERT qt.txids(r) = 'h1,h2,h3', r::text;
  PERFORM qt.put('h2ts', to_jsonb((SELECT created_at FROM queen.messages WHERE transaction_id = 'h2' AND partition_id = qt.pid('sub.a'))));
END $$;
SELECT qt.push('sub.a', 'Default', ARRAY['n1', 'n2']);
SELECT qt.push('sub.a', 'Later', ARRAY['L1']);
DO $$
DECLARE r jsonb;
BEGIN
  -- later pops of the new group with another mode: first registration wins
  r := qt.pop('sub.a', 'gnew', 10, '{"subMode":"all","autoAck":true,"partitions":5}');
  ASSERT qt.txset(r) = 'L1,n1,n2', 'new group sees only later messages, also in a later partition: ' || r::text;
  -- timestamp mode
  r := qt.pop('sub.a', 'gts', 10, jsonb_build_object('subMode', 'timestamp', 'subFrom', qt.get('h2ts') #>> '{}', 'autoAck', true, 'partitions', 5));
  ASSERT qt.txset(r) = 'L1,h2,h3,n1,n2', r::text;
  ASSERT (SELECT subscription_mode FROM queen.consumer_groups_metadata WHERE consumer_group = 'gts') = 'timestamp';
  -- subFrom=now means new
  r := qt.pop('sub.a', 'gnow', 10, '{"subFrom":"now","autoAck":true}');
  ASSERT jsonb_array_length(r->'messages') = 0, r::text;
END $$;

-- registration on an empty first pop of a queue with no partitions at all
INSERT INTO queen.queues (name) VALUES ('sub.empty');
DO $$ BEGIN
  ASSERT jsonb_array_length(qt.pop('sub.empty', 'g', 10, '{"subMode":"new"}')->'messages') = 0;
  ASSERT EXISTS (SELECT 1 FROM queen.consumer_groups_metadata WHERE queue_name = 'sub.empty' AND consumer_group = 'g');
END $$;
SELECT pg_sleep(0.01);
SELECT qt.push('sub.empty', 'P9', ARRAY['e1']);
DO $$ BEGIN
  ASSERT qt.txids(qt.pop('sub.empty', 'g', 10)) = 'e1', 'message pushed after the empty first pop is delivered';
END $$;
