-- Maintenance flags and per-queue security flags.

-- Maintenance flags in queen.system_state (semantics.md §15, http-api.md §13).

-- queen.system_state_get({}) -> {maintenanceMode, popMaintenanceMode}
CREATE OR REPLACE FUNCTION queen.system_state_get(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'maintenanceMode', coalesce((SELECT (value->>'enabled')::boolean
                                     FROM queen.system_state WHERE key = 'maintenance_mode'), false),
        'popMaintenanceMode', coalesce((SELECT (value->>'enabled')::boolean
                                        FROM queen.system_state WHERE key = 'pop_maintenance_mode'), false))
$$;

-- queen.system_state_set({key: "maintenance_mode"|"pop_maintenance_mode", enabled: bool})
--   -> the flags after the change (as system_state_get)
CREATE OR REPLACE FUNCTION queen.system_state_set(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    IF p->>'key' NOT IN ('maintenance_mode', 'pop_maintenance_mode') THEN
        RAISE EXCEPTION 'unknown system_state key %', p->>'key';
    END IF;
    INSERT INTO queen.system_state (key, value, updated_at)
    VALUES (p->>'key', jsonb_build_object('enabled', (p->>'enabled')::boolean), now())
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now();
    RETURN queen.system_state_get('{}'::jsonb);
END $$;

-- Security (issue 6): what the shards need to know about queues for
-- encryption at rest.

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
