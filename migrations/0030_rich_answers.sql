-- Rich answers (issue 36): a person's `/rich off` (1) or `/rich on` (0). A client without
-- rich-message support shows a rich message as nothing and the Bot API offers no fallback text,
-- so each person can turn them off for their private chat. Rows written by the previous
-- release's code get 0 (rich answers as RICH_MESSAGES says).
ALTER TABLE users ADD COLUMN rich_off INTEGER NOT NULL DEFAULT 0;
