TRUNCATE qt.consumed;
SELECT queen.configure('{"queue":"conc.q"}');
