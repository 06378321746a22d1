-- The proxy's control plane (proxy.md §7): tenants, the cells (brokers) they
-- run on, clusters, users and their per-cluster roles, API keys (hashes only),
-- revoked session tokens, and the append-only audit table. Plans, usage
-- metering, the queue registry and the outbox of the SaaS control plane are
-- not built (README, "Running behind queen-proxy").

CREATE TABLE queen_proxy.tenants (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name       text NOT NULL UNIQUE CHECK (name <> '' AND length(name) <= 200),
    status     text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- A cell is one broker (or one mesh of brokers behind one URL) and the bearer
-- token the proxy presents to it.
CREATE TABLE queen_proxy.cells (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    url        text NOT NULL UNIQUE CHECK (url ~ '^http://[^/?#]+$'),
    token      text,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE queen_proxy.clusters (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id     uuid NOT NULL REFERENCES queen_proxy.tenants (id),
    cell_id       uuid NOT NULL REFERENCES queen_proxy.cells (id),
    -- The first DNS label of the Host the cluster answers on.
    slug          text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    broker_tenant uuid NOT NULL,
    status        text NOT NULL DEFAULT 'active'
                  CHECK (status IN ('active', 'push_blocked', 'suspended', 'deleting')),
    -- Gated feature families switched on (a missing key means off).
    features      jsonb NOT NULL DEFAULT
                  '{"streams": true, "traces": true, "kv": true, "timers": true, "ephemeral": true}',
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE queen_proxy.users (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   uuid NOT NULL REFERENCES queen_proxy.tenants (id),
    email       text NOT NULL UNIQUE CHECK (email LIKE '%_@_%'),
    is_operator boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE queen_proxy.cluster_roles (
    user_id    uuid NOT NULL REFERENCES queen_proxy.users (id) ON DELETE CASCADE,
    cluster_id uuid NOT NULL REFERENCES queen_proxy.clusters (id) ON DELETE CASCADE,
    role       text NOT NULL CHECK (role IN ('admin', 'producer', 'consumer', 'viewer')),
    PRIMARY KEY (user_id, cluster_id)
);

-- The key itself is never stored: only the SHA-256 of its whole text (PX-14).
CREATE TABLE queen_proxy.api_keys (
    id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    cluster_id uuid NOT NULL REFERENCES queen_proxy.clusters (id) ON DELETE CASCADE,
    env        text NOT NULL CHECK (env ~ '^[a-z0-9]{1,16}$'),
    key_sha256 text NOT NULL UNIQUE CHECK (key_sha256 ~ '^[0-9a-f]{64}$'),
    scopes     text[] NOT NULL CHECK (cardinality(scopes) > 0
                   AND scopes <@ ARRAY['produce', 'consume', 'admin', 'read']),
    -- Requests per second this key may make (NULL: unlimited).
    rate_rps   integer CHECK (rate_rps > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX api_keys_cluster ON queen_proxy.api_keys (cluster_id);

CREATE TABLE queen_proxy.revoked_tokens (
    jti        text PRIMARY KEY CHECK (jti <> ''),
    user_id    uuid NOT NULL REFERENCES queen_proxy.users (id) ON DELETE CASCADE,
    revoked_at timestamptz NOT NULL DEFAULT now()
);

-- One row per control-plane mutation (PX-12); nothing deletes from it (PX-13).
CREATE TABLE queen_proxy.operations (
    id         bigserial PRIMARY KEY,
    tenant_id  uuid NOT NULL REFERENCES queen_proxy.tenants (id),
    cluster_id uuid REFERENCES queen_proxy.clusters (id) ON DELETE SET NULL,
    actor      text NOT NULL CHECK (actor IN ('user', 'api_key', 'control_plane', 'system')),
    actor_id   text,
    action     text NOT NULL CHECK (action <> ''),
    target     text,
    meta       jsonb NOT NULL DEFAULT '{}',
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX operations_tenant_at ON queen_proxy.operations (tenant_id, at DESC);
CREATE INDEX operations_cluster_at ON queen_proxy.operations (cluster_id, at DESC);

CREATE TRIGGER operations_no_update_delete
    BEFORE UPDATE OR DELETE ON queen_proxy.operations
    FOR EACH ROW EXECUTE FUNCTION queen_proxy.operations_append_only();
CREATE TRIGGER operations_no_truncate
    BEFORE TRUNCATE ON queen_proxy.operations
    FOR EACH STATEMENT EXECUTE FUNCTION queen_proxy.operations_append_only();
