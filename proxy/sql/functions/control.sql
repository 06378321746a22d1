-- The control plane's mutations (proxy.md §7). Each validates, writes, appends
-- exactly one row to queen_proxy.operations (PX-12) through record_operation,
-- and notifies queen_proxy_inval with the cluster id so every running proxy
-- reloads its snapshot. Errors carry SQLSTATE 22023 (invalid_parameter_value)
-- or P0002 (no_data_found) with a message fit for the admin command line.

CREATE OR REPLACE FUNCTION queen_proxy.record_operation(
    p_tenant uuid, p_cluster uuid, p_actor text, p_actor_id text,
    p_action text, p_target text, p_meta jsonb)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO queen_proxy.operations (tenant_id, cluster_id, actor, actor_id, action, target, meta)
    VALUES (p_tenant, p_cluster, p_actor, p_actor_id, p_action, p_target, coalesce(p_meta, '{}'));
    IF p_cluster IS NOT NULL THEN
        PERFORM pg_notify('queen_proxy_inval', p_cluster::text);
    ELSE
        PERFORM pg_notify('queen_proxy_inval', '');
    END IF;
END;
$$;

-- The cluster of a slug, or an error naming it.
CREATE OR REPLACE FUNCTION queen_proxy.cluster_by_slug(p_slug text)
RETURNS queen_proxy.clusters
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    c queen_proxy.clusters;
BEGIN
    SELECT * INTO c FROM queen_proxy.clusters WHERE slug = p_slug;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no cluster with slug %', p_slug USING ERRCODE = 'no_data_found';
    END IF;
    RETURN c;
END;
$$;

-- Creates (or reuses) the tenant and the cell, and creates the cluster.
CREATE OR REPLACE FUNCTION queen_proxy.bootstrap_tenant(
    p_tenant_name text, p_slug text, p_broker_url text, p_broker_token text,
    p_broker_tenant uuid)
RETURNS TABLE (tenant_id uuid, cluster_id uuid, broker_tenant uuid)
LANGUAGE plpgsql
AS $$
DECLARE
    t uuid;
    cell uuid;
    c uuid;
    bt uuid := coalesce(p_broker_tenant, gen_random_uuid());
BEGIN
    IF p_broker_url !~ '^http://[^/?#]+$' THEN
        RAISE EXCEPTION 'broker url must be http://host:port (got %)', p_broker_url
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_slug !~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$' THEN
        RAISE EXCEPTION 'cluster slug must be one lower-case DNS label (got %)', p_slug
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM queen_proxy.clusters WHERE slug = p_slug) THEN
        RAISE EXCEPTION 'cluster slug % is taken', p_slug USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO queen_proxy.tenants (name) VALUES (p_tenant_name)
    ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
    RETURNING id INTO t;
    INSERT INTO queen_proxy.cells (url, token) VALUES (p_broker_url, p_broker_token)
    ON CONFLICT (url) DO UPDATE SET token = EXCLUDED.token
    RETURNING id INTO cell;
    INSERT INTO queen_proxy.clusters (tenant_id, cell_id, slug, broker_tenant)
    VALUES (t, cell, p_slug, bt)
    RETURNING id INTO c;
    PERFORM queen_proxy.record_operation(t, c, 'control_plane', NULL, 'bootstrap_tenant', p_slug,
        jsonb_build_object('tenant', p_tenant_name, 'brokerUrl', p_broker_url,
                           'brokerTenant', bt, 'brokerToken', p_broker_token IS NOT NULL));
    RETURN QUERY SELECT t, c, bt;
END;
$$;

-- Records a key issued by the caller; only its SHA-256 arrives here.
CREATE OR REPLACE FUNCTION queen_proxy.issue_api_key(
    p_slug text, p_env text, p_sha256 text, p_scopes text[], p_rate_rps integer)
RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE
    c queen_proxy.clusters := queen_proxy.cluster_by_slug(p_slug);
    k uuid;
BEGIN
    IF cardinality(p_scopes) IS NULL OR cardinality(p_scopes) = 0
       OR NOT p_scopes <@ ARRAY['produce', 'consume', 'admin', 'read'] THEN
        RAISE EXCEPTION 'scopes must be a non-empty subset of produce, consume, admin, read'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO queen_proxy.api_keys (cluster_id, env, key_sha256, scopes, rate_rps)
    VALUES (c.id, p_env, p_sha256, p_scopes, p_rate_rps)
    RETURNING id INTO k;
    PERFORM queen_proxy.record_operation(c.tenant_id, c.id, 'control_plane', NULL, 'issue_api_key',
        k::text, jsonb_build_object('scopes', p_scopes, 'env', p_env, 'rateRps', p_rate_rps));
    RETURN k;
END;
$$;

CREATE OR REPLACE FUNCTION queen_proxy.revoke_api_key(p_id uuid)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    c queen_proxy.clusters;
BEGIN
    SELECT cl.* INTO c FROM queen_proxy.api_keys k
    JOIN queen_proxy.clusters cl ON cl.id = k.cluster_id WHERE k.id = p_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no API key with id %', p_id USING ERRCODE = 'no_data_found';
    END IF;
    UPDATE queen_proxy.api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = p_id;
    PERFORM queen_proxy.record_operation(c.tenant_id, c.id, 'control_plane', NULL, 'revoke_api_key',
        p_id::text, '{}');
END;
$$;

CREATE OR REPLACE FUNCTION queen_proxy.set_cluster_status(p_slug text, p_status text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    c queen_proxy.clusters := queen_proxy.cluster_by_slug(p_slug);
BEGIN
    IF p_status NOT IN ('active', 'push_blocked', 'suspended', 'deleting') THEN
        RAISE EXCEPTION 'status must be active, push_blocked, suspended or deleting (got %)', p_status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE queen_proxy.clusters SET status = p_status WHERE id = c.id;
    PERFORM queen_proxy.record_operation(c.tenant_id, c.id, 'control_plane', NULL, 'set_cluster_status',
        p_slug, jsonb_build_object('from', c.status, 'to', p_status));
END;
$$;

CREATE OR REPLACE FUNCTION queen_proxy.create_user(p_tenant_name text, p_email text, p_operator boolean)
RETURNS uuid
LANGUAGE plpgsql
AS $$
DECLARE
    t uuid;
    u uuid;
BEGIN
    SELECT id INTO t FROM queen_proxy.tenants WHERE name = p_tenant_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no tenant named %', p_tenant_name USING ERRCODE = 'no_data_found';
    END IF;
    INSERT INTO queen_proxy.users (tenant_id, email, is_operator)
    VALUES (t, p_email, coalesce(p_operator, false))
    RETURNING id INTO u;
    PERFORM queen_proxy.record_operation(t, NULL, 'control_plane', NULL, 'create_user', u::text,
        jsonb_build_object('email', p_email, 'operator', coalesce(p_operator, false)));
    RETURN u;
END;
$$;

CREATE OR REPLACE FUNCTION queen_proxy.grant_role(p_user uuid, p_slug text, p_role text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    c queen_proxy.clusters := queen_proxy.cluster_by_slug(p_slug);
BEGIN
    IF p_role NOT IN ('admin', 'producer', 'consumer', 'viewer') THEN
        RAISE EXCEPTION 'role must be admin, producer, consumer or viewer (got %)', p_role
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM queen_proxy.users WHERE id = p_user) THEN
        RAISE EXCEPTION 'no user with id %', p_user USING ERRCODE = 'no_data_found';
    END IF;
    INSERT INTO queen_proxy.cluster_roles (user_id, cluster_id, role) VALUES (p_user, c.id, p_role)
    ON CONFLICT (user_id, cluster_id) DO UPDATE SET role = EXCLUDED.role;
    PERFORM queen_proxy.record_operation(c.tenant_id, c.id, 'control_plane', NULL, 'grant_role',
        p_user::text, jsonb_build_object('role', p_role));
END;
$$;

CREATE OR REPLACE FUNCTION queen_proxy.revoke_session(p_user uuid, p_jti text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    t uuid;
BEGIN
    SELECT tenant_id INTO t FROM queen_proxy.users WHERE id = p_user;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no user with id %', p_user USING ERRCODE = 'no_data_found';
    END IF;
    INSERT INTO queen_proxy.revoked_tokens (jti, user_id) VALUES (p_jti, p_user)
    ON CONFLICT (jti) DO NOTHING;
    PERFORM queen_proxy.record_operation(t, NULL, 'control_plane', NULL, 'revoke_session', p_jti, '{}');
END;
$$;

-- The keys of a cluster, newest first (a read: no operation row).
CREATE OR REPLACE FUNCTION queen_proxy.list_api_keys(p_slug text)
RETURNS TABLE (id uuid, env text, scopes text[], rate_rps integer,
               created_at timestamptz, revoked_at timestamptz)
LANGUAGE sql STABLE
AS $$
    SELECT k.id, k.env, k.scopes, k.rate_rps, k.created_at, k.revoked_at
    FROM queen_proxy.api_keys k JOIN queen_proxy.clusters c ON c.id = k.cluster_id
    WHERE c.slug = p_slug
    ORDER BY k.created_at DESC, k.id;
$$;
