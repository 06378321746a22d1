-- Trigger functions of the proxy's schema (re-applied every boot).

-- queen_proxy.operations is append-only (PX-13): no UPDATE, DELETE or TRUNCATE
-- for any role. The one change allowed is the foreign key's own ON DELETE SET
-- NULL, so history outlives a deleted cluster: cluster_id becomes NULL, nothing
-- else moves, and the cluster it named no longer exists.
CREATE OR REPLACE FUNCTION queen_proxy.operations_append_only()
RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    -- Nested, not one AND: OLD is unassigned in the TRUNCATE (statement) trigger.
    IF TG_OP = 'UPDATE' THEN
        IF OLD.cluster_id IS NOT NULL AND NEW.cluster_id IS NULL
           AND (NEW.id, NEW.tenant_id, NEW.actor, NEW.actor_id, NEW.action, NEW.target, NEW.meta, NEW.at)
               IS NOT DISTINCT FROM
               (OLD.id, OLD.tenant_id, OLD.actor, OLD.actor_id, OLD.action, OLD.target, OLD.meta, OLD.at)
           AND NOT EXISTS (SELECT 1 FROM queen_proxy.clusters c WHERE c.id = OLD.cluster_id)
        THEN
            RETURN NEW;
        END IF;
    END IF;
    RAISE EXCEPTION 'queen_proxy.operations is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
