-- pop: leases per (partition, group), groups, limits, autoAck, partition and discovery forms.
DO $$
DECLARE r jsonb; r2 jsonb;
BEGIN
  PERFORM qt.push('pop.a', 'Default', ARRAY['1', '2', '3']);
  r := qt.pop('pop.a', 'g1', 10);
  ASSERT qt.txids(r) = '1,2,3', r::text;
  ASSERT (r->>'partitionsClaimed')::int = 1 AND r->>'queue' = 'pop.a' AND r->>'partition' = 'Default'
         AND r->>'partitionId' = qt.pid('pop.a')::text AND r->>'leaseExpiresAt' LIKE '____-__-__T__:__:__.______Z', r::text;
  ASSERT r->'messages'->0->>'createdAt' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$', r::text;
  ASSERT r->'messages'->0->'data' = '{"t":"1"}'::jsonb AND r->'messages'->0->>'queue' = 'pop.a'
         AND r->'messages'->0->>'partition' = 'Default' AND (r->'messages'->0->>'isEncrypted')::boolean = false
         AND r->'messages'->0 ? 'traceId' AND r->'messages'->0 ? 'producerSub', r::text;
  -- lease held: same group gets nothing, even for new messages
  PERFORM qt.push('pop.a', 'Default', ARRAY['4']);
  r2 := qt.pop('pop.a', 'g1', 10);
  ASSERT jsonb_array_length(r2->'messages') = 0 AND (r2->>'partitionsClaimed')::int = 0, r2::text;
  -- another group sees everything
  r2 := qt.pop('pop.a', 'g2', 10);
  ASSERT qt.txids(r2) = '1,2,3,4', r2::text;
  -- queue mode is its own group
  r2 := qt.pop('pop.a', '__QUEUE_MODE__', 2);
  ASSERT qt.txids(r2) = '1,2', r2::text;
  ASSERT (SELECT batch_size FROM queen.partition_consumers WHERE partition_id = qt.pid('pop.a') AND consumer_group = '__QUEUE_MODE__') = 2;
  ASSERT (SELECT acked_count FROM queen.partition_consumers WHERE partition_id = qt.pid('pop.a') AND consumer_group = '__QUEUE_MODE__') = 0;
  ASSERT NOT EXISTS (SELECT 1 FROM queen.consumer_groups_metadata WHERE consumer_group = '__QUEUE_MODE__'), 'queue mode has no metadata';
  -- unknown queue / partition: empty, no error
  r2 := qt.pop('nope.none', 'g1', 10);
  ASSERT jsonb_array_length(r2->'messages') = 0;
  r2 := qt.pop('pop.a', 'g9', 10, '{"partition":"nope"}');
  ASSERT jsonb_array_length(r2->'messages') = 0;
END $$;

-- batch budget is global; partitions limit
DO $$
DECLARE r jsonb; n int;
BEGIN
  PERFORM qt.push_n('pop.b', 'P1', 'a', 5);
  PERFORM qt.push_n('pop.b', 'P2', 'b', 5);
  PERFORM qt.push_n('pop.b', 'P3', 'c', 5);
  r := qt.pop('pop.b', 'g', 7, '{"partitions":3}');
  ASSERT jsonb_array_length(r->'messages') = 7 AND (r->>'partitionsClaimed')::int = 2, r::text;
  r := qt.pop('pop.b', 'h', 100, '{"partitions":2}');
  ASSERT jsonb_array_length(r->'messages') = 10 AND (r->>'partitionsClaimed')::int = 2, r::text;
  r := qt.pop('pop.b', 'i', 100);
  ASSERT jsonb_array_length(r->'messages') = 5 AND (r->>'partitionsClaimed')::int = 1, r::text;
  -- all messages of one pop share the partition order (created_at, id) per partition
  r := qt.pop('pop.b', 'j', 100, '{"partitions":64}');
  ASSERT jsonb_array_length(r->'messages') = 15 AND (r->>'partitionsClaimed')::int = 3, r::text;
  -- partition form
  r := qt.pop('pop.b', 'k', 100, '{"partition":"P2","partitions":5}');
  ASSERT qt.txids(r) = 'b1,b2,b3,b4,b5' AND (r->>'partitionsClaimed')::int = 1, r::text;
END $$;

-- autoAck: cursor moves, lease cleared, counters
DO $$
DECLARE r jsonb; pc record;
BEGIN
  PERFORM qt.push_n('pop.c', 'Default', 'm', 5);
  r := qt.pop('pop.c', 'g', 3, '{"autoAck":true}');
  ASSERT qt.txids(r) = 'm1,m2,m3' AND r->'leaseExpiresAt' = 'null'::jsonb, r::text;
  SELECT * INTO pc FROM queen.partition_consumers WHERE partition_id = qt.pid('pop.c') AND consumer_group = 'g';
  ASSERT pc.worker_id IS NULL AND pc.lease_expires_at IS NULL AND pc.total_messages_consumed = 3, pc::text;
  ASSERT qt.cursor('pop.c', 'g') = 'm3';
  r := qt.pop('pop.c', 'g', 10, '{"autoAck":true}');
  ASSERT qt.txids(r) = 'm4,m5', r::text;
  r := qt.pop('pop.c', 'g', 10, '{"autoAck":true}');
  ASSERT jsonb_array_length(r->'messages') = 0;
  ASSERT (SELECT total_messages_consumed FROM queen.partition_consumers WHERE partition_id = qt.pid('pop.c') AND consumer_group = 'g') = 5;
END $$;

-- discovery form: namespace/task filters, priority first
DO $$
DECLARE r jsonb;
BEGIN
  PERFORM queen.configure('{"queue":"disc.low","namespace":"disc","task":"low","options":{"priority":1}}');
  PERFORM queen.configure('{"queue":"disc.high","namespace":"disc","task":"high","options":{"priority":9}}');
  PERFORM qt.push('disc.low', 'Default', ARRAY['l1']);
  PERFORM qt.push('disc.high', 'Default', ARRAY['h1']);
  PERFORM qt.push('other.x', 'Default', ARRAY['o1']);
  r := queen.pop('{"queue":null,"namespace":"disc","task":null,"group":"d","batch":10,"partitions":1,"leaseId":"0190a000-0000-7000-8000-00000000d001"}');
  ASSERT qt.txids(r) = 'h1' AND r->>'queue' = 'disc.high', r::text;
  r := queen.pop('{"namespace":"disc","group":"d","batch":10,"partitions":5,"leaseId":"0190a000-0000-7000-8000-00000000d002"}');
  ASSERT qt.txids(r) = 'l1', r::text;
  r := queen.pop('{"namespace":"disc","task":"low","group":"d2","batch":10,"partitions":5,"leaseId":"0190a000-0000-7000-8000-00000000d003"}');
  ASSERT qt.txids(r) = 'l1', r::text;
  r := queen.pop('{"namespace":"zzz","group":"d2","batch":10,"leaseId":"0190a000-0000-7000-8000-00000000d004"}');
  ASSERT jsonb_array_length(r->'messages') = 0;
END $$;

-- lease expiry redelivers (separate transactions: now() is per transaction)
SELECT qt.push('pop.exp', 'Default', ARRAY['e1', 'e2']);
SELECT qt.put('exp1', qt.pop('pop.exp', 'g', 10, '{"leaseSeconds":1}'));
DO $$ BEGIN
  ASSERT qt.txids(qt.get('exp1')) = 'e1,e2';
  ASSERT jsonb_array_length(qt.pop('pop.exp', 'g', 10)->'messages') = 0, 'lease live';
END $$;
SELECT pg_sleep(1.2);
DO $$
DECLARE r jsonb;
BEGIN
  r := qt.pop('pop.exp', 'g', 10);
  ASSERT qt.txids(r) = 'e1,e2', 'redelivered after expiry: ' || r::text;
  ASSERT (SELECT batch_retry_count FROM queen.partition_consumers WHERE partition_id = qt.pid('pop.exp') AND consumer_group = 'g') = 0,
         'expiry does not count as a retry';
END $$;

-- delayedProcessing
SELECT queen.configure('{"queue":"pop.delay","options":{"delayedProcessing":1}}');
SELECT qt.push('pop.delay', 'Default', ARRAY['d1']);
DO $$ BEGIN
  ASSERT jsonb_array_length(qt.pop('pop.delay', 'g', 10)->'messages') = 0, 'delayed';
  ASSERT NOT EXISTS (SELECT 1 FROM queen.partition_consumers WHERE partition_id = qt.pid('pop.delay') AND consumer_group = 'g' AND worker_id IS NOT NULL),
         'empty claim released';
END $$;
SELECT pg_sleep(1.1);
SELECT qt.push('pop.delay', 'Default', ARRAY['d2']);
DO $$ BEGIN
  ASSERT qt.txids(qt.pop('pop.delay', 'g', 10)) = 'd1', 'd1 visible, d2 still delayed';
END $$;

-- windowBuffer: the whole partition waits until its newest message is old enough
SELECT queen.configure('{"queue":"pop.win","options":{"windowBuffer":1}}');
SELECT qt.push('pop.win', 'Default', ARRAY['w1']);
SELECT pg_sleep(0.6);
SELECT qt.push('pop.win', 'Default', ARRAY['w2']);
SELECT pg_sleep(0.6);
DO $$ BEGIN
  ASSERT jsonb_array_length(qt.pop('pop.win', 'g', 10)->'messages') = 0, 'window holds (w1 is old enough, w2 is not)';
END $$;
SELECT pg_sleep(0.6);
DO $$ BEGIN
  ASSERT qt.txids(qt.pop('pop.win', 'g', 10)) = 'w1,w2', 'window passed';
END $$;

-- deep sweep starts (queen.pop_sweep_start): any 32 consecutive ones leave no gap wider
-- than 1.8 / 32 of the partition-id space (32 random starts: about 4 / 32 on average,
-- and under 1.8 / 32 with a probability below 0.1% a round)
DO $$
DECLARE gap numeric;
BEGIN
  FOR round IN 1..3 LOOP
    WITH s AS (SELECT ('x' || left(replace(queen.pop_sweep_start()::text, '-', ''), 8))::bit(32)::bigint AS p
                 FROM generate_series(1, 32)),
         o AS (SELECT p, lead(p, 1, (SELECT min(p) FROM s) + 4294967296) OVER (ORDER BY p) - p AS g FROM s)
    SELECT max(g) / 4294967296.0 INTO gap FROM o;
    ASSERT gap <= 1.8 / 32, format('round %s: a gap of %s of the space', round, gap);
  END LOOP;
END $$;
