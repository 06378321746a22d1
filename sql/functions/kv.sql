-- Key/value store (issue 14, http-api.md §15) and the KV/timers kill switches
-- (http-api.md §13, SEC-23).

-- ---------------------------------------------------------------------------
-- queen.kv_switch_get() -> {kvEnabled, timersScheduleEnabled, timersFireEnabled}
--   A missing row counts as on.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.kv_switch_get() RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'kvEnabled', coalesce((SELECT (value->>'enabled')::boolean
                               FROM queen.system_state WHERE key = 'kv_enabled'), true),
        'timersScheduleEnabled', coalesce((SELECT (value->>'enabled')::boolean
                               FROM queen.system_state WHERE key = 'timers_schedule_enabled'), true),
        'timersFireEnabled', coalesce((SELECT (value->>'enabled')::boolean
                               FROM queen.system_state WHERE key = 'timers_fire_enabled'), true))
$$;

-- ---------------------------------------------------------------------------
-- queen.kv_switch_set({kvEnabled?, timersScheduleEnabled?, timersFireEnabled?})
--   -> the three values after the change (as kv_switch_get). Absent = unchanged.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.kv_switch_set(p jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO queen.system_state (key, value, updated_at)
    SELECT s.key, jsonb_build_object('enabled', (p->>s.field)::boolean), now()
      FROM (VALUES ('kv_enabled', 'kvEnabled'),
                   ('timers_schedule_enabled', 'timersScheduleEnabled'),
                   ('timers_fire_enabled', 'timersFireEnabled')) AS s(key, field)
     WHERE jsonb_typeof(p->s.field) = 'boolean'
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now();
    RETURN queen.kv_switch_get();
END $$;

-- ---------------------------------------------------------------------------
-- queen.kv_sweep(p_limit) -> rows deleted: at most p_limit keys past their
--   expiry, skipping rows a KV call holds (SKIP LOCKED), so sweepers on several
--   brokers and live calls never wait on each other.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION queen.kv_sweep(p_limit int) RETURNS int
LANGUAGE sql AS $$
    WITH victims AS (
        SELECT tenant_id, namespace, key FROM queen.kv
         WHERE expires_at IS NOT NULL AND expires_at <= now()
         ORDER BY expires_at
         LIMIT p_limit
           FOR UPDATE SKIP LOCKED
    ), gone AS (
        DELETE FROM queen.kv k USING victims v
         WHERE k.tenant_id = v.tenant_id AND k.namespace = v.namespace AND k.key = v.key
           AND k.expires_at <= now()
        RETURNING 1
    )
    SELECT count(*)::int FROM gone
$$;
