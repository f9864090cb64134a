//! The pace of the drafts shown while a streamed answer arrives (the stream itself is read by
//! `gemini::stream`).
//!
//! [`DraftPacer`] decides when the text so far is shown as a draft: at most one draft per
//! interval, only when there is new visible text, never after a draft was refused (a refused
//! draft means waiting for the final message, never a loop), never once the answer turned
//! out to call functions.

/// Drafts one turn may send at most: each is a subrequest of the invocation that runs the
/// turn (50 on the free plan, shared with D1, the model, tools and the plan's first steps).
pub const MAX_DRAFTS_PER_TURN: u32 = 12;
/// At most this many chunks of a streamed answer go out as messages before its turn is over
/// (each costs four subrequests of the turn's invocation); the rest go out with the plan.
pub const MAX_EARLY_CHUNKS: usize = 3;

/// When the answer so far is shown as a draft.
#[derive(Debug, Clone, PartialEq)]
pub struct DraftPacer {
    interval_ms: i64,
    last_ms: Option<i64>,
    shown_len: usize,
    /// Refused by Telegram, or the answer calls functions, or a newer message came: no more.
    stopped: bool,
    /// Drafts sent (a statistic for logs and tests).
    pub sent: u32,
}

impl DraftPacer {
    pub fn new(interval_ms: i64) -> Self {
        DraftPacer { interval_ms: interval_ms.max(1), last_ms: None, shown_len: 0, stopped: false, sent: 0 }
    }

    /// Whether to show `text` now (`calls`: the answer so far calls functions).
    pub fn due(&mut self, now: i64, text: &str, calls: bool) -> bool {
        if calls {
            self.stopped = true;
        }
        if self.stopped || text.trim().is_empty() || text.len() <= self.shown_len {
            return false;
        }
        self.last_ms.is_none_or(|last| now - last >= self.interval_ms)
    }

    /// A draft of `text` went out at `now`.
    pub fn shown(&mut self, now: i64, text: &str) {
        self.last_ms = Some(now);
        self.shown_len = text.len();
        self.sent += 1;
    }

    /// No more drafts for this answer (refused, or superseded).
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    pub fn stopped(&self) -> bool {
        self.stopped
    }
}

/// How long drafts stay off (for every chat the isolate serves) after Telegram refused one
/// with `error`: a refusal of the method itself (a 400 other than the text's formatting, or
/// a 401/404: drafts not available to this bot) is not worth asking again on every turn. A
/// 429, a formatting refusal or a network error only ends the one turn's drafts (`None`).
pub fn drafts_off_ms(error: &crate::telegram::api::TelegramError) -> Option<i64> {
    use crate::telegram::api::TelegramError as E;
    match error {
        E::BadRequest(_) | E::Unauthorized(_) | E::MethodNotFound(_) => Some(DRAFTS_OFF_MS),
        _ => None,
    }
}

/// See [`drafts_off_ms`].
pub const DRAFTS_OFF_MS: i64 = 10 * 60 * 1000;

/// A draft id for a turn: non-zero, the same for every update of the turn's answer (Telegram
/// animates the changes of one draft), different between turns.
pub fn draft_id(turn_id: &str) -> i64 {
    // FNV-1a, folded to 31 bits (draft ids are ints).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in turn_id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    ((h ^ (h >> 31)) & 0x7fff_ffff).max(1) as i64
}

/// Words of a topic's first message its name takes at most, and characters (Telegram: 1-128).
const TOPIC_NAME_WORDS: usize = 6;
const TOPIC_NAME_CHARS: usize = 48;

/// A private chat's topic (Bot API 9.3/9.4) whose name Telegram marks as implicit
/// (`forum_topic_created.is_name_implicit`, carried by every message of the topic as the
/// message it replies to) gets a short name from its first message: `(chat, thread, name)`,
/// the first words of `m`'s text. `None`: not such a topic, or nothing to name it by.
pub fn implicit_topic_name(m: &crate::telegram::Message) -> Option<(i64, i64, String)> {
    let thread = m.message_thread_id.filter(|_| m.is_topic_message && m.chat.kind == "private")?;
    let created = m.reply_to_message.as_ref()?.rest.get("forum_topic_created")?;
    // Implicit as Telegram marks it, or the placeholder of a topic `/new` opened.
    let placeholder = created.get("name").and_then(serde_json::Value::as_str) == Some(crate::telegram::new_topic::PLACEHOLDER_NAME);
    if created.get("is_name_implicit").and_then(serde_json::Value::as_bool) != Some(true) && !placeholder {
        return None;
    }
    let words: Vec<&str> = m.text.as_deref()?.split_whitespace().filter(|w| !w.starts_with('/')).take(TOPIC_NAME_WORDS).collect();
    let mut name: String = words.join(" ").chars().take(TOPIC_NAME_CHARS).collect();
    name = name.trim_end_matches(|c: char| c.is_ascii_punctuation() || c.is_whitespace()).to_string();
    (!name.is_empty()).then_some((m.chat.id, thread, name))
}

/// The finish reason a turn stopped by the person (Telegram's Stop button) is recorded with.
pub const STOPPED_REASON: &str = "STOPPED_BY_USER";
/// What ends a stopped answer that is kept.
pub const STOPPED_MARK: &str = "⏹ _stopped_";

/// Whether a Stop for `draft_id` is for the turn `turn_id` (a turn's drafts all carry
/// [`draft_id`] of its id; a Stop for another draft, a finished turn's, does nothing).
pub fn stops_turn(turn_id: &str, stopped_draft_id: i64) -> bool {
    draft_id(turn_id) == stopped_draft_id
}

/// What a stopped turn sends: with `keep` (`STOP_KEEPS=partial`) the answer as far as it was
/// written (what is open closed, as a draft shows it), marked as stopped; else nothing. Never
/// an apology. Any link in it goes without a preview (it is the model's text, unchecked).
pub fn stopped_steps(partial: &str, keep: bool) -> Vec<crate::chat::plan::Step> {
    let text = crate::format::draft::complete(partial.trim_end());
    if !keep || text.trim().is_empty() {
        return Vec::new();
    }
    let text = format!("{}\n\n{STOPPED_MARK}", text.trim_end());
    let no_link_preview = crate::fetch::needs_preview_off(&text, &Default::default());
    vec![crate::chat::plan::Step::Send { text, reply_to: None, no_link_preview }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drafts_are_paced_and_stop_for_good() {
        let mut p = DraftPacer::new(500);
        assert!(!p.due(0, "  ", false), "nothing visible yet");
        assert!(p.due(0, "Hel", false));
        p.shown(0, "Hel");
        assert!(!p.due(100, "Hello", false), "too soon");
        assert!(!p.due(600, "Hel", false), "nothing new");
        assert!(p.due(600, "Hello", false));
        p.stop();
        assert!(!p.due(5000, "Hello world", false), "a refused draft is not tried again");
        let mut q = DraftPacer::new(500);
        assert!(!q.due(0, "Sure", true), "an answer that calls functions runs as a plan");
        assert!(!q.due(1000, "Sure, more", false));
    }

    #[test]
    fn a_refused_method_turns_drafts_off_a_while_a_busy_chat_does_not() {
        use crate::telegram::api::TelegramError as E;
        assert_eq!(drafts_off_ms(&E::BadRequest("method not available".into())), Some(DRAFTS_OFF_MS));
        assert_eq!(drafts_off_ms(&E::Unauthorized(404)), Some(DRAFTS_OFF_MS));
        assert_eq!(drafts_off_ms(&E::RetryAfter(5)), None);
        assert_eq!(drafts_off_ms(&E::CantParseEntities("x".into())), None);
        assert_eq!(drafts_off_ms(&E::Network("x".into())), None);
    }

    #[test]
    fn a_stop_is_for_its_own_turn_and_keeps_what_was_written() {
        assert!(stops_turn("1/2-3", draft_id("1/2-3")));
        assert!(!stops_turn("1/2-4", draft_id("1/2-3")), "a finished turn's draft stops nothing now");
        let kept = stopped_steps("The plan: **first", true);
        let crate::chat::plan::Step::Send { text, .. } = &kept[0] else { panic!() };
        assert_eq!(text, "The plan: **first**\n\n⏹ _stopped_");
        assert!(stopped_steps("The plan", false).is_empty(), "nothing kept");
        assert!(stopped_steps("  ", true).is_empty(), "nothing written: nothing sent, no apology");
    }

    #[test]
    fn an_implicitly_named_private_topic_is_named_from_its_first_words() {
        let msg = |implicit: bool, text: &str| {
            let created = if implicit { r#""forum_topic_created":{"name":"New topic","icon_color":1,"is_name_implicit":true}"# } else { r#""forum_topic_created":{"name":"Trips","icon_color":1}"# };
            let json = format!(r#"{{"message_id":12,"date":1,"chat":{{"id":42,"type":"private"}},"message_thread_id":10,"is_topic_message":true,"text":{text:?},"reply_to_message":{{"message_id":10,"date":1,"chat":{{"id":42,"type":"private"}},{created}}}}}"#);
            serde_json::from_str::<crate::telegram::Message>(&json).unwrap()
        };
        assert_eq!(implicit_topic_name(&msg(true, "Plan a trip to Lisbon in May, please!")), Some((42, 10, "Plan a trip to Lisbon in".to_string())));
        assert_eq!(implicit_topic_name(&msg(false, "Plan a trip")), None, "a name its creator gave stays");
        assert_eq!(implicit_topic_name(&msg(true, "   ")), None);
    }

    #[test]
    fn draft_ids_are_non_zero_and_stable_per_turn() {
        assert_eq!(draft_id("1/2-3"), draft_id("1/2-3"));
        assert_ne!(draft_id("1/2-3"), draft_id("1/2-4"));
        assert!(draft_id("") > 0 && draft_id("x") <= i32::MAX as i64);
    }
}
