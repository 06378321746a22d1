-- ack: completed, idempotency, lease checks, retry counting, dlq, retry, batch semantics.
DO $$
DECLARE r jsonb; a jsonb; lease text; pid uuid; pc record;
BEGIN
  PERFORM qt.push('ack.a', 'Default', ARRAY['1', '2', '3']);
  pid := qt.pid('ack.a');
  r := qt.pop('ack.a', 'g', 10);
  SELECT worker_id::text INTO lease FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g';
  -- unknown message / wrong lease: refused, nothing changes
  a := qt.ack(pid, 'nope', 'completed', 'g', lease);
  ASSERT NOT (a->>'success')::boolean AND a->>'error' = 'Message not found', a::text;
  a := qt.ack(pid, '1', 'completed', 'g', '0190a000-0000-7000-8000-0000000000ff');
  ASSERT NOT (a->>'success')::boolean AND a->>'error' = 'Invalid or expired lease', a::text;
  ASSERT qt.cursor('ack.a', 'g') IS NULL;
  -- foreign tenant cannot ack
  a := queen.ack_batch(jsonb_build_object('tenant', '22222222-2222-4222-8222-222222222222', 'items',
         jsonb_build_array(jsonb_build_object('transactionId', '1', 'partitionId', pid, 'status', 'completed', 'group', 'g'))))->0;
  ASSERT a->>'error' = 'Message not found', a::text;
  -- completed in a batch, out of request order: processed in position order, results in request order
  a := queen.ack_batch(jsonb_build_object('items', jsonb_build_array(
         jsonb_build_object('transactionId', '2', 'partitionId', pid, 'status', 'completed', 'group', 'g', 'leaseId', lease),
         jsonb_build_object('transactionId', '1', 'partitionId', pid, 'status', 'success', 'group', 'g', 'leaseId', lease))));
  ASSERT a->0->>'transactionId' = '2' AND a->1->>'transactionId' = '1', a::text;
  ASSERT (a->0->>'success')::boolean AND (a->1->>'success')::boolean, a::text;
  ASSERT a->0->>'queueName' = 'ack.a' AND a->0->>'partitionName' = 'Default' AND a->0->'error' = 'null'::jsonb, a::text;
  ASSERT NOT (a->0->>'leaseReleased')::boolean AND NOT (a->1->>'leaseReleased')::boolean, a::text;
  ASSERT qt.cursor('ack.a', 'g') = '2';
  a := qt.ack(pid, '3', 'completed', 'g', lease);
  ASSERT (a->>'success')::boolean AND (a->>'leaseReleased')::boolean AND NOT (a->>'dlq')::boolean, a::text;
  SELECT * INTO pc FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g';
  ASSERT pc.worker_id IS NULL AND pc.lease_expires_at IS NULL AND pc.total_messages_consumed = 3 AND pc.acked_count = 3, pc::text;
  -- re-ack (even with the old lease): success, nothing moves backwards
  a := qt.ack(pid, '1', 'completed', 'g', lease);
  ASSERT (a->>'success')::boolean AND a->'error' = 'null'::jsonb, a::text;
  ASSERT qt.cursor('ack.a', 'g') = '3';
  ASSERT (SELECT total_messages_consumed FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g') = 3;
  -- ack without lease id of a never-popped group moves its cursor
  a := qt.ack(pid, '2', 'completed', 'other');
  ASSERT (a->>'success')::boolean AND qt.cursor('ack.a', 'other') = '2', a::text;
  ASSERT qt.txids(qt.pop('ack.a', 'other', 10)) = '3';
END $$;

-- retry counting: retryLimit 2 -> 3 deliveries, then DLQ and cursor past the message
DO $$
DECLARE r jsonb; a jsonb; pid uuid; i int; lease text; pc record; d record;
BEGIN
  PERFORM queen.configure('{"queue":"ack.retry","options":{"retryLimit":2}}');
  PERFORM qt.push('ack.retry', 'Default', ARRAY['x1', 'x2']);
  pid := qt.pid('ack.retry');
  FOR i IN 1..3 LOOP
    r := qt.pop('ack.retry', 'g', 1);
    ASSERT qt.txids(r) = 'x1', format('delivery %s: %s', i, r);
    SELECT worker_id::text INTO lease FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g';
    a := qt.ack(pid, 'x1', 'failed', 'g', lease, CASE WHEN i = 3 THEN NULL ELSE 'boom' END);
    ASSERT (a->>'success')::boolean AND (a->>'leaseReleased')::boolean, a::text;
    ASSERT (a->>'dlq')::boolean = (i = 3), format('dlq only on the 3rd failure: %s %s', i, a);
    SELECT * INTO pc FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g';
    ASSERT pc.batch_retry_count = CASE WHEN i = 3 THEN 0 ELSE i END, pc::text;
  END LOOP;
  SELECT * INTO d FROM queen.dead_letter_queue WHERE partition_id = pid AND consumer_group = 'g';
  ASSERT d.error_message = 'Retries exhausted' AND d.retry_count = 2, d::text;
  ASSERT qt.cursor('ack.retry', 'g') = 'x1', 'cursor moved past the dead letter';
  r := qt.pop('ack.retry', 'g', 10);
  ASSERT qt.txids(r) = 'x2', r::text;
  -- counter was reset: x2 gets its own retries
  SELECT worker_id::text INTO lease FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g';
  a := qt.ack(pid, 'x2', 'failed', 'g', lease);
  ASSERT NOT (a->>'dlq')::boolean AND (SELECT batch_retry_count FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g') = 1;
  -- expired/no lease failed ack: nothing changes
  a := qt.ack(pid, 'x2', 'failed', 'g');
  ASSERT (a->>'success')::boolean AND NOT (a->>'leaseReleased')::boolean
     AND (SELECT batch_retry_count FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g') = 1, a::text;
END $$;

-- a failed batch counts once; the later failed items of the same call are no-ops
DO $$
DECLARE r jsonb; a jsonb; pid uuid; lease text;
BEGIN
  PERFORM qt.push('ack.fb', 'Default', ARRAY['1', '2', '3']);
  pid := qt.pid('ack.fb');
  r := qt.pop('ack.fb', 'g', 10);
  SELECT worker_id::text INTO lease FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g';
  a := queen.ack_batch(jsonb_build_object('items', jsonb_build_array(
         jsonb_build_object('transactionId', '1', 'partitionId', pid, 'status', 'completed', 'group', 'g', 'leaseId', lease),
         jsonb_build_object('transactionId', '2', 'partitionId', pid, 'status', 'failed', 'group', 'g', 'leaseId', lease),
         jsonb_build_object('transactionId', '3', 'partitionId', pid, 'status', 'failed', 'group', 'g', 'leaseId', lease))));
  ASSERT (a->0->>'success')::boolean AND (a->1->>'success')::boolean AND (a->2->>'success')::boolean, a::text;
  ASSERT (a->1->>'leaseReleased')::boolean AND NOT (a->2->>'leaseReleased')::boolean, a::text;
  ASSERT (SELECT batch_retry_count FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g') = 1;
  ASSERT qt.txids(qt.pop('ack.fb', 'g', 10)) = '2,3', 'redelivered from the first unacked';
END $$;

-- dlq status: straight to the DLQ; retry status: release without counting
DO $$
DECLARE r jsonb; a jsonb; pid uuid; lease text; pc record;
BEGIN
  PERFORM qt.push('ack.d', 'Default', ARRAY['1', '2']);
  pid := qt.pid('ack.d');
  r := qt.pop('ack.d', 'g', 1);
  SELECT worker_id::text INTO lease FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g';
  a := qt.ack(pid, '1', 'dlq', 'g', lease, 'bad payload');
  ASSERT (a->>'success')::boolean AND (a->>'dlq')::boolean AND (a->>'leaseReleased')::boolean, a::text;
  ASSERT (SELECT error_message FROM queen.dead_letter_queue WHERE partition_id = pid) = 'bad payload';
  ASSERT qt.cursor('ack.d', 'g') = '1';
  r := qt.pop('ack.d', 'g', 1);
  ASSERT qt.txids(r) = '2', r::text;
  SELECT worker_id::text INTO lease FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g';
  a := qt.ack(pid, '2', 'retry', 'g', lease);
  ASSERT (a->>'success')::boolean AND (a->>'leaseReleased')::boolean AND NOT (a->>'dlq')::boolean, a::text;
  SELECT * INTO pc FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g';
  ASSERT pc.worker_id IS NULL AND pc.batch_retry_count = 0, pc::text;
  ASSERT qt.txids(qt.pop('ack.d', 'g', 1)) = '2', 'redelivered immediately';
END $$;

-- extend_lease
SELECT qt.push('ack.ext', 'Default', ARRAY['1']);
SELECT qt.put('ext', qt.pop('ack.ext', 'g', 1, '{"leaseSeconds":1,"leaseId":"0190a000-0000-7000-8000-0000000e0001"}'));
DO $$
DECLARE r jsonb; old timestamptz;
BEGIN
  old := (qt.get('ext')->>'leaseExpiresAt')::timestamptz;
  r := queen.extend_lease('{"leaseId":"0190a000-0000-7000-8000-0000000e0001","seconds":100}');
  ASSERT (r->>'success')::boolean AND (r->>'newExpiresAt')::timestamptz > old + interval '50 seconds'
     AND r->>'expiresAt' = r->>'newExpiresAt', r::text;
  -- never shortens
  r := queen.extend_lease('{"leaseId":"0190a000-0000-7000-8000-0000000e0001","seconds":1}');
  ASSERT (r->>'newExpiresAt')::timestamptz > old + interval '50 seconds', r::text;
  r := queen.extend_lease('{"leaseId":"0190a000-0000-7000-8000-0000000e0999","seconds":1}');
  ASSERT NOT (r->>'success')::boolean AND r->>'error' = 'Lease not found' AND NOT r ? 'newExpiresAt', r::text;
END $$;
SELECT qt.push('ack.ext2', 'Default', ARRAY['1']);
SELECT qt.pop('ack.ext2', 'g', 1, '{"leaseSeconds":1,"leaseId":"0190a000-0000-7000-8000-0000000e0002"}');
SELECT pg_sleep(1.1);
DO $$
DECLARE r jsonb; a jsonb;
BEGIN
  r := queen.extend_lease('{"leaseId":"0190a000-0000-7000-8000-0000000e0002","seconds":10}');
  ASSERT NOT (r->>'success')::boolean AND r->>'error' = 'Lease already expired', r::text;
  -- ack with the expired lease fails, without lease id succeeds
  a := qt.ack(qt.pid('ack.ext2'), '1', 'completed', 'g', '0190a000-0000-7000-8000-0000000e0002');
  ASSERT a->>'error' = 'Invalid or expired lease', a::text;
  a := qt.ack(qt.pid('ack.ext2'), '1', 'completed', 'g');
  ASSERT (a->>'success')::boolean AND qt.cursor('ack.ext2', 'g') = '1', a::text;
END $$;
