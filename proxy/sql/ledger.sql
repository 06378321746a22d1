-- The proxy's schema and its ledger of applied schema files (every boot).
CREATE SCHEMA IF NOT EXISTS queen_proxy;

CREATE TABLE IF NOT EXISTS queen_proxy.schema_migrations (
    name       text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
