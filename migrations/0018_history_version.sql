-- A turn over a long history reads only what is new (issue 17): the chat object keeps the rows
-- its last turn loaded (`agent_core::context::RowCache`) and asks D1 for the messages after
-- them. That holds because a conversation's stored messages change in two ways only: a new
-- message gets a higher seq, and everything else bumps `history_version`, which the turn reads
-- with its rows; a changed version makes the turn read its whole window again.
--   * an edit (the upsert of an edited message) or any other update of a message;
--   * a deletion of a message (nothing deletes them today);
--   * a turn's `upto_seq` moving (its retry saw more), which places the bot's answer.
ALTER TABLE conversations ADD COLUMN history_version INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER messages_history_updated AFTER UPDATE ON messages BEGIN
  UPDATE conversations SET history_version = history_version + 1 WHERE conv = NEW.conv;
END;
CREATE TRIGGER messages_history_deleted AFTER DELETE ON messages BEGIN
  UPDATE conversations SET history_version = history_version + 1 WHERE conv = OLD.conv;
END;
CREATE TRIGGER turns_history_placed AFTER UPDATE OF upto_seq ON turns
WHEN OLD.upto_seq IS NOT NEW.upto_seq BEGIN
  UPDATE conversations SET history_version = history_version + 1 WHERE conv = NEW.conv;
END;
