//! Retention: how long the tables that only grow keep their rows, and how much one cron run
//! prunes. The cron deletes rows older than the cutoff in bounded batches of [`PRUNE_BATCH`],
//! repeating a table's batch while it came back full, at most [`PRUNE_ROUNDS`] times a run
//! (one D1 round trip each), so its invocation stays bounded however much is due; what is left
//! goes in the next run (every 30 minutes: up to 96,000 rows a day per table).
//!
//! Kept for `RETENTION_DAYS` (0 keeps them forever): `updates` (dedup of Telegram's
//! redeliveries, which stop within a day), `outbox` (exactly-once sends; retries end within
//! hours), `model_calls` (usage and costs) with the bot's daily token counters (`token_days`),
//! `refusals` (the audit of refused access).
//! `budget_charges` is only read for the last hour and is kept two days whatever the setting.
//! Refused senders' hourly counters (`refused_senders`) and the messages the access policy
//! refused (`messages` with `excluded = 1`, kept for the record, never in a prompt) follow the
//! setting too. Other messages, turns and memories are never pruned here. Invariants
//! (INVARIANTS.md): "Bounded tables".
//!
//! D1 bills every index entry written as a row (issue 40), so `outbox`, `budget_charges` and
//! `model_calls` have no index on their time: their rows are written in time order, and the delete reads
//! them in rowid order up to the first row still kept ([`Order::Rowid`]). A prune never deletes
//! a table's newest row: a rowid table without AUTOINCREMENT gives the newest rowid plus one,
//! so `messages.seq` (which turns and consolidation point at) never comes back.

/// Rows deleted per table per batch.
pub const PRUNE_BATCH: u32 = 500;
/// Batches per table per cron run at most.
pub const PRUNE_ROUNDS: u32 = 4;

/// Whether a table gets another batch in this run: its last one came back full and the run
/// has rounds left.
pub fn prune_again(deleted: usize, round: u32) -> bool {
    deleted >= PRUNE_BATCH as usize && round + 1 < PRUNE_ROUNDS
}

/// A table the cron prunes, by a time column in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pruned {
    pub table: &'static str,
    pub time_column: &'static str,
    /// Kept this long whatever `RETENTION_DAYS` says (`None`: follows the setting).
    pub fixed_days: Option<u32>,
    /// Only the rows this (fixed) condition holds for are pruned; an index on `time_column`
    /// with the same condition serves the delete.
    pub only: Option<&'static str>,
    /// `time_column` is in seconds (Telegram's dates), not milliseconds.
    pub seconds: bool,
    /// How the delete finds the oldest rows.
    pub order: Order,
    /// The table's newest row is never deleted (its rowid is what others point at).
    pub keep_newest: bool,
}

/// How a prune finds a table's oldest rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Order {
    /// Through an index on the time column.
    Index,
    /// In rowid order (the rows are written in time order and have no index on their time),
    /// up to the first row that is kept: it reads what it deletes, and one row more.
    Rowid,
}

const fn ms(table: &'static str, time_column: &'static str, fixed_days: Option<u32>) -> Pruned {
    Pruned { table, time_column, fixed_days, only: None, seconds: false, order: Order::Index, keep_newest: false }
}

const fn by_rowid(table: &'static str, time_column: &'static str, fixed_days: Option<u32>) -> Pruned {
    Pruned { table, time_column, fixed_days, only: None, seconds: false, order: Order::Rowid, keep_newest: false }
}

pub const PRUNED: [Pruned; 8] = [
    ms("updates", "received_at", None),
    by_rowid("outbox", "created_at", None),
    by_rowid("model_calls", "created_at", None),
    // The bot's tokens per day (migration 0025): its key is the day's midnight, its rowid.
    ms("token_days", "day_ms", None),
    ms("refusals", "created_at", None),
    by_rowid("budget_charges", "created_at", Some(2)),
    ms("refused_senders", "window_start", None),
    // What refused senders wrote (migration 0020's partial index `messages_refused`).
    Pruned { table: "messages", time_column: "date", fixed_days: None, only: Some("excluded = 1"), seconds: true, order: Order::Index, keep_newest: true },
];

const DAY_MS: i64 = 86_400_000;

/// Rows of `t` older than the returned time (in `t.time_column`'s unit) are pruned at
/// `now_ms`; `None`: keep all.
pub fn cutoff_ms(t: &Pruned, now_ms: i64, retention_days: u32) -> Option<i64> {
    kept_since(now_ms, t.fixed_days.unwrap_or(retention_days)).map(|c| if t.seconds { c.div_euclid(1000) } else { c })
}

/// The oldest time (ms) a row kept for `days` may have at `now_ms`; `None` keeps rows forever
/// (`days` 0). Also what a Business chat's messages are pruned by (`bot::business`).
pub fn kept_since(now_ms: i64, days: u32) -> Option<i64> {
    (days > 0).then(|| now_ms.saturating_sub(i64::from(days).saturating_mul(DAY_MS)))
}

/// The bounded delete for one table: `?1` the cutoff, `?2` the batch size. Table and column
/// names come from [`PRUNED`] only, never from outside.
pub fn prune_sql(t: &Pruned) -> String {
    let only = t.only.map(|c| format!("{c} AND ")).unwrap_or_default();
    let (table, col) = (t.table, t.time_column);
    // Never the newest message (see the module's text).
    let newest = if t.keep_newest { format!(" AND rowid < (SELECT MAX(rowid) FROM {table})") } else { String::new() };
    match t.order {
        Order::Index => format!(
            "DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} WHERE {only}{col} < ?1{newest} ORDER BY {col} LIMIT ?2) RETURNING 1"
        ),
        Order::Rowid => format!(
            "DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} WHERE {only}{col} < ?1{newest}
               AND rowid < COALESCE((SELECT rowid FROM {table} WHERE {col} >= ?1 ORDER BY rowid LIMIT 1), (SELECT MAX(rowid) FROM {table}) + 1)
             ORDER BY rowid LIMIT ?2) RETURNING 1"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutoffs_follow_the_setting_and_zero_keeps_everything() {
        let now = 100 * DAY_MS;
        let updates = PRUNED[0];
        assert_eq!(cutoff_ms(&updates, now, 30), Some(70 * DAY_MS));
        assert_eq!(cutoff_ms(&updates, now, 0), None);
        let charges = PRUNED.iter().find(|t| t.table == "budget_charges").copied().expect("pruned");
        assert_eq!(cutoff_ms(&charges, now, 0), Some(98 * DAY_MS), "budget charges are short-lived anyway");
        assert_eq!(cutoff_ms(&updates, 0, u32::MAX).map(|c| c < 0), Some(true), "no overflow");
        let refused = PRUNED.iter().find(|t| t.table == "messages").copied().expect("pruned");
        assert_eq!(cutoff_ms(&refused, now, 30), Some(70 * DAY_MS / 1000), "messages' dates are seconds");
        assert_eq!(cutoff_ms(&refused, now, 0), None);
    }

    #[test]
    fn only_refused_messages_are_pruned() {
        let sql = prune_sql(PRUNED.iter().find(|t| t.table == "messages").expect("pruned"));
        assert_eq!(
            sql,
            "DELETE FROM messages WHERE rowid IN (SELECT rowid FROM messages WHERE excluded = 1 AND date < ?1 AND rowid < (SELECT MAX(rowid) FROM messages) ORDER BY date LIMIT ?2) RETURNING 1"
        );
        // The partial index the delete reads through has the same condition.
        let migration = include_str!("../../../../migrations/0020_refused_senders.sql");
        assert!(migration.contains("ON messages (date) WHERE excluded = 1"), "{migration}");
    }

    #[test]
    fn tables_without_a_time_index_are_pruned_in_rowid_order_up_to_the_first_kept_row() {
        let outbox = PRUNED.iter().find(|t| t.table == "outbox").expect("the outbox is pruned");
        let sql = prune_sql(outbox);
        assert!(sql.contains("ORDER BY rowid LIMIT ?2"), "{sql}");
        assert!(sql.contains("(SELECT rowid FROM outbox WHERE created_at >= ?1 ORDER BY rowid LIMIT 1)"), "{sql}");
        // The migration that dropped their time indexes.
        let migration = [
            include_str!("../../../../migrations/0023_rows_per_message.sql"),
            include_str!("../../../../migrations/0025_token_days.sql"),
        ]
        .concat();
        for t in PRUNED.iter().filter(|t| t.order == Order::Rowid) {
            assert!(migration.contains(&format!("DROP INDEX {}_by_time", t.table)) || migration.contains(&format!("DROP TABLE {}", t.table)), "{}", t.table);
        }
    }

    #[test]
    fn no_prune_deletes_the_newest_message() {
        let messages = PRUNED.iter().find(|t| t.table == "messages").expect("refused messages are pruned");
        assert!(messages.keep_newest);
        assert!(prune_sql(messages).contains("AND rowid < (SELECT MAX(rowid) FROM messages)"));
    }

    #[test]
    fn a_full_batch_goes_again_within_the_rounds() {
        assert!(prune_again(500, 0));
        assert!(!prune_again(499, 0), "a short batch means nothing is left");
        assert!(!prune_again(500, PRUNE_ROUNDS - 1), "bounded");
    }

    #[test]
    fn the_delete_is_bounded_and_names_only_known_tables() {
        for t in PRUNED {
            let sql = prune_sql(&t);
            assert!(sql.contains("LIMIT ?2") && sql.contains("< ?1"), "{sql}");
            assert!(sql.starts_with(&format!("DELETE FROM {} ", t.table)));
        }
    }
}
