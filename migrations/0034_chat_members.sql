-- Who has written in a chat, one row per (chat, person), instead of an index entry per message
-- (issue 40: D1 rows written per message). `messages_by_user` (0023) held an entry for every
-- admitted message of a person: one of the four rows every message wrote. Its readers only ask
-- whether people have written in a chat (`storage::notes::insert_note`: a note is about a person
-- seen in the chat; `storage::consolidation::seen_in_chat`: the memories consolidation keeps),
-- which this table answers with one row each. A person's first admitted message in a chat
-- writes the row; every later one writes nothing (the trigger inserts only a key not there: not
-- `INSERT OR IGNORE`, which an upsert's update, as an edit is, overrides with its own ABORT).
-- The Mini App's export of a person's own messages in their private chat reads that chat by
-- its `(chat_id, message_id)` key.
--
-- "Has written" is "has had an admitted message in the chat": a message excluded later (an
-- edit judged after a block) does not take the person out again.
--
-- The previous release's statements still work without the index (they read more rows).
CREATE TABLE chat_members (
  chat_id INTEGER NOT NULL,
  user_id INTEGER NOT NULL,
  PRIMARY KEY (chat_id, user_id)
) WITHOUT ROWID;

CREATE TRIGGER chat_members_stored AFTER INSERT ON messages
WHEN NEW.role = 'user' AND NEW.excluded = 0 AND NEW.user_id IS NOT NULL BEGIN
  INSERT INTO chat_members (chat_id, user_id) SELECT NEW.chat_id, NEW.user_id
    WHERE NOT EXISTS (SELECT 1 FROM chat_members WHERE chat_id = NEW.chat_id AND user_id = NEW.user_id);
END;
CREATE TRIGGER chat_members_admitted AFTER UPDATE OF excluded ON messages
WHEN NEW.role = 'user' AND NEW.excluded = 0 AND NEW.user_id IS NOT NULL BEGIN
  INSERT INTO chat_members (chat_id, user_id) SELECT NEW.chat_id, NEW.user_id
    WHERE NOT EXISTS (SELECT 1 FROM chat_members WHERE chat_id = NEW.chat_id AND user_id = NEW.user_id);
END;

INSERT OR IGNORE INTO chat_members (chat_id, user_id)
  SELECT DISTINCT chat_id, user_id FROM messages WHERE role = 'user' AND excluded = 0 AND user_id IS NOT NULL;

DROP INDEX messages_by_user;
