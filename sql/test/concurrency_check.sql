-- After 4 concurrent pushers (60 calls x 10 items each) and a concurrent autoAck consumer:
-- drain the rest, then every message must have been delivered exactly once (a message
-- committed behind the consumer's cursor would be skipped forever).
INSERT INTO qt.consumed SELECT m->>'id' FROM jsonb_array_elements(queen.pop('{"queue":"conc.q","group":"c1","batch":100000,"autoAck":true}')->'messages') m;
DO $$
DECLARE n_msg int; n_cons int; n_dist int; bad int;
BEGIN
  SELECT count(*) INTO n_msg FROM queen.messages WHERE partition_id = qt.pid('conc.q', 'P');
  SELECT count(*), count(DISTINCT id) INTO n_cons, n_dist FROM qt.consumed;
  RAISE NOTICE 'messages %, consumed % (distinct %)', n_msg, n_cons, n_dist;
  ASSERT n_msg = 2400, 'all pushed: ' || n_msg;
  ASSERT n_cons = n_msg AND n_dist = n_msg, format('every message delivered exactly once: %s/%s/%s', n_msg, n_cons, n_dist);
  -- per producer, id order (= push order) equals position order
  SELECT count(*) INTO bad FROM (
    SELECT split_part(transaction_id, '-', 1) AS w,
           row_number() OVER (PARTITION BY split_part(transaction_id, '-', 1) ORDER BY id) AS by_id,
           row_number() OVER (PARTITION BY split_part(transaction_id, '-', 1) ORDER BY created_at, id) AS by_pos
      FROM queen.messages WHERE partition_id = qt.pid('conc.q', 'P')) x
   WHERE by_id <> by_pos;
  ASSERT bad = 0, 'push order = position order per producer';
  -- one created_at per call, distinct across calls
  SELECT count(*) INTO bad FROM (
    SELECT created_at FROM queen.messages WHERE partition_id = qt.pid('conc.q', 'P')
     GROUP BY created_at HAVING count(DISTINCT split_part(transaction_id, '-', 1) || split_part(transaction_id, '-', 2)) > 1) x;
  ASSERT bad = 0, 'two calls share a created_at';
  ASSERT (SELECT last_message_id FROM queen.partition_lookup WHERE partition_id = qt.pid('conc.q', 'P'))
       = (SELECT id FROM queen.messages WHERE partition_id = qt.pid('conc.q', 'P') ORDER BY created_at DESC, id DESC LIMIT 1),
       'lookup = newest message';
END $$;
