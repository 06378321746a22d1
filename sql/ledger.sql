-- The ledger of applied schema files. Run first at every boot, before anything
-- else: the loader reads it to skip the schema files that ran already.
CREATE SCHEMA IF NOT EXISTS queen;

-- One row per sql/schema file applied: its name, the sha256 (hex) of its text
-- when it ran, and when. A file whose text no longer matches its checksum stops
-- the boot (schema files are append-only once landed).
CREATE TABLE IF NOT EXISTS queen.schema_migrations (
    name       text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
