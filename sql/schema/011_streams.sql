-- Streams (http-api.md §19, data-model.md §3): the server half of the clients'
-- stream processing. A query is registered by name per tenant; its state rows are
-- keyed by (query, source partition, key); quota holds per-tenant stream grants.
--
-- Grants (security.md SEC-29): the reference schema grants these tables to PUBLIC,
-- so any role that can connect reads and rewrites stream definitions, state and
-- grants. Here the schema and its tables belong to the role that applies the
-- schema (the broker's own role) and PUBLIC is revoked from all of them
-- explicitly, so a database whose defaults were widened still keeps them closed.

CREATE SCHEMA IF NOT EXISTS queen_streams;

CREATE TABLE IF NOT EXISTS queen_streams.queries (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id    uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000001',
    name         text NOT NULL,
    source_queue text NOT NULL,
    sink_queue   text,
    config_hash  text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT queries_tenant_name_key UNIQUE (tenant_id, name)
);

-- partition_id is the source partition's id as the client sends it (text: the
-- SDK falls back to "unknown" when a message carries none).
CREATE TABLE IF NOT EXISTS queen_streams.state (
    query_id     uuid NOT NULL REFERENCES queen_streams.queries(id) ON DELETE CASCADE,
    partition_id text NOT NULL,
    key          text NOT NULL,
    value        jsonb NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (query_id, partition_id, key)
);

CREATE INDEX IF NOT EXISTS state_updated_at_idx ON queen_streams.state (updated_at);

-- One row per (query, source partition) that committed a cycle: its last cycle
-- and how many (dashboard). Per partition, not on the query row, so that cycles of
-- different partitions never wait on one another's row lock.
CREATE TABLE IF NOT EXISTS queen_streams.partitions (
    query_id      uuid NOT NULL REFERENCES queen_streams.queries(id) ON DELETE CASCADE,
    partition_id  text NOT NULL,
    nr_cycles     bigint NOT NULL DEFAULT 0,
    last_cycle_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (query_id, partition_id)
);

-- Per-tenant stream grants: how many queries a tenant may register (no row: no
-- limit). Written by operators (SQL); read by queen.streams_register.
CREATE TABLE IF NOT EXISTS queen_streams.quota (
    tenant_id   uuid PRIMARY KEY,
    max_queries integer NOT NULL CHECK (max_queries >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

REVOKE ALL ON SCHEMA queen_streams FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA queen_streams FROM PUBLIC;
GRANT USAGE ON SCHEMA queen_streams TO CURRENT_USER;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA queen_streams TO CURRENT_USER;
