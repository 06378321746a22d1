-- Security (issue 6): what the shards need to know about queues for
-- encryption at rest. Safe to run again (CREATE OR REPLACE only).

-- ---------------------------------------------------------------------------
-- queen.queue_flags({tenant, queues:[name]}) -> {queues: {name: {encryptionEnabled}}}
--   Only queues that exist are listed; a shard caches the answer.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.queue_flags(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
SELECT jsonb_build_object('queues', coalesce(jsonb_object_agg(q.name,
           jsonb_build_object('encryptionEnabled', q.encryption_enabled)), '{}'::jsonb))
  FROM queen.queues q
 WHERE q.tenant_id = (p->>'tenant')::uuid
   AND q.name IN (SELECT jsonb_array_elements_text(coalesce(p->'queues', '[]'::jsonb)))
$$;
