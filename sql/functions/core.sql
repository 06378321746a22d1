-- Small helpers every other family uses: timestamps, uuid parsing, advisory lock keys, a shared cap.

-- ---------------------------------------------------------------------------
-- helpers
-- ---------------------------------------------------------------------------

-- ISO-8601 UTC with microseconds and 'Z' (e.g. 2025-01-31T12:34:56.123456Z).
CREATE OR REPLACE FUNCTION queen.iso(ts timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') $$;

-- Text -> uuid, NULL when not a uuid (never raises).
CREATE OR REPLACE FUNCTION queen.try_uuid(t text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT CASE WHEN t ~* '^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$'
               THEN t::uuid END $$;

-- The advisory-lock key of a (partition, consumer group) pair. Pop takes it with
-- pg_try_advisory_xact_lock, ack with pg_advisory_xact_lock.
CREATE OR REPLACE FUNCTION queen.lock_key(pid uuid, grp text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT hashtextextended(pid::text || '|' || grp, 7371) $$;

-- The 10-second slot of a newest-message time: partition_lookup.last_message_slot is this
-- expression of last_message_created_at (a generated column of
-- sql/schema/013_lookup_slot.sql, written out there; sql/test/10_push.sql checks they
-- agree). It is monotone, so "ts >= x" implies "slot >= lookup_slot(x)": readers add that
-- as a redundant bound to range-scan partition_lookup_slot_idx with the same answers.
CREATE OR REPLACE FUNCTION queen.lookup_slot(ts timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT floor(extract(epoch FROM ts - timestamptz '1970-01-01 00:00:00+00') / 10)::bigint $$;

-- Consumer-group administration (http-api.md §11): listing with lag, lagging
-- partitions, one group's detail, delete, subscription rewrite, seek.
--
-- A group's position in a partition is its partition_consumers cursor; without
-- cursor progress it is the group's subscription start (per-partition metadata
-- row, else the queue-wide one, else the beginning), exactly as pop reads it.
-- Lag is computed from partition_lookup (newest message per partition) plus at
-- most one index probe per lagging partition: no scan of queen.messages.

-- Most messages counted for an offset lag (one index range per partition); a
-- larger backlog reports this cap (a count of 10^5 rows costs ~10 ms).
CREATE OR REPLACE FUNCTION queen.cg_offset_cap() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 100000 $$;
