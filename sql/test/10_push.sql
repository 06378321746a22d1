-- push: auto-create, namespace/task derivation, dedup, ordering within a batch, configure.
DO $$
DECLARE r jsonb; r2 jsonb; q record; n int;
BEGIN
  r := qt.push('billing.invoice.v2', 'p1', ARRAY['a', 'b', 'a', 'c']);
  ASSERT jsonb_array_length(r) = 4, 'aligned result';
  ASSERT r->0->>'status' = 'queued' AND r->1->>'status' = 'queued' AND r->3->>'status' = 'queued', r::text;
  ASSERT r->2->>'status' = 'duplicate', 'in-batch duplicate';
  ASSERT r->2->>'message_id' = r->0->>'message_id', 'duplicate reports the first id';
  ASSERT r->0->>'partition_id' IS NOT NULL AND r->0->>'queue_id' IS NOT NULL;
  ASSERT r->0 ? 'trace_id';
  SELECT * INTO q FROM queen.queues WHERE name = 'billing.invoice.v2';
  ASSERT q.namespace = 'billing' AND q.task = 'invoice', 'ns/task derived';
  ASSERT q.tenant_id = '00000000-0000-0000-0000-000000000001';
  ASSERT q.lease_time = 300 AND q.retry_limit = 3, 'defaults';
END $$;

DO $$
DECLARE r jsonb; q record;
BEGIN
  r := qt.push('plainname', 'Default', ARRAY['x']);
  SELECT * INTO q FROM queen.queues WHERE name = 'plainname';
  ASSERT q.namespace IS NULL AND q.task IS NULL, 'no dot -> null ns/task';
  r := qt.push('ns1.only', 'Default', ARRAY['x']);
  SELECT * INTO q FROM queen.queues WHERE name = 'ns1.only';
  ASSERT q.namespace = 'ns1' AND q.task = 'only';
  ASSERT (SELECT count(*) FROM queen.partition_lookup pl JOIN queen.partitions pt ON pt.id = pl.partition_id
           JOIN queen.queues qq ON qq.id = pt.queue_id WHERE qq.name = 'ns1.only') = 1, 'lookup row';
END $$;

-- dedup across calls; same txid in another partition is a new message
DO $$
DECLARE r jsonb; first jsonb;
BEGIN
  first := qt.push('dedup.q', 'A', ARRAY['t1']);
  r := qt.push('dedup.q', 'A', ARRAY['t1', 't2']);
  ASSERT r->0->>'status' = 'duplicate' AND r->0->>'message_id' = first->0->>'message_id', r::text;
  ASSERT r->1->>'status' = 'queued';
  r := qt.push('dedup.q', 'B', ARRAY['t1']);
  ASSERT r->0->>'status' = 'queued', 'other partition';
  ASSERT (SELECT count(*) FROM queen.messages m JOIN queen.partitions pt ON pt.id = m.partition_id
           JOIN queen.queues q ON q.id = pt.queue_id WHERE q.name = 'dedup.q') = 3;
END $$;

-- positions: one call shares created_at per partition, ids order it; later calls are strictly later
DO $$
DECLARE r1 jsonb; r2 jsonb; n int; t1 timestamptz; t2 timestamptz;
BEGIN
  r1 := qt.push('order.q', 'P', ARRAY['1', '2', '3']);
  r2 := qt.push('order.q', 'P', ARRAY['4', '5']);
  SELECT count(DISTINCT created_at) INTO n FROM queen.messages WHERE transaction_id IN ('1','2','3') AND partition_id = qt.pid('order.q', 'P');
  ASSERT n = 1, 'one created_at per partition per call';
  SELECT max(created_at) INTO t1 FROM queen.messages WHERE transaction_id IN ('1','2','3') AND partition_id = qt.pid('order.q', 'P');
  SELECT min(created_at) INTO t2 FROM queen.messages WHERE transaction_id IN ('4','5') AND partition_id = qt.pid('order.q', 'P');
  ASSERT t2 > t1, 'strictly later across calls';
  ASSERT (SELECT string_agg(transaction_id, '' ORDER BY created_at, id) FROM queen.messages
           WHERE partition_id = qt.pid('order.q', 'P')) = '12345';
  ASSERT (SELECT last_message_id::text FROM queen.partition_lookup WHERE partition_id = qt.pid('order.q', 'P'))
         = r2->1->>'message_id', 'lookup points at the newest';
END $$;

-- payload null, trace id, sub, encrypted flag
DO $$
DECLARE r jsonb; m record;
BEGIN
  r := queen.push_batch(jsonb_build_object('items', jsonb_build_array(jsonb_build_object(
        'queue', 'misc.q', 'partition', 'Default', 'id', qt.uuid7(), 'txid', 'n1',
        'traceId', '11111111-1111-4111-8111-111111111111', 'payload', NULL, 'encrypted', true, 'sub', 'alice'))));
  SELECT * INTO m FROM queen.messages WHERE id = (r->0->>'message_id')::uuid;
  ASSERT m.payload = 'null'::jsonb AND m.is_encrypted AND m.producer_sub = 'alice'
         AND m.trace_id = '11111111-1111-4111-8111-111111111111', m::text;
  ASSERT r->0->>'trace_id' = '11111111-1111-4111-8111-111111111111';
  ASSERT queen.push_batch('{"items":[]}') = '[]'::jsonb;
END $$;

-- configure: create, merge, replace, Default partition
DO $$
DECLARE r jsonb;
BEGIN
  r := queen.configure('{"queue":"cfg.q","namespace":"N","task":null,"options":{"leaseTime":10,"retryLimit":5,"priority":7},"mode":"merge"}');
  ASSERT (r->>'configured')::boolean AND r->>'queue' = 'cfg.q' AND r->>'namespace' = 'N' AND r->'task' = 'null'::jsonb, r::text;
  ASSERT (r->'options'->>'leaseTime')::int = 10 AND (r->'options'->>'retryLimit')::int = 5
         AND (r->'options'->>'ttl')::int = 3600 AND (r->'options'->>'deadLetterQueue')::boolean = false, r::text;
  ASSERT (SELECT count(*) FROM jsonb_object_keys(r->'options')) = 15, 'all 15 options';
  ASSERT r->>'partitionId' = qt.pid('cfg.q')::text, 'Default partition';
  r := queen.configure('{"queue":"cfg.q","options":{"ttl":5},"mode":"merge"}');
  ASSERT (r->'options'->>'leaseTime')::int = 10 AND (r->'options'->>'ttl')::int = 5 AND r->>'namespace' = 'N', r::text;
  r := queen.configure('{"queue":"cfg.q","options":{"ttl":6},"mode":"replace"}');
  ASSERT (r->'options'->>'leaseTime')::int = 300 AND (r->'options'->>'retryLimit')::int = 3
         AND (r->'options'->>'priority')::int = 0 AND (r->'options'->>'ttl')::int = 6, r::text;
  ASSERT (SELECT count(*) FROM queen.partitions WHERE queue_id = (r->>'queueId')::uuid) = 1;
  ASSERT (SELECT count(*) FROM queen.partition_lookup WHERE partition_id = (r->>'partitionId')::uuid) = 1;
END $$;

-- tenants are separate namespaces
DO $$
DECLARE r jsonb;
BEGIN
  r := queen.push_batch(jsonb_build_object('tenant', '22222222-2222-4222-8222-222222222222',
        'items', qt.items('dedup.q', 'A', ARRAY['t1'])));
  ASSERT r->0->>'status' = 'queued', 'other tenant, other queue';
  ASSERT (SELECT count(*) FROM queen.queues WHERE name = 'dedup.q') = 2;
END $$;

-- partition_lookup.last_message_slot (a generated column, sql/schema/013_lookup_slot.sql)
-- is queen.lookup_slot(last_message_created_at): the readers' slot bounds rely on it
DO $$
BEGIN
  ASSERT (SELECT count(*) FROM queen.partition_lookup WHERE last_message_created_at IS NOT NULL) > 0;
  ASSERT NOT EXISTS (SELECT 1 FROM queen.partition_lookup
                      WHERE last_message_slot IS DISTINCT FROM queen.lookup_slot(last_message_created_at)),
         'slot column and queen.lookup_slot disagree';
  ASSERT queen.lookup_slot('1970-01-01 00:00:19.999999+00') = 1
     AND queen.lookup_slot('1970-01-01 00:00:20+00') = 2
     AND queen.lookup_slot('1969-12-31 23:59:59+00') = -1, 'slot boundaries';
END $$;
