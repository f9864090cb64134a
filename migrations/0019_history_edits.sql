-- An edit no longer makes a turn read its whole window again (issue 17, §2): until now any
-- update of a message bumped the conversation's `history_version` (0018), and a turn after an
-- edit read and converted every row of its window, the costliest turn there is. People edit
-- their messages often.
--
-- Now an update of a message marks the row with the conversation's next edit mark (`rev`, the
-- highest so far plus one): the edit's own upsert sets it (`storage::messages`), and the trigger
-- below marks any other update that does not. A turn reads the highest mark with its rows; the next turn asks D1
-- for the rows after its copy (as before) and for the rows of the copy marked since, and puts
-- those in place of the copy's (`agent_core::context::RowCache::merge`). What the copy cannot
-- take in place still bumps `history_version`: a message leaving or joining the history
-- (`excluded` changing), a deletion, and a turn's `upto_seq` moving (0018's triggers).
ALTER TABLE messages ADD COLUMN rev INTEGER;
-- Only edited rows are in it: a new message writes nothing more.
CREATE INDEX messages_edited ON messages (conv, rev) WHERE rev IS NOT NULL;

DROP TRIGGER messages_history_updated;
-- `WHEN NEW.rev IS OLD.rev`: its own update of the row (which sets rev) does not mark it again.
CREATE TRIGGER messages_history_edited AFTER UPDATE ON messages
WHEN NEW.rev IS OLD.rev AND NEW.excluded IS OLD.excluded BEGIN
  UPDATE messages SET rev = (SELECT COALESCE(MAX(rev), 0) + 1 FROM messages WHERE conv = NEW.conv AND rev IS NOT NULL)
    WHERE seq = NEW.seq;
END;
CREATE TRIGGER messages_history_excluded AFTER UPDATE OF excluded ON messages
WHEN NEW.excluded IS NOT OLD.excluded BEGIN
  UPDATE conversations SET history_version = history_version + 1 WHERE conv = NEW.conv;
END;
