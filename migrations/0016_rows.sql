-- D1 rows per message (issue 17, section 3). D1 bills every index entry it writes as a row
-- written: a message's insert wrote the row, four index entries, the AUTOINCREMENT counter and
-- the conversation's pointer (seven). `messages_by_update` serves one query only, the
-- redelivery check of a reaction (`messages.update_id` of a reaction event, whose message_id
-- is NULL); kept for those rows alone, every other message writes one index entry less.
DROP INDEX messages_by_update;
CREATE INDEX messages_by_update ON messages (update_id) WHERE message_id IS NULL;
