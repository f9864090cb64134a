-- search_memory over media (issue 35, item 4) read every chat's described media with LIKE and,
-- for each match, searched this chat's messages' parts with instr: rows read grew with the media
-- of all chats times the messages of this one. Now a (chat, file, message) record, written by
-- triggers whenever a message with a file is stored or its parts change, is the search's way in:
-- it reads this chat's own files, their media rows by key, and each carrying message by its
-- (chat_id, message_id) key to check it is not excluded.
CREATE TABLE media_messages (
  chat_id INTEGER NOT NULL,
  file_unique_id TEXT NOT NULL,
  message_id INTEGER NOT NULL,
  PRIMARY KEY (chat_id, file_unique_id, message_id)
) WITHOUT ROWID;

CREATE TRIGGER media_messages_stored AFTER INSERT ON messages
WHEN NEW.message_id IS NOT NULL AND instr(NEW.parts, '"file_unique_id"') > 0 BEGIN
  INSERT OR IGNORE INTO media_messages (chat_id, file_unique_id, message_id)
    SELECT NEW.chat_id, json_extract(p.value, '$.file_unique_id'), NEW.message_id FROM json_each(NEW.parts) p
    WHERE json_extract(p.value, '$.file_unique_id') IS NOT NULL;
END;
CREATE TRIGGER media_messages_changed AFTER UPDATE OF parts, message_id ON messages
WHEN NEW.message_id IS NOT NULL AND instr(NEW.parts, '"file_unique_id"') > 0 BEGIN
  INSERT OR IGNORE INTO media_messages (chat_id, file_unique_id, message_id)
    SELECT NEW.chat_id, json_extract(p.value, '$.file_unique_id'), NEW.message_id FROM json_each(NEW.parts) p
    WHERE json_extract(p.value, '$.file_unique_id') IS NOT NULL;
END;

-- The files of the messages stored so far.
INSERT OR IGNORE INTO media_messages (chat_id, file_unique_id, message_id)
  SELECT m.chat_id, json_extract(p.value, '$.file_unique_id'), m.message_id FROM messages m, json_each(m.parts) p
  WHERE m.message_id IS NOT NULL AND instr(m.parts, '"file_unique_id"') > 0
    AND json_extract(p.value, '$.file_unique_id') IS NOT NULL;
