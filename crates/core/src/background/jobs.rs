//! Jobs on the retry queue, and what to do with each after it ran: ack, requeue with backoff,
//! or dead-letter. Pure: the queue consumer only carries these decisions out.
//!
//! Invariants:
//! - A job carries its kind, its attempt number and an idempotency key; the same key never
//!   does its work twice (the handlers check what is already stored).
//! - Transient failures are retried with exponential backoff and jitter, never sooner than a
//!   server's Retry-After; permanent failures and the last attempt go to the dead-letter queue.

use crate::conversation::{conv_key_text, need, ConvKey};
use serde::{Deserialize, Serialize};

/// A job on the queue, as `{"kind": "turn", ...}`; read through `JobFields`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", try_from = "JobFields")]
pub enum Job {
    /// Run the model turn `turn_id` of conversation `conv` again.
    Turn {
        #[serde(with = "conv_key_text")]
        conv: ConvKey,
        turn_id: String,
        attempt: u32,
    },
    /// Carry out step `step` of the plan of `turn_id` again (a Telegram send).
    Step {
        #[serde(with = "conv_key_text")]
        conv: ConvKey,
        turn_id: String,
        step: usize,
        attempt: u32,
    },
    /// Consolidate a conversation's new messages into memories and summaries.
    Consolidate {
        #[serde(with = "conv_key_text")]
        conv: ConvKey,
        attempt: u32,
    },
    /// Answer a guest query (`crate::guest`): ask the model from what the update carried and
    /// edit the answer into the placeholder `inline_message_id`. It carries the update's text
    /// itself: nothing of the host chat is stored in D1.
    /// (`data`: `guest::GuestJob` as JSON text, read field by field: one small variant in this
    /// enum's deserializer, which every queued job goes through.)
    Guest { query_id: String, caller: i64, data: String, attempt: u32 },
    /// Draft a reply to a contact's burst in a business chat (`crate::business::suggest`):
    /// `upto` is the burst's last message, `connection` the owner's Business connection.
    Business { owner: i64, contact: i64, upto: i64, connection: String, attempt: u32 },
}

/// A `Job` as queued, read as one flat struct: serde's internally tagged enums buffer every
/// field before they choose the variant, which costs the wasm about twice this code. The same
/// rules: a variant's missing field, a conversation key that does not parse or an unknown kind
/// is an error; other fields are ignored.
#[derive(Deserialize)]
struct JobFields {
    kind: String,
    conv: Option<String>,
    turn_id: Option<String>,
    step: Option<usize>,
    attempt: Option<u32>,
    query_id: Option<String>,
    caller: Option<i64>,
    data: Option<String>,
    owner: Option<i64>,
    contact: Option<i64>,
    upto: Option<i64>,
    connection: Option<String>,
}

impl TryFrom<JobFields> for Job {
    type Error = String;

    fn try_from(f: JobFields) -> Result<Job, String> {
        let conv = |c: Option<String>| -> Result<ConvKey, String> {
            let text = need(c, "conv")?;
            ConvKey::parse(&text).ok_or_else(|| format!("not a conversation key: {text:?}"))
        };
        let attempt = need(f.attempt, "attempt")?;
        Ok(match f.kind.as_str() {
            "turn" => Job::Turn { conv: conv(f.conv)?, turn_id: need(f.turn_id, "turn_id")?, attempt },
            "step" => Job::Step { conv: conv(f.conv)?, turn_id: need(f.turn_id, "turn_id")?, step: need(f.step, "step")?, attempt },
            "consolidate" => Job::Consolidate { conv: conv(f.conv)?, attempt },
            "guest" => Job::Guest { query_id: need(f.query_id, "query_id")?, caller: need(f.caller, "caller")?, data: need(f.data, "data")?, attempt },
            "business" => Job::Business {
                owner: need(f.owner, "owner")?,
                contact: need(f.contact, "contact")?,
                upto: need(f.upto, "upto")?,
                connection: need(f.connection, "connection")?,
                attempt,
            },
            other => return Err(format!("unknown variant `{other}`, expected one of `turn`, `step`, `consolidate`, `guest`, `business`")),
        })
    }
}

impl Job {
    pub fn attempt(&self) -> u32 {
        match self {
            Job::Turn { attempt, .. }
            | Job::Step { attempt, .. }
            | Job::Consolidate { attempt, .. }
            | Job::Guest { attempt, .. }
            | Job::Business { attempt, .. } => *attempt,
        }
    }

    pub fn conv(&self) -> ConvKey {
        match self {
            Job::Turn { conv, .. } | Job::Step { conv, .. } | Job::Consolidate { conv, .. } => *conv,
            // The caller's own private chat: the host chat is not named.
            Job::Guest { caller, .. } => ConvKey::chat(*caller),
            // The owner's private chat with the bot, where suggestions go: the contact's chat
            // is the owner's business, not a conversation of the bot.
            Job::Business { owner, .. } => ConvKey::chat(*owner),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Job::Turn { .. } => "turn",
            Job::Step { .. } => "step",
            Job::Consolidate { .. } => "consolidate",
            Job::Guest { .. } => "guest",
            Job::Business { .. } => "business",
        }
    }

    /// The idempotency key: the same work has the same key on every attempt.
    pub fn key(&self) -> String {
        match self {
            Job::Turn { turn_id, .. } => format!("turn:{turn_id}"),
            Job::Step { turn_id, step, .. } => format!("step:{turn_id}/{step}"),
            Job::Consolidate { conv, .. } => format!("consolidate:{conv}"),
            Job::Guest { query_id, .. } => format!("guest:{query_id}"),
            Job::Business { owner, contact, upto, .. } => format!("business:{owner}:{contact}:{upto}"),
        }
    }

    pub fn next_attempt(&self) -> Job {
        let mut j = self.clone();
        match &mut j {
            Job::Turn { attempt, .. }
            | Job::Step { attempt, .. }
            | Job::Consolidate { attempt, .. }
            | Job::Guest { attempt, .. }
            | Job::Business { attempt, .. } => *attempt += 1,
        }
        j
    }
}

/// How a job's run ended. Written as `{"outcome": "retry", ...}`; read through one flat
/// struct, as [`Job`] is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", try_from = "OutcomeFields")]
pub enum JobOutcome {
    /// Done, or no longer needed (superseded).
    Done,
    /// Failed in a way that may pass; `after_ms` is the server's requested wait, if any.
    Retry { error: String, after_ms: Option<u64> },
    /// Failed for good.
    Failed { error: String },
}

#[derive(Deserialize)]
struct OutcomeFields {
    outcome: String,
    error: Option<String>,
    after_ms: Option<u64>,
}

impl TryFrom<OutcomeFields> for JobOutcome {
    type Error = String;

    fn try_from(f: OutcomeFields) -> Result<JobOutcome, String> {
        Ok(match f.outcome.as_str() {
            "done" => JobOutcome::Done,
            "retry" => JobOutcome::Retry { error: need(f.error, "error")?, after_ms: f.after_ms },
            "failed" => JobOutcome::Failed { error: need(f.error, "error")? },
            other => return Err(format!("unknown variant `{other}`, expected one of `done`, `retry`, `failed`")),
        })
    }
}

/// What the consumer does next.
#[derive(Debug, Clone, PartialEq)]
pub enum NextMove {
    Ack,
    Requeue { job: Job, delay_secs: u32 },
    DeadLetter { job: Job, error: String },
}

/// Exponential backoff with jitter: `base · 2^(attempt-1)`, capped, then scaled by a factor in
/// [0.5, 1.0) from `jitter` (uniform in [0, 1)).
pub fn backoff_ms(attempt: u32, base_ms: u64, cap_ms: u64, jitter: f64) -> u64 {
    let exp = base_ms.saturating_mul(1u64 << attempt.saturating_sub(1).min(20)).min(cap_ms);
    (exp as f64 * (0.5 + jitter.clamp(0.0, 1.0) / 2.0)) as u64
}

/// The longest a backoff step grows (five minutes).
pub const BACKOFF_CAP_MS: u64 = 300_000;
/// The longest any retry waits (twelve hours, the queue's longest delay).
pub const MAX_RETRY_DELAY_MS: u64 = 43_200_000;

/// The wait before retry `attempt`'s next try: the backoff (capped at [`BACKOFF_CAP_MS`],
/// jittered by `jitter`; 1.0 gives the longest), or the server's requested wait `after_ms`
/// when longer, at most [`MAX_RETRY_DELAY_MS`]. The one rule for every retry: queued jobs,
/// a lost job's deadline, an owed apology, a reminder's fallback.
pub fn retry_delay_ms(attempt: u32, base_ms: u64, after_ms: Option<u64>, jitter: f64) -> u64 {
    backoff_ms(attempt, base_ms, BACKOFF_CAP_MS, jitter).max(after_ms.unwrap_or(0)).min(MAX_RETRY_DELAY_MS)
}

/// Attempts allowed for a job kind.
pub fn max_attempts(job: &Job, max_turn: u32, max_send: u32) -> u32 {
    match job {
        Job::Turn { .. } => max_turn,
        Job::Step { .. } => max_send,
        Job::Consolidate { .. } => 5,
        // The last run gives up itself (`guest::job_gives_up`): an apology edited in.
        Job::Guest { .. } => crate::guest::MAX_GUEST_ATTEMPTS + 1,
        // A suggestion is worth a few tries; past them the owner answers themself.
        Job::Business { .. } => max_send,
    }
}

/// Decides the next move after a run. `base_ms` is the first backoff step. Queue delays are
/// whole seconds (at most 12 hours).
pub fn next_move(job: &Job, outcome: &JobOutcome, max: u32, base_ms: u64, jitter: f64) -> NextMove {
    match outcome {
        JobOutcome::Done => NextMove::Ack,
        JobOutcome::Failed { error } => NextMove::DeadLetter { job: job.clone(), error: error.clone() },
        JobOutcome::Retry { error, after_ms } => {
            if job.attempt() >= max {
                return NextMove::DeadLetter { job: job.clone(), error: format!("gave up after {max} attempts: {error}") };
            }
            let delay_ms = retry_delay_ms(job.attempt(), base_ms, *after_ms, jitter);
            let delay_secs = delay_ms.div_ceil(1000).clamp(1, MAX_RETRY_DELAY_MS / 1000) as u32;
            NextMove::Requeue { job: job.next_attempt(), delay_secs }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn outcomes_read_back_as_written() {
        let all = vec![
            JobOutcome::Done,
            JobOutcome::Retry { error: "busy".into(), after_ms: Some(3000) },
            JobOutcome::Retry { error: "busy".into(), after_ms: None },
            JobOutcome::Failed { error: "gone".into() },
        ];
        let text = serde_json::to_string(&all).unwrap();
        assert_eq!(serde_json::from_str::<Vec<JobOutcome>>(&text).unwrap(), all);
        assert!(serde_json::from_str::<JobOutcome>(r#"{"outcome":"retry"}"#).is_err(), "a retry names its error");
        assert!(serde_json::from_str::<JobOutcome>(r#"{"outcome":"maybe"}"#).is_err());
    }

    use super::*;

    fn turn(attempt: u32) -> Job {
        Job::Turn { conv: ConvKey::chat(1), turn_id: "1/1".into(), attempt }
    }

    #[test]
    fn jobs_round_trip_as_json_with_a_stable_key() {
        let j = Job::Step { conv: ConvKey { chat_id: -100, thread_id: Some(7) }, turn_id: "-100:7/3".into(), step: 2, attempt: 4 };
        let back: Job = serde_json::from_str(&serde_json::to_string(&j).unwrap()).unwrap();
        assert_eq!(back, j);
        assert_eq!(j.key(), j.next_attempt().key());
        assert_eq!(j.next_attempt().attempt(), 5);
    }

    #[test]
    fn the_conversation_key_travels_as_its_text_so_queued_jobs_still_parse() {
        // What jobs on a queue look like (written before the key was a type).
        let queued = r#"{"kind":"step","conv":"-100:7","turn_id":"-100:7/3","step":2,"attempt":4}"#;
        let j: Job = serde_json::from_str(queued).unwrap();
        assert_eq!(j.conv(), ConvKey { chat_id: -100, thread_id: Some(7) });
        assert_eq!(serde_json::to_value(&j).unwrap(), serde_json::from_str::<serde_json::Value>(queued).unwrap());
        let c: Job = serde_json::from_str(r#"{"kind":"consolidate","conv":"42","attempt":1}"#).unwrap();
        assert_eq!(c.key(), "consolidate:42");
        // A key that is not one is refused when read, not later.
        assert!(serde_json::from_str::<Job>(r#"{"kind":"turn","conv":"abc","turn_id":"t","attempt":1}"#).is_err());
        assert!(serde_json::from_str::<Job>(r#"{"kind":"step","conv":"1","turn_id":"t","attempt":1}"#).is_err(), "a missing field");
        assert!(serde_json::from_str::<Job>(r#"{"kind":"sweep","conv":"1","attempt":1}"#).is_err(), "an unknown kind");
        let g = Job::Guest { query_id: "q".into(), caller: 7, data: "{}".into(), attempt: 2 };
        assert_eq!(serde_json::from_value::<Job>(serde_json::to_value(&g).unwrap()).unwrap(), g);
        let s = Job::Step { conv: ConvKey { chat_id: -5, thread_id: Some(3) }, turn_id: "t".into(), step: 4, attempt: 1 };
        assert_eq!(serde_json::from_value::<Job>(serde_json::to_value(&s).unwrap()).unwrap(), s, "read from a value, as the queue consumer does");
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        assert_eq!(backoff_ms(1, 2000, 300_000, 0.0), 1000);
        assert_eq!(backoff_ms(1, 2000, 300_000, 0.999), 1999);
        assert_eq!(backoff_ms(4, 2000, 300_000, 0.0), 8000);
        assert_eq!(backoff_ms(30, 2000, 300_000, 0.0), 150_000);
    }

    #[test]
    fn retry_after_is_honoured_and_the_last_attempt_dead_letters() {
        let out = JobOutcome::Retry { error: "429".into(), after_ms: Some(37_000) };
        assert_eq!(next_move(&turn(1), &out, 10, 2000, 0.5), NextMove::Requeue { job: turn(2), delay_secs: 37 });
        let out = JobOutcome::Retry { error: "503".into(), after_ms: None };
        assert!(matches!(next_move(&turn(3), &out, 10, 2000, 0.0), NextMove::Requeue { delay_secs: 4, .. }));
        assert!(matches!(next_move(&turn(10), &out, 10, 2000, 0.0), NextMove::DeadLetter { .. }));
        let failed = JobOutcome::Failed { error: "400".into() };
        assert!(matches!(next_move(&turn(1), &failed, 10, 2000, 0.0), NextMove::DeadLetter { .. }));
        assert_eq!(next_move(&turn(1), &JobOutcome::Done, 10, 2000, 0.0), NextMove::Ack);
    }
}
