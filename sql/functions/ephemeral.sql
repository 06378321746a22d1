-- Ephemeral queue declarations (http-api.md §18; the table is
-- schema/010_ephemeral.sql). The broker validates the options before it
-- calls these; PostgreSQL only keeps them.

-- queen.eph_declare({tenant, queue, options}) -> {queue, options, created: bool}
CREATE OR REPLACE FUNCTION queen.eph_declare(p jsonb) RETURNS jsonb
LANGUAGE sql AS $$
    INSERT INTO queen.ephemeral_queues AS e (tenant_id, queue, options)
    VALUES ((p->>'tenant')::uuid, p->>'queue', coalesce(p->'options', '{}'::jsonb))
    ON CONFLICT (tenant_id, queue)
        DO UPDATE SET options = EXCLUDED.options, updated_at = now()
    RETURNING jsonb_build_object('queue', e.queue, 'options', e.options,
                                 'created', e.created_at = e.updated_at)
$$;

-- queen.eph_undeclare({tenant, queue}) -> {declared: bool (a row was deleted)}
CREATE OR REPLACE FUNCTION queen.eph_undeclare(p jsonb) RETURNS jsonb
LANGUAGE sql AS $$
    WITH d AS (
        DELETE FROM queen.ephemeral_queues
         WHERE tenant_id = (p->>'tenant')::uuid AND queue = p->>'queue'
        RETURNING 1
    )
    SELECT jsonb_build_object('declared', EXISTS (SELECT 1 FROM d))
$$;

-- queen.eph_list({}) -> {queues: [{tenant, queue, options}]}: every declaration,
-- read by each shard at boot and on its refresh period.
CREATE OR REPLACE FUNCTION queen.eph_list(p jsonb) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('queues', coalesce(jsonb_agg(jsonb_build_object(
               'tenant', e.tenant_id, 'queue', e.queue, 'options', e.options)
               ORDER BY e.tenant_id, e.queue), '[]'::jsonb))
      FROM queen.ephemeral_queues e
$$;
