-- Timers (issue 14, http-api.md §16, data-model.md §2 queen.log_timers): a message
-- scheduled for later, identified by (tenant, queue, timer key). The firing job
-- (sql/functions/timers.sql, queen.timers_fire) turns due rows into messages and
-- deletes them in the same transaction.
--
-- Differences from data-model.md, and why:
--  * no claim_token / claimed_until: the claim IS the row lock of the firing
--    transaction (FOR UPDATE SKIP LOCKED, then push and delete before commit). A
--    broker that dies mid-fire loses its connection, PostgreSQL rolls the
--    transaction back and the rows are due again at once, instead of after a 30 s
--    claim lease. `too_late` is "the row is locked by a fire" (see timers_apply).
--  * backoff after a failed fire moves deliver_at forward (deliverAt is "not
--    before"), so the one index on deliver_at serves the due scan and the
--    nearest-due probe; after the last attempt deliver_at is 'infinity' (parked,
--    visible in list/peek with attempts and lastError, until cancelled or
--    rescheduled): a DLQ row needs a stored message, which a failed fire lacks.
--  * no row per queue in queen.queues is required: a push creates its queue, and
--    so does a fire.
-- `queue` and `timer_key` compare bytewise (COLLATE "C") for the keyset listing.
CREATE TABLE IF NOT EXISTS queen.log_timers (
    tenant_id    uuid        NOT NULL,
    queue        text        COLLATE "C" NOT NULL,
    timer_key    text        COLLATE "C" NOT NULL,
    partition    text        NOT NULL DEFAULT 'Default',
    deliver_at   timestamptz NOT NULL,
    txn          text        NOT NULL,
    message_id   uuid        NOT NULL,
    payload      bytea       NOT NULL,
    payload_zstd boolean     NOT NULL DEFAULT false,
    encrypted    boolean     NOT NULL DEFAULT false,
    producer_sub text,
    attempts     integer     NOT NULL DEFAULT 0,
    last_error   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, queue, timer_key)
);

-- The due scan (ORDER BY deliver_at LIMIT n) and the nearest-due probe (min).
CREATE INDEX IF NOT EXISTS log_timers_deliver_at_idx ON queen.log_timers (deliver_at);
