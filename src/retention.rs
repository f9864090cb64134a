//! Retention at the edge: the cron prunes the tables that only grow, in one D1 round trip of
//! bounded deletes (decisions and SQL shapes in `core::retention`).
//!
//! Invariant: at most `PRUNE_BATCH` rows per table per run; table names come from the core's
//! fixed list, values are bound.

use crate::args;
use crate::env::{now_ms, Ctx};
use agent_core::retention::{cutoff_ms, prune_sql, PRUNED, PRUNE_BATCH};

/// Prunes what is past retention; returns (table, rows deleted) for the log.
pub async fn prune(ctx: &Ctx) -> worker::Result<Vec<(&'static str, usize)>> {
    let db = ctx.db();
    let now = now_ms();
    let mut tables = Vec::new();
    let mut stmts = Vec::new();
    for t in PRUNED {
        if let Some(cutoff) = cutoff_ms(&t, now, ctx.cfg.retention_days) {
            stmts.push(db.stmt(&prune_sql(&t), args![cutoff, PRUNE_BATCH])?);
            tables.push(t.table);
        }
    }
    if stmts.is_empty() {
        return Ok(Vec::new());
    }
    let results = db.batch(stmts).await?;
    let mut out = Vec::new();
    for (table, r) in tables.into_iter().zip(results.iter()) {
        out.push((table, crate::db::rows::<serde_json::Value>(r)?.len()));
    }
    Ok(out)
}
