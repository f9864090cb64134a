//! Retention: pruning the tables that only grow, in D1 round trips of bounded deletes
//! (decisions and SQL shapes in `core::background::retention`); the cron runs it.
//!
//! Invariants (INVARIANTS.md): "Bounded tables" (`PRUNE_BATCH` rows a batch), "Every SQL
//! value is bound" (table names come from the core's fixed list).

use crate::args;
use crate::storage::{rows, Db};
use agent_core::background::retention::{cutoff_ms, prune_again, prune_sql, Pruned, PRUNED, PRUNE_BATCH};

/// Prunes what is past retention; returns (table, rows deleted) for the log. One D1 round
/// trip per round; a table goes again only while its batches come back full.
pub async fn prune(db: &Db, now: i64, retention_days: u32) -> worker::Result<Vec<(&'static str, usize)>> {
    let mut due: Vec<(Pruned, i64, usize)> = PRUNED
        .into_iter()
        .filter_map(|t| cutoff_ms(&t, now, retention_days).map(|c| (t, c, 0)))
        .collect();
    let mut active: Vec<usize> = (0..due.len()).collect();
    let mut round = 0;
    while !active.is_empty() {
        let stmts = active
            .iter()
            .map(|&i| db.stmt(&prune_sql(&due[i].0), args![due[i].1, PRUNE_BATCH]))
            .collect::<worker::Result<Vec<_>>>()?;
        let results = db.batch(stmts).await?;
        let mut next = Vec::new();
        for (&i, r) in active.iter().zip(results.iter()) {
            let n = rows::<serde_json::Value>(r)?.len();
            due[i].2 += n;
            if prune_again(n, round) {
                next.push(i);
            }
        }
        active = next;
        round += 1;
    }
    Ok(due.into_iter().map(|(t, _, n)| (t.table, n)).collect())
}
