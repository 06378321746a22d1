-- queen.pop_candidates took a sixth argument, p_deep (how deep its second sweep may go;
-- sql/functions/pop.sql): the five-argument signature is gone.
DROP FUNCTION IF EXISTS queen.pop_candidates(uuid[], text, text, timestamptz, int);
