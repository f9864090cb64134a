//! Crew mode: several personas (`CREW`) that speak in turn in one chat, each turn one model
//! call with the persona's own prompt and the whole conversation.
//!
//! This module is pure: persona files and their front matter, where the crew speaks, the
//! cycle kept in the chat object's state ([`CrewState`]), how the history looks to one persona,
//! and what a persona's answer means (a pass or a message).
//!
//! Invariants (INVARIANTS.md): "Crew order survives everything", "Every crew cycle is
//! bounded", "People come first", "A pass is silence, failures skip", "A persona sees the
//! whole conversation" ([`as_seen_by`]).
//!
//! The cycle, as state of the chat object (`ChatState::crew`):
//! - `pointer` is the index (in `CREW` order) of the persona whose turn is next. It is stored,
//!   so the order continues across cycles and restarts.
//! - A cycle answers one generation of people's signals: a new one drops the turns not taken
//!   (the usual replanning of `chat_state`).
//! - `CREW_MAX_ROUNDS` rounds means turns taken ≥ rounds × personas.
//! - A persona turn's id ends with `~<persona>` ([`persona_of_turn`]), so everything keyed by
//!   the turn (its plan, outbox rows, stored bot messages, model calls) knows who spoke.
//! - A failed persona's note to the next is in that persona's situation.

pub use crate::crew_state::{CrewState, CrewTurn, Cycle, End, Outcome};
use crate::telegram::gating::Trigger;
use crate::history::{HistoryMessage, Role};
use crate::chat::plan::Step;
use std::collections::BTreeMap;

/// The most personas a crew may have.
pub const MAX_PERSONAS: usize = 8;
/// How long one persona's turn (its model calls and tools) may take before it fails like a
/// timed-out call (retried, then skipped): a stuck persona never holds up the cycle for long.
pub const TURN_LIMIT_MS: u64 = 180_000;
/// What a persona answers to pass instead of calling `pass`.
pub const PASS_TEXT: &str = ".....";

/// A persona as its file describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Persona {
    pub name: String,
    pub display_name: String,
    pub moderator: bool,
    /// Its own Gemini model, if the front matter names one.
    pub model: Option<String>,
    /// The prompt without its front matter.
    pub prompt: String,
}

/// Whether `name` can name a persona (and a turn id's suffix, and a secret's suffix).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 32 && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Splits a persona file into its front matter (the lines between a first line `---` and the
/// next `---`) and the prompt. A file without front matter is all prompt.
pub fn split_front_matter(text: &str) -> (Option<&str>, &str) {
    let t = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = t.strip_prefix("---\n").or_else(|| t.strip_prefix("---\r\n")) else { return (None, text) };
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return (Some(&rest[..at]), &rest[at + line.len()..]);
        }
        at += line.len();
    }
    (None, text)
}

/// The prompt of a persona file (its front matter removed).
pub fn prompt_of(text: &str) -> &str {
    split_front_matter(text).1
}

/// Parses a persona file: `display_name` (one line, at most 64 characters), `moderator`
/// (`true`/`false`), `model` (a model id). Anything else in the front matter is an error.
pub fn parse_persona(name: &str, text: &str) -> Result<Persona, String> {
    if !valid_name(name) {
        return Err(format!("persona {name:?}: a name is 1–32 of a-z, 0-9, _ and -"));
    }
    let (front, prompt) = split_front_matter(text);
    let mut p = Persona { name: name.to_string(), display_name: default_display(name), moderator: false, model: None, prompt: prompt.trim().to_string() };
    for line in front.unwrap_or("").lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("persona {name}: front matter line {line:?} is not `key: value`"));
        };
        let value = value.trim().trim_matches('"');
        match key.trim() {
            "display_name" if !value.is_empty() && value.chars().count() <= 64 && !value.chars().any(char::is_control) => p.display_name = value.to_string(),
            "display_name" => return Err(format!("persona {name}: display_name must be 1–64 characters on one line")),
            "moderator" => {
                p.moderator = match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("persona {name}: moderator must be true or false")),
                }
            }
            "model" if !value.is_empty() && value.len() <= 64 && value.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) => {
                p.model = Some(value.to_string())
            }
            "model" => return Err(format!("persona {name}: model {value:?} is not a model id")),
            other => return Err(format!("persona {name}: unknown front matter key {other:?} (display_name, moderator, model)")),
        }
    }
    Ok(p)
}

fn default_display(name: &str) -> String {
    let mut c = name.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// The crew named by `CREW`, in speaking order, from the bundled persona files. An unknown or
/// repeated name, a file that does not parse, or too many personas is an error that names it.
pub fn resolve(names: &[String], files: &BTreeMap<String, String>) -> Result<Vec<Persona>, String> {
    if names.len() > MAX_PERSONAS {
        return Err(format!("CREW: at most {MAX_PERSONAS} personas, not {}", names.len()));
    }
    let mut out: Vec<Persona> = Vec::new();
    for name in names {
        if out.iter().any(|p| &p.name == name) {
            return Err(format!("CREW: persona {name:?} is named twice"));
        }
        let Some(text) = files.get(name) else {
            let known: Vec<&str> = files.keys().map(String::as_str).collect();
            return Err(format!("CREW: no persona file prompts/personas/{name}.md (known: {})", known.join(", ")));
        };
        out.push(parse_persona(name, text).map_err(|e| format!("CREW: {e}"))?);
    }
    Ok(out)
}

/// Whether the crew speaks in `chat_id`: the chat's own switch (`/crew on|off`, the API) if it
/// was set, else `CREW_CHATS` (ids, or `*` for all).
pub fn speaks_in(chat_id: i64, switch: Option<bool>, crew_chats: &[String]) -> bool {
    switch.unwrap_or_else(|| crew_chats.iter().any(|c| c == "*" || c.parse::<i64>().ok() == Some(chat_id)))
}

/// Whether a crew speaks in a conversation: the one answer for the chat object's lineup and
/// its early starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Here {
    /// An API conversation: no crew speaks, and its turns are claimed whole (never early).
    Api,
    /// The crew speaks here.
    Speaks,
    /// The single bot speaks here.
    Silent,
}

impl Here {
    /// Whether a burst's first message may start its turn at once: never a crew's turns (the
    /// personas take turns) nor an API chat's.
    pub fn allows_early_start(self) -> bool {
        self == Here::Silent
    }
}

/// Whether a crew speaks in `chat_id`: `configured` (personas are configured), the chat's
/// switch and `CREW_CHATS` ([`speaks_in`]); an API conversation never has one.
pub fn here(chat_id: i64, switch: Option<bool>, configured: bool, crew_chats: &[String]) -> Here {
    if chat_id >= crate::access::policy::API_CHAT_ID_MIN {
        Here::Api
    } else if configured && speaks_in(chat_id, switch, crew_chats) {
        Here::Speaks
    } else {
        Here::Silent
    }
}

/// Whether a group message addresses one of the crew's own bots (`actors`: id and username):
/// an @mention, a text mention or a reply to one of its messages. Messages from bots and
/// events never do (no bot-to-bot loops); private chats are gated as always.
pub fn addressed_to_actor(m: &crate::conversation::InboundMessage, actors: &[(i64, String)]) -> Option<Trigger> {
    if m.is_event || m.speaker.is_bot || !m.chat.kind.is_group() || actors.is_empty() {
        return None;
    }
    for e in m.entities() {
        let named = |(id, username): &(i64, String)| {
            (e.kind == "mention" && !username.is_empty() && e.text.trim_start_matches('@').eq_ignore_ascii_case(username))
                || (e.kind == "text_mention" && e.user_id == Some(*id))
        };
        if actors.iter().any(named) {
            return Some(Trigger::Mention);
        }
    }
    let replied = m.reply_to.as_ref().and_then(|r| r.user_id);
    actors.iter().any(|(id, _)| Some(*id) == replied).then_some(Trigger::Reply)
}

/// The persona of a crew turn, from its id (`…~<persona>`).
pub fn persona_of_turn(turn_id: &str) -> Option<&str> {
    turn_id.rsplit_once('~').map(|(_, p)| p).filter(|p| valid_name(p))
}

/// The secret that gives a persona its own bot: `CREW_BOT_TOKEN_<NAME>` (upper-cased, `-` as `_`).
pub fn token_secret_name(persona: &str) -> String {
    format!("CREW_BOT_TOKEN_{}", persona.to_ascii_uppercase().replace('-', "_"))
}

/// The crew as the cycle needs it: names in order and who moderates.
#[derive(Debug, Clone, PartialEq)]
pub struct Lineup {
    pub names: Vec<String>,
    pub moderator: Option<usize>,
    pub max_rounds: u32,
}

impl Lineup {
    pub fn of(personas: &[Persona], max_rounds: u32) -> Self {
        Lineup { names: personas.iter().map(|p| p.name.clone()).collect(), moderator: personas.iter().position(|p| p.moderator), max_rounds: max_rounds.max(1) }
    }
}

/// What closes a persona's history when it would end with its own message (Gemini answers a
/// user turn).
pub const YOUR_TURN: &str = "[meta] crew: it is your turn again";

/// Offers `pass` (a persona's way to say nothing) alongside the other functions.
pub fn add_pass(tools: &mut Vec<crate::gemini::Tool>) {
    let pass = crate::gemini::FunctionDeclaration {
        name: "pass".into(),
        description: "Pass your turn in the crew: call this, and nothing else, when you have nothing to add. Nobody sees a pass.".into(),
        parameters: serde_json::Value::Null,
    };
    match tools.first_mut() {
        Some(t) => t.function_declarations.push(pass),
        None => tools.push(crate::gemini::Tool { function_declarations: vec![pass], google_search: None }),
    }
}

/// Whether a persona's answer is a pass: no step at all (`pass`, `no_reply`, an empty answer),
/// or messages that are all exactly [`PASS_TEXT`] and nothing else.
pub fn is_pass(steps: &[Step]) -> bool {
    steps.iter().all(|s| matches!(s, Step::Send { text, .. } if text.trim() == PASS_TEXT) || matches!(s, Step::Wait { .. }))
}

/// A persona's message as the main bot sends it: its display name as a bold first line.
pub fn with_display_name(steps: Vec<Step>, display_name: &str) -> Vec<Step> {
    let mut first = true;
    steps
        .into_iter()
        .map(|s| match s {
            Step::Send { text, reply_to, no_link_preview } if first => {
                first = false;
                Step::Send { text: format!("**{}**\n{text}", crate::format::escape_markdown(display_name)), reply_to, no_link_preview }
            }
            other => other,
        })
        .collect()
}

/// How the conversation looks to `persona`: its own messages stay the bot's (`model` turns);
/// another persona's (or the single bot's) become a person's message under that speaker's
/// display name, with no user id, so `[meta]` and the compact line name the speaker.
pub fn as_seen_by(messages: &[HistoryMessage], persona: &str, display: &BTreeMap<String, String>, bot_name: &str) -> Vec<HistoryMessage> {
    messages
        .iter()
        .map(|m| {
            if m.role != Role::Bot {
                return m.clone();
            }
            let speaker = m.turn_id.as_deref().and_then(persona_of_turn);
            if speaker == Some(persona) {
                return m.clone();
            }
            let mut other = m.clone();
            other.role = Role::User;
            other.user_id = None;
            other.username = None;
            other.name = match speaker {
                Some(p) => format!("{} (crew)", display.get(p).map_or(p, String::as_str)),
                None => format!("{bot_name} (bot)"),
            };
            other.turn_id = None;
            other
        })
        .collect()
}

/// `/usage`'s crew lines: calls and cost per persona (Markdown, names escaped).
pub fn usage_by_persona_text(cfg: &crate::config::Config, rows: &[(String, crate::usage::ModelUsage)], now_ms: i64) -> String {
    let mut totals: BTreeMap<&str, (i64, f64)> = BTreeMap::new();
    for (persona, u) in rows {
        let t = totals.entry(persona.as_str()).or_default();
        t.0 += u.calls;
        t.1 += crate::usage::cost(cfg, u, now_ms).unwrap_or(0.0);
    }
    let mut out = String::from("\n\nBy persona:");
    for (persona, (calls, cost)) in totals {
        out.push_str(&format!("\n- {}: {calls} calls, ${cost:.4}", crate::format::escape_markdown(persona)));
    }
    out
}

/// The crew section of a persona's system instruction: who it is, who else speaks, how to
/// pass, and whether someone was skipped.
pub fn situation(personas: &[Persona], persona: &str, note: Option<&str>) -> String {
    let me = personas.iter().find(|p| p.name == persona);
    let others: Vec<String> = personas
        .iter()
        .filter(|p| p.name != persona)
        .map(|p| if p.moderator { format!("{} (moderator)", p.display_name) } else { p.display_name.clone() })
        .collect();
    let mut out = format!(
        "## Crew\nYou are {} in a crew that answers in turn; the others are: {}. Their messages appear as people's messages \
         named \"<name> (crew)\". Add only what the conversation still needs from you. If you have nothing to add, call `pass` \
         (or answer exactly `{PASS_TEXT}`): a pass is not shown to anyone.",
        me.map_or(persona, |p| p.display_name.as_str()),
        if others.is_empty() { "nobody".to_string() } else { others.join(", ") },
    );
    if me.is_some_and(|p| p.moderator) {
        out.push_str(" You moderate: when you pass, the round ends.");
    }
    if let Some(n) = note {
        out.push_str(&format!("\nNote: {n}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_answer_to_whether_a_crew_speaks_here() {
        let all = vec!["*".to_string()];
        let one = vec!["-100".to_string()];
        assert_eq!(here(-100, None, true, &one), Here::Speaks);
        assert_eq!(here(-200, None, true, &one), Here::Silent);
        assert_eq!(here(-200, Some(true), true, &one), Here::Speaks, "the chat's switch wins");
        assert_eq!(here(-100, Some(false), true, &all), Here::Silent);
        assert_eq!(here(-100, None, false, &all), Here::Silent, "no personas configured");
        assert_eq!(here(crate::access::policy::API_CHAT_ID_MIN, Some(true), true, &all), Here::Api);
        assert!(Here::Silent.allows_early_start());
        assert!(!Here::Speaks.allows_early_start());
        assert!(!Here::Api.allows_early_start());
    }

    fn say(text: &str) -> Vec<Step> {
        vec![Step::Send { text: text.into(), reply_to: None, no_link_preview: false }]
    }

    #[test]
    fn the_history_shows_the_others_as_named_speakers() {
        let bot = |seq, turn: &str| HistoryMessage {
            seq,
            message_id: Some(seq),
            role: Role::Bot,
            user_id: Some(1),
            name: "Edge".into(),
            username: Some("edge_bot".into()),
            reply_to: None,
            reply_info: None,
            forwarded_from: None,
            parts: vec![crate::conversation::Part::Text { text: "hi".into(), entities: vec![] }],
            date: 0,
            edited: false,
            turn_id: Some(turn.into()),
            answered_upto: Some(1),
            media_group_id: None,
            album_ids: vec![],
        };
        let msgs = vec![bot(2, "c/1-a~critic"), bot(3, "c/2-b~builder"), bot(4, "c/0-c")];
        let names: BTreeMap<String, String> = [("critic".to_string(), "The Critic".to_string())].into();
        let seen = as_seen_by(&msgs, "builder", &names, "Edge");
        assert_eq!((seen[0].role, seen[0].name.as_str(), seen[0].user_id), (Role::User, "The Critic (crew)", None));
        assert_eq!(seen[1], msgs[1], "its own message stays the model's");
        assert_eq!(seen[2].name, "Edge (bot)");
        let meta = crate::history::meta_line(&seen[0]);
        assert!(meta.contains("name=\"The Critic (crew)\""), "{meta}");
        // In the compact format the speaker's name does the same job; its own stays `bot`.
        let lines = crate::history::compact_lines(&seen);
        assert!(lines.lines().next().unwrap().contains("The Critic (crew)"), "{lines}");
        assert!(lines.lines().nth(1).unwrap().starts_with("#3 bot: "), "{lines}");
    }

    #[test]
    fn persona_files_and_the_crew_are_validated() {
        let p = parse_persona("critic", "---\ndisplay_name: The Critic\nmoderator: true\nmodel: gemini-x\n---\nYou criticise.\n").unwrap();
        assert_eq!((p.display_name.as_str(), p.moderator, p.model.as_deref(), p.prompt.as_str()), ("The Critic", true, Some("gemini-x"), "You criticise."));
        assert_eq!(parse_persona("plain", "Just a prompt").unwrap().display_name, "Plain");
        assert!(parse_persona("x", "---\ncolour: red\n---\n").unwrap_err().contains("colour"));
        assert!(parse_persona("x", "---\nmoderator: maybe\n---\n").is_err());
        assert!(parse_persona("Bad Name", "x").is_err());
        let files: BTreeMap<String, String> = [("a".to_string(), "A".to_string())].into();
        assert!(resolve(&["a".into(), "nope".into()], &files).unwrap_err().contains("prompts/personas/nope.md"));
        assert!(resolve(&["a".into(), "a".into()], &files).is_err());
        assert_eq!(prompt_of("---\nmodel: m\n---\nbody"), "body");
        assert_eq!(prompt_of("no front matter"), "no front matter");
        assert_eq!(token_secret_name("the-critic"), "CREW_BOT_TOKEN_THE_CRITIC");
        assert!(speaks_in(5, None, &["*".into()]));
        assert!(speaks_in(5, None, &["5".into()]));
        assert!(!speaks_in(5, Some(false), &["*".into()]));
        assert!(speaks_in(6, Some(true), &[]));
        assert!(!speaks_in(6, None, &["5".into()]));
    }

    #[test]
    fn usage_is_broken_down_by_persona() {
        let cfg = crate::config::Config::from_vars(&BTreeMap::new());
        let u = |model: &str, calls| crate::usage::ModelUsage { model: model.into(), calls, prompt_tokens: 1_000_000, ..Default::default() };
        let text = usage_by_persona_text(&cfg, &[("critic".into(), u("gemini-3.6-flash", 2)), ("critic".into(), u("unknown", 1)), ("the_builder".into(), u("gemini-3.6-flash", 1))], crate::gemini::prices::PROMOTION_ENDS_MS);
        assert!(text.contains("- critic: 3 calls, $1.5000"), "{text}");
        assert!(text.contains("- the\\_builder: 1 calls"), "{text}");
    }

    #[test]
    fn mentions_of_and_replies_to_the_crews_bots_ask_for_a_reply() {
        let update = |text: &str, entities: serde_json::Value, reply_from: Option<i64>, chat_type: &str| {
            let mut message = serde_json::json!({"message_id": 5, "date": 1, "chat": {"id": -100, "type": chat_type, "title": "g"},
                "from": {"id": 9, "is_bot": false, "first_name": "Ann"}, "text": text, "entities": entities});
            if let Some(id) = reply_from {
                message["reply_to_message"] = serde_json::json!({"message_id": 4, "date": 1, "chat": {"id": -100, "type": chat_type}, "from": {"id": id, "is_bot": true, "first_name": "B"}, "text": "x"});
            }
            let body = serde_json::json!({"update_id": 1, "message": message}).to_string();
            let u = crate::telegram::parse_update(body.as_bytes()).unwrap();
            match crate::telegram::normalize::normalize(&u) {
                crate::conversation::Inbound::Message(m) => m,
                _ => panic!("not a message"),
            }
        };
        let actors = vec![(777, "builder_bot".to_string())];
        let t = "@builder_bot help";
        let mention = serde_json::json!([{"type": "mention", "offset": 0, "length": 12}]);
        assert_eq!(addressed_to_actor(&update(t, mention.clone(), None, "supergroup"), &actors), Some(Trigger::Mention));
        assert_eq!(addressed_to_actor(&update("thanks", serde_json::json!([]), Some(777), "supergroup"), &actors), Some(Trigger::Reply));
        assert_eq!(addressed_to_actor(&update("chatter", serde_json::json!([]), Some(5), "supergroup"), &actors), None);
        assert_eq!(addressed_to_actor(&update(t, mention, None, "supergroup"), &[]), None);
    }

    #[test]
    fn display_names_are_a_bold_first_line() {
        let steps = with_display_name(say("hello").into_iter().chain(say("more")).collect(), "Bob_*");
        assert!(matches!(&steps[0], Step::Send { text, .. } if text.starts_with("**Bob\\_\\***\nhello")), "{steps:?}");
        assert!(matches!(&steps[1], Step::Send { text, .. } if text == "more"));
    }
}
