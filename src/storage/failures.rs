//! Failures the operator should see (dead letters, permanent errors), once per job key.
use crate::args;
use crate::storage::Db;
use agent_core::conversation::ConvKey;
use worker::Result;


pub async fn record_failure(db: &Db, kind: &str, job_key: Option<&str>, conv: Option<&ConvKey>, detail: &str, body: Option<&str>, now: i64) -> Result<bool> {
    let changed = db
        .run(
            "INSERT INTO failures (kind, job_key, conv, detail, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT DO NOTHING",
            args![kind, job_key, conv.map(ConvKey::to_string), detail, body, now],
        )
        .await?;
    Ok(changed > 0)
}
