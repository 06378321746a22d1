-- transaction: commit, rollback on a bad ack, required leases, duplicates; dlq_list.
SELECT qt.push('tx.src', 'Default', ARRAY['s1', 's2']);
SELECT qt.put('txpop', qt.pop('tx.src', 'g', 10, '{"leaseId":"0190a000-0000-7000-8000-0000000a0001"}'));
DO $$
DECLARE r jsonb; pid uuid := qt.pid('tx.src');
BEGIN
  r := queen.transaction(jsonb_build_object(
        'requiredLeases', jsonb_build_array('0190a000-0000-7000-8000-0000000a0001'),
        'operations', jsonb_build_array(
          jsonb_build_object('type', 'push', 'items', qt.items('tx.dst', 'Default', ARRAY['d1', 'd2'])),
          jsonb_build_object('type', 'ack', 'transactionId', 's1', 'partitionId', pid, 'status', 'completed', 'group', 'g'),
          jsonb_build_object('type', 'ack', 'transactionId', 's2', 'partitionId', pid, 'status', 'failed', 'group', 'g', 'error', NULL),
          jsonb_build_object('type', 'push', 'items', qt.items('tx.dst', 'Default', ARRAY['d1'])))));
  ASSERT (r->>'success')::boolean AND jsonb_array_length(r->'results') = 5, r::text;
  ASSERT r->'results'->0->>'type' = 'push' AND r->'results'->0->>'status' = 'queued' AND (r->'results'->0->>'index')::int = 0
     AND r->'results'->0->>'queueName' = 'tx.dst' AND r->'results'->0->>'transactionId' = 'd1'
     AND r->'results'->0->>'messageId' IS NOT NULL AND r->'results'->0->>'partitionId' = qt.pid('tx.dst')::text, r::text;
  ASSERT r->'results'->2->>'type' = 'ack' AND (r->'results'->2->>'success')::boolean AND NOT (r->'results'->2->>'dlq')::boolean
     AND r->'results'->2->'error' = 'null'::jsonb AND (r->'results'->2->>'index')::int = 2, r::text;
  ASSERT (r->'results'->3->>'dlq')::boolean, 'txn failed ack -> DLQ directly ' || r::text;
  ASSERT r->'results'->4->>'status' = 'duplicate' AND r->'results'->4->>'messageId' = r->'results'->0->>'messageId', r::text;
  ASSERT (SELECT error_message FROM queen.dead_letter_queue d JOIN queen.messages m ON m.id = d.message_id WHERE m.transaction_id = 's2' AND d.partition_id = pid) = 'Unknown error';
  ASSERT qt.cursor('tx.src', 'g') = 's2';
  ASSERT (SELECT worker_id FROM queen.partition_consumers WHERE partition_id = pid AND consumer_group = 'g') IS NULL, 'lease released';
END $$;

-- rollback: a bad ack fails everything, including the pushes
DO $$
DECLARE r jsonb; failed text;
BEGIN
  BEGIN
    r := queen.transaction(jsonb_build_object('requiredLeases', '[]'::jsonb,
          'operations', jsonb_build_array(
            jsonb_build_object('type', 'push', 'items', qt.items('tx.dst', 'Default', ARRAY['r1'])),
            jsonb_build_object('type', 'ack', 'transactionId', 'missing', 'partitionId', qt.pid('tx.src'), 'status', 'completed', 'group', 'g'))));
  EXCEPTION WHEN OTHERS THEN failed := SQLERRM;
  END;
  ASSERT failed = 'Message not found', coalesce(failed, 'no error: ' || r::text);
  ASSERT NOT EXISTS (SELECT 1 FROM queen.messages WHERE transaction_id = 'r1'), 'push rolled back';
  failed := NULL;
  BEGIN
    r := queen.transaction(jsonb_build_object('requiredLeases', '["0190a000-0000-7000-8000-0000000a0001"]'::jsonb,
          'operations', jsonb_build_array(
            jsonb_build_object('type', 'push', 'items', qt.items('tx.dst', 'Default', ARRAY['r2'])))));
  EXCEPTION WHEN OTHERS THEN failed := SQLERRM;
  END;
  ASSERT failed = 'Invalid or expired lease', coalesce(failed, 'no error: ' || r::text);
  ASSERT NOT EXISTS (SELECT 1 FROM queen.messages WHERE transaction_id = 'r2');
  -- a bad per-op lease also fails
  failed := NULL;
  BEGIN
    r := queen.transaction(jsonb_build_object('operations', jsonb_build_array(
            jsonb_build_object('type', 'ack', 'transactionId', 'd1', 'partitionId', qt.pid('tx.dst'), 'status', 'completed',
                               'group', 'g', 'leaseId', '0190a000-0000-7000-8000-0000000a0fff'))));
  EXCEPTION WHEN OTHERS THEN failed := SQLERRM;
  END;
  ASSERT failed = 'Invalid or expired lease', coalesce(failed, 'no error: ' || r::text);
  ASSERT qt.cursor('tx.dst', 'g') IS NULL;
END $$;

-- dlq_list
DO $$
DECLARE r jsonb; m jsonb;
BEGIN
  r := queen.dlq_list('{"queue":"tx.src","limit":10,"offset":0}');
  ASSERT (r->>'total')::int = 1 AND jsonb_array_length(r->'messages') = 1, r::text;
  m := r->'messages'->0;
  ASSERT m->>'transactionId' = 's2' AND m->>'queue' = 'tx.src' AND m->>'partition' = 'Default'
     AND m->>'consumerGroup' = 'g' AND m->>'errorMessage' = 'Unknown error' AND (m->>'retryCount')::int = 0
     AND m->'data' = '{"t":"s2"}'::jsonb AND m->>'createdAt' LIKE '%Z' AND m->>'failedAt' LIKE '%Z'
     AND m->>'partitionId' = qt.pid('tx.src')::text AND m ? 'producerSub' AND m ? 'isEncrypted' AND m->>'id' IS NOT NULL, m::text;
  ASSERT r->'pagination' = '{"limit":10,"offset":0}'::jsonb, r::text;
  r := queen.dlq_list('{"limit":100,"offset":0}');
  ASSERT (r->>'total')::int >= 3, r::text;
  ASSERT (r->'messages'->0->>'failedAt') >= (r->'messages'->1->>'failedAt'), 'failed_at desc';
  r := queen.dlq_list('{"limit":1,"offset":1}');
  ASSERT jsonb_array_length(r->'messages') = 1 AND (r->>'total')::int >= 3;
  r := queen.dlq_list('{"consumerGroup":"nobody","limit":10,"offset":0}');
  ASSERT (r->>'total')::int = 0 AND r->'messages' = '[]'::jsonb;
  r := queen.dlq_list('{"queue":"ack.retry","partition":"Default","from":"2000-01-01T00:00:00Z","to":"2999-01-01T00:00:00Z","limit":10,"offset":0}');
  ASSERT (r->>'total')::int = 1 AND r->'messages'->0->>'errorMessage' = 'Retries exhausted', r::text;
  r := queen.dlq_list('{"tenant":"22222222-2222-4222-8222-222222222222","limit":10,"offset":0}');
  ASSERT (r->>'total')::int = 0;
END $$;
