-- Key/value store (issue 14; data-model.md §2 "queen.kv"), and the seeded
-- runtime kill switches of the KV and the timers (system_state, SEC-23).
--
-- Keys are scoped by (tenant, namespace, key), compared bytewise (COLLATE "C")
-- so prefix scans and cursors run in byte order on the primary key. Versions
-- come from one global sequence (compared for equality only). expires_at NULL
-- means forever; every read filters expires_at > now(), so an expired row is
-- invisible before the sweeper deletes it. `shard` (a hash of the key, 0..15)
-- spreads sweeper work. fillfactor leaves room on each page so an update
-- (incr, put over a live key) stays a HOT update: value and version are in no
-- index.

CREATE SEQUENCE IF NOT EXISTS queen.kv_version_seq;

CREATE TABLE IF NOT EXISTS queen.kv (
    tenant_id  uuid NOT NULL,
    namespace  text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    value      jsonb NOT NULL,
    version    bigint NOT NULL,
    expires_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    shard      smallint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, namespace, key)
) WITH (fillfactor = 80);

CREATE INDEX IF NOT EXISTS kv_expires_at_idx ON queen.kv (expires_at)
    WHERE expires_at IS NOT NULL;

INSERT INTO queen.system_state (key, value) VALUES
    ('kv_enabled', '{"enabled": true}'),
    ('timers_schedule_enabled', '{"enabled": true}'),
    ('timers_fire_enabled', '{"enabled": true}')
ON CONFLICT (key) DO NOTHING;
