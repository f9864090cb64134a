-- Operator sessions in the Mini App (issue 47, item 7): an operator's signed init data opens
-- the operator's view for at most MINIAPP_OPERATOR_MAX_AGE_SECONDS, and only when it was
-- signed after the last end of operator sessions (`POST /api/v1/miniapp/end-operator-sessions`),
-- kept here as one row (seconds, as init data's `auth_date`).
CREATE TABLE operator_sessions (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  not_before INTEGER NOT NULL
);
