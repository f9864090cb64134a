//! Bot commands, answered without a model call: `/start`, `/help`, `/new`, `/reset`,
//! `/status`, `/whoami`, `/memory`, `/forget`, `/usage`, `/reminders`, `/cancel`, and
//! `/approve` for operators.

use crate::conversation::InboundMessage;
use crate::format::escape_markdown as esc;
use crate::telegram::api::BotCommand;

#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Start,
    Help,
    /// `/new` and `/reset`: start a new session now.
    New,
    Status,
    Whoami,
    Memory,
    /// `/forget <id>` or `/forget all`.
    Forget(ForgetTarget),
    Usage,
    /// `/approve <code>`: an operator approves a pairing code.
    Approve(String),
    /// `/reminders`: the chat's active schedules.
    Reminders,
    /// `/cancel <id>`: cancel one (`None`: the id is missing or unclear).
    Cancel(Option<i64>),
    /// `/crew on|off` (operators): the crew speaks in this chat or not (`None`: unclear).
    Crew(Option<bool>),
    /// `/rich on|off`: the speaker's own rich answers (`None`: unclear; says what it is now).
    Rich(Option<bool>),
    /// `/business [draft|away|auto|off]`: the owner's Telegram Business mode.
    Business(crate::business::Arg),
    /// `/business notes [clear|<text>]`: what the bot may tell the owner's contacts.
    BusinessNotes(crate::business::NotesArg),
}

/// What `/forget` names: everything about the speaker, one note (`n12`) or memory (`m7`) as
/// `/memory` lists them, or something unclear (then the bot asks again).
#[derive(Debug, Clone, PartialEq)]
pub enum ForgetTarget {
    All,
    Note(i64),
    Memory(i64),
    Unclear,
}

impl ForgetTarget {
    /// The id as `/memory` shows it (`n12`, `m7`), or `all`.
    pub fn label(&self) -> String {
        match self {
            ForgetTarget::All => "all".into(),
            ForgetTarget::Note(id) => format!("n{id}"),
            ForgetTarget::Memory(id) => format!("m{id}"),
            ForgetTarget::Unclear => "?".into(),
        }
    }
}

/// Parses `/forget`'s argument by characters (never by bytes: people type any script here).
/// Accepts `all`, `n12`, `m7`, with an optional leading `#`, in any case.
pub fn parse_forget(args: &str) -> ForgetTarget {
    let word = args.trim();
    let word = word.strip_prefix('#').unwrap_or(word);
    if word.eq_ignore_ascii_case("all") {
        return ForgetTarget::All;
    }
    let mut chars = word.chars();
    let kind = chars.next().map(|c| c.to_ascii_lowercase());
    let digits = chars.as_str();
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return ForgetTarget::Unclear;
    }
    match (kind, digits.parse::<i64>()) {
        (Some('n'), Ok(id)) => ForgetTarget::Note(id),
        (Some('m'), Ok(id)) => ForgetTarget::Memory(id),
        _ => ForgetTarget::Unclear,
    }
}

/// The command a message starts with, if it is one of ours and addressed to this bot.
pub fn parse(m: &InboundMessage, bot_username: &str) -> Option<Command> {
    let text = m.plain_text();
    let text = text.trim_start();
    let first = text.split_whitespace().next()?;
    let name = first.strip_prefix('/')?;
    let (name, to) = match name.split_once('@') {
        Some((n, to)) => (n, Some(to)),
        None => (name, None),
    };
    if let Some(to) = to {
        if bot_username.is_empty() || !to.eq_ignore_ascii_case(bot_username) {
            return None;
        }
    }
    let args = text[first.len()..].trim().to_string();
    Some(match name.to_ascii_lowercase().as_str() {
        "start" => Command::Start,
        "help" => Command::Help,
        "new" | "reset" => Command::New,
        "status" => Command::Status,
        "whoami" => Command::Whoami,
        "memory" => Command::Memory,
        "forget" => Command::Forget(parse_forget(&args)),
        "usage" => Command::Usage,
        "approve" => Command::Approve(args),
        "reminders" | "schedules" => Command::Reminders,
        "cancel" => Command::Cancel(crate::chat::schedule::parse_id(&args)),
        "crew" => Command::Crew(match args.to_ascii_lowercase().as_str() {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        }),
        "rich" => Command::Rich(match args.to_ascii_lowercase().as_str() {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        }),
        "business" => match crate::business::parse_notes(&args) {
            Some(notes) => Command::BusinessNotes(notes),
            None => Command::Business(crate::business::parse_arg(&args)),
        },
        _ => return None,
    })
}

/// Outside names as one comma-separated Markdown-escaped list.
pub fn escape_list(items: &[String]) -> String {
    items.iter().map(|i| esc(i)).collect::<Vec<_>>().join(", ")
}

/// Commands whose answer concerns only the person who sent it: marked ephemeral in the menu,
/// so in a group only they see the command and its answer (Bot API 10.2).
pub const EPHEMERAL: [&str; 6] = ["memory", "forget", "usage", "reminders", "whoami", "rich"];

/// Whether a command's answer is the sender's own business (see [`EPHEMERAL`]).
pub fn is_private_answer(cmd: &Command) -> bool {
    matches!(cmd, Command::Memory | Command::Forget(_) | Command::Usage | Command::Reminders | Command::Whoami | Command::Rich(_))
}

/// The command menu registered with setMyCommands.
pub fn menu() -> Vec<BotCommand> {
    [
        ("new", "Start a new conversation"),
        ("status", "Session, model and history format"),
        ("memory", "What I remember about you"),
        ("forget", "Forget a memory: /forget <id> or /forget all"),
        ("usage", "Model usage and cost of this chat"),
        ("reminders", "Reminders and follow-ups set in this chat"),
        ("cancel", "Cancel a reminder: /cancel <id>"),
        ("rich", "Rich answers (tables, maths): /rich on or /rich off"),
        ("whoami", "Your Telegram ids"),
        ("help", "What I can do"),
    ]
    .into_iter()
    .map(|(c, d)| BotCommand { command: c.into(), description: d.into(), is_ephemeral: EPHEMERAL.contains(&c) })
    .collect()
}

/// Reply texts are Markdown (sent through `format::render_reply`); every value from outside
/// (names, usernames, settings) goes through `escape_markdown` so it shows as itself.
pub fn help_text(bot_name: &str) -> String {
    let bot_name = esc(bot_name);
    format!(
        "I'm {bot_name}, an AI assistant. In private chats I answer every message; in groups, \
         mention me, reply to me or use a command.\n\n\
         /new – start a new conversation (I keep the old one on record)\n\
         /status – session age, message count, model, history format\n\
         /memory – what I remember about you\n\
         /forget <id> or /forget all – erase memories\n\
         /usage – tokens and cost of this chat\n\
         /reminders – reminders set in this chat; /cancel <id> cancels one\n\
         /rich off or /rich on – answers with tables and maths as rich messages (some older apps show them blank)\n\
         /whoami – your ids"
    )
}

pub fn start_text(bot_name: &str) -> String {
    let bot_name = esc(bot_name);
    format!("Hello! I'm {bot_name}. Write to me and I'll answer. /help lists what I can do.")
}

/// `/rich`'s answer. `on`: what the person asked (`None`: only asked); `was_off`: their setting
/// before; `enabled`: `RICH_MESSAGES` is not `off`; `private`: said in a private chat.
pub fn rich_text(on: Option<bool>, was_off: bool, enabled: bool, private: bool) -> String {
    let now_on = on.unwrap_or(!was_off);
    let mut text = match on {
        Some(true) => "Rich answers on: answers with tables, maths or many headings come as rich messages.".to_string(),
        Some(false) => "Rich answers off: every answer comes as an ordinary message (tables as aligned text).".to_string(),
        None if now_on => "Rich answers are on for you. /rich off turns them off (if your app shows them blank).".to_string(),
        None => "Rich answers are off for you. /rich on turns them on.".to_string(),
    };
    if !enabled && now_on {
        text.push_str(" (My operator has turned rich answers off for now.)");
    }
    if !private {
        text.push_str(" This applies to our private chat: answers in groups are ordinary messages.");
    }
    text
}

/// What `/status` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusInfo {
    pub session_age_secs: Option<i64>,
    pub session_messages: u64,
    pub total_messages: u64,
    pub model: String,
    pub history_format: String,
}

pub fn status_text(s: &StatusInfo) -> String {
    let age = match s.session_age_secs {
        None => "new".to_string(),
        Some(secs) if secs < 120 => format!("{secs} s"),
        Some(secs) if secs < 7200 => format!("{} min", secs / 60),
        Some(secs) if secs < 172_800 => format!("{} h", secs / 3600),
        Some(secs) => format!("{} days", secs / 86_400),
    };
    format!(
        "Session age: {age}\nMessages in this session: {}\nMessages on record: {}\nModel: {}\nHistory format: {}",
        s.session_messages,
        s.total_messages,
        esc(&s.model),
        esc(&s.history_format)
    )
}

pub fn whoami_text(m: &InboundMessage) -> String {
    let mut out = format!("Name: {}\n", esc(&m.speaker.name));
    if let Some(id) = m.speaker.user_id {
        out.push_str(&format!("User id: {id}\n"));
    }
    if let Some(u) = &m.speaker.username {
        out.push_str(&format!("Username: @{}\n", esc(u)));
    }
    out.push_str(&format!("Chat id: {}", m.chat.id));
    if let Some(t) = m.conv.thread_id {
        out.push_str(&format!("\nTopic id: {t}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::*;

    fn text(t: &str) -> InboundMessage {
        InboundMessage {
            conv: ConvKey::chat(5),
            chat: ChatInfo { id: 5, kind: ChatKind::Private, title: None, username: None, is_forum: false },
            message_id: 1,
            date: 0,
            edit_date: None,
            speaker: Speaker { user_id: Some(5), name: "Al".into(), username: Some("al".into()), is_bot: false },
            parts: vec![Part::text(t)],
            reply_to: None,
            forwarded_from: None,
            media_group_id: None,
            is_event: false,
        }
    }

    #[test]
    fn parses_commands_addressed_to_us() {
        assert_eq!(parse(&text("/start"), "edge_bot"), Some(Command::Start));
        assert_eq!(parse(&text("/reset@Edge_Bot"), "edge_bot"), Some(Command::New));
        assert_eq!(parse(&text("/forget all"), "edge_bot"), Some(Command::Forget(ForgetTarget::All)));
        assert_eq!(parse(&text("/forget é1"), "edge_bot"), Some(Command::Forget(ForgetTarget::Unclear)));
        assert_eq!(parse(&text("/status@other_bot"), "edge_bot"), None);
        assert_eq!(parse(&text("/unknown"), "edge_bot"), None);
        assert_eq!(parse(&text("/reminders"), "edge_bot"), Some(Command::Reminders));
        assert_eq!(parse(&text("/cancel #12"), "edge_bot"), Some(Command::Cancel(Some(12))));
        assert_eq!(parse(&text("/cancel soon"), "edge_bot"), Some(Command::Cancel(None)));
        assert_eq!(parse(&text("/crew ON"), "edge_bot"), Some(Command::Crew(Some(true))));
        assert_eq!(parse(&text("/crew off"), "edge_bot"), Some(Command::Crew(Some(false))));
        assert_eq!(parse(&text("/crew"), "edge_bot"), Some(Command::Crew(None)));
        assert_eq!(parse(&text("/rich OFF"), "edge_bot"), Some(Command::Rich(Some(false))));
        assert_eq!(parse(&text("/rich on"), "edge_bot"), Some(Command::Rich(Some(true))));
        assert_eq!(parse(&text("/rich"), "edge_bot"), Some(Command::Rich(None)));
        assert_eq!(parse(&text("/business Away"), "edge_bot"), Some(Command::Business(crate::business::Arg::Set(crate::business::Mode::Away))));
        assert!(rich_text(Some(false), false, true, true).starts_with("Rich answers off"));
        assert!(rich_text(None, true, true, false).contains("private chat"));
        assert_eq!(parse(&text("hello /start"), "edge_bot"), None);
    }

    #[test]
    fn forget_targets_are_parsed_by_characters() {
        assert_eq!(parse_forget(" all "), ForgetTarget::All);
        assert_eq!(parse_forget("ALL"), ForgetTarget::All);
        assert_eq!(parse_forget("n12"), ForgetTarget::Note(12));
        assert_eq!(parse_forget("#M7"), ForgetTarget::Memory(7));
        // Non-ASCII where the byte-sliced parser used to panic, and other junk.
        for junk in ["é1", "ñ", "n١٢", "m-3", "n+3", "m", "", "#", "🦀7", "n12x", "n99999999999999999999", "ｎ12", "n 12"] {
            assert_eq!(parse_forget(junk), ForgetTarget::Unclear, "{junk:?}");
        }
        assert_eq!(ForgetTarget::Note(3).label(), "n3");
    }

    #[test]
    fn commands_with_non_ascii_names_and_arguments_never_panic() {
        for t in ["/é", "/forget é1", "/approve 码", "/ñew", "/start@bøt", "/", "/@", "/🦀@edge_bot x", "/forget\u{200b}all"] {
            let _ = parse(&text(t), "edge_bot");
        }
        assert_eq!(parse(&text("/approve 码"), "edge_bot"), Some(Command::Approve("码".into())));
    }

    #[test]
    fn menu_fits_telegram_rules() {
        for c in menu() {
            assert!(c.command.len() <= 32 && c.command.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            assert!(!c.description.is_empty() && c.description.len() <= 256);
        }
    }

    /// Outside text in a command reply renders as itself: no link, no mention, no bold.
    #[test]
    fn reply_texts_escape_outside_text() {
        let mut m = text("/whoami");
        m.speaker.name = "[click](https://evil.example) **Admin** [x](tg://user?id=1)".into();
        m.speaker.username = Some("al_b*".into());
        let evil = "[click](https://evil.example)";
        let status = status_text(&StatusInfo {
            session_age_secs: None,
            session_messages: 0,
            total_messages: 0,
            model: evil.into(),
            history_format: "compact".into(),
        });
        for reply in [whoami_text(&m), help_text(evil), start_text(evil), status] {
            let chunks = crate::format::render_reply(&reply, 4096);
            let html: String = chunks.iter().map(|c| c.html.as_str()).collect();
            let plain: String = chunks.iter().map(|c| c.plain.as_str()).collect();
            assert!(!html.contains("<a") && !html.contains("<b>"), "{reply:?} became {html:?}");
            assert!(plain.contains(evil), "{plain:?}");
        }
    }

    #[test]
    fn status_mentions_model_and_format() {
        let s = status_text(&StatusInfo {
            session_age_secs: Some(3600),
            session_messages: 4,
            total_messages: 10,
            model: "gemini-x".into(),
            history_format: "compact".into(),
        });
        let s: String = crate::format::render_reply(&s, 4096).into_iter().map(|c| c.plain).collect();
        assert!(s.contains("60 min") && s.contains("gemini-x") && s.contains("compact") && s.contains('4'));
    }
}
