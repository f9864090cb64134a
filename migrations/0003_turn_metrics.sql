-- What each turn cost in D1 (round trips and statements), next to its subrequests.
ALTER TABLE turns ADD COLUMN d1_round_trips INTEGER;
ALTER TABLE turns ADD COLUMN d1_statements INTEGER;
