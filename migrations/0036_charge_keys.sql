-- A budget charge taken before an await is keyed by the run it pays for (issue 47, item 13):
-- a reminder's run (`sched:<id>:<due ms>`), a crew's continuation (`crew:<conv>:<message>:<generation>:<turn>`),
-- a guest query (`guest:<query id>`), so that the same run taken up again after a crash
-- charges nothing more. Message charges stay unkeyed (NULL: the partial index holds no entry
-- for them). A later issue reshapes the charge rows and keeps this key.
ALTER TABLE budget_charges ADD COLUMN charge_key TEXT;
CREATE UNIQUE INDEX budget_charges_by_key ON budget_charges (charge_key) WHERE charge_key IS NOT NULL;
