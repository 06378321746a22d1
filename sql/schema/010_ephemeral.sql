-- Ephemeral (RAM-only) queues: only their declarations are durable. The
-- contents live in the owning broker's memory and survive nothing; this table
-- holds what `POST /api/v1/ephemeral/configure` was given, so a restarted
-- broker comes back with its queues declared and empty. Not tied to
-- queen.queues: an ephemeral queue is no durable queue, and may share a name
-- with one.
CREATE TABLE IF NOT EXISTS queen.ephemeral_queues (
    tenant_id  uuid NOT NULL,
    queue      text NOT NULL,
    options    jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, queue)
);
