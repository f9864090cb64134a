//! Telegram Business (issue 49): the bot connected to a person's own account (Settings →
//! Telegram Business → Chatbots). The decisions, pure: the owner's mode (`/business
//! draft|away|auto|off`), what a connection's rights allow, when the owner is told the bot
//! cannot act for them, and the texts. The edge is `bot::business`.
//!
//! What works: the connection is kept (`business_connection` updates, an unknown id looked up
//! with `getBusinessConnection`), an owner the access policy refuses is told once why, the
//! owner picks a mode, gives business notes (what contacts may be told), draft mode's
//! suggestions, and away and auto modes' answers (`suggest`), and asks for a digest of what
//! they missed (`digest`).

pub mod digest;
pub mod suggest;

/// How the bot handles its owner's business chats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// A suggested reply for each burst, in the owner's private chat, to approve.
    #[default]
    Draft,
    /// Answers a contact itself once the owner has been quiet in that chat for a while.
    Away,
    /// Answers after its usual quiet window.
    Auto,
    /// Nothing.
    Off,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "draft" => Mode::Draft,
            "away" => Mode::Away,
            "auto" => Mode::Auto,
            "off" => Mode::Off,
            _ => return None,
        })
    }

    /// As stored (`users.business_mode`) and typed.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Draft => "draft",
            Mode::Away => "away",
            Mode::Auto => "auto",
            Mode::Off => "off",
        }
    }

    /// The stored mode, `draft` when none or unknown.
    pub fn stored(s: Option<&str>) -> Mode {
        s.and_then(Mode::parse).unwrap_or_default()
    }

    fn describe(self, away_secs: u32) -> String {
        match self {
            Mode::Draft => "I suggest a reply to each contact here, for you to send or skip".to_string(),
            Mode::Away => format!("I answer a contact myself when you have not answered them within {}", minutes(away_secs)),
            Mode::Auto => "I answer your contacts myself".to_string(),
            Mode::Off => "I leave your business chats alone".to_string(),
        }
    }
}

/// "5 minutes", "1 minute", "30 seconds".
fn minutes(secs: u32) -> String {
    match secs {
        s if s % 60 == 0 && s == 60 => "1 minute".to_string(),
        s if s % 60 == 0 => format!("{} minutes", s / 60),
        s => format!("{s} seconds"),
    }
}

/// `/business`'s argument: only asked, a mode, or something else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    Show,
    Set(Mode),
    /// `/business digest`: what the owner missed.
    Digest,
    Unclear,
}

pub fn parse_arg(args: &str) -> Arg {
    match args.trim() {
        "" => Arg::Show,
        a if a.eq_ignore_ascii_case("digest") => Arg::Digest,
        a => Mode::parse(a).map(Arg::Set).unwrap_or(Arg::Unclear),
    }
}

/// `/business notes …`: what the owner lets the bot tell contacts (hours, prices, links).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotesArg {
    Show,
    Clear,
    Set(String),
}

/// The most characters of business notes kept (the rest is cut, and the owner told).
pub const NOTES_CAP: usize = 2000;

/// `/business notes [clear|<text>]`, when the arguments begin with the word `notes`.
pub fn parse_notes(args: &str) -> Option<NotesArg> {
    let a = args.trim_start();
    let (word, rest) = a.split_once(char::is_whitespace).unwrap_or((a, ""));
    if !word.eq_ignore_ascii_case("notes") {
        return None;
    }
    let rest = rest.trim();
    Some(match rest {
        "" => NotesArg::Show,
        r if r.eq_ignore_ascii_case("clear") => NotesArg::Clear,
        r => NotesArg::Set(r.to_string()),
    })
}

/// The notes as kept: at most [`NOTES_CAP`] characters; whether they were cut.
pub fn capped_notes(text: &str) -> (String, bool) {
    let cut = text.chars().count() > NOTES_CAP;
    (text.chars().take(NOTES_CAP).collect(), cut)
}

/// `/business notes`'s answer (Markdown: the notes are the owner's own text, escaped).
pub fn notes_text(arg: &NotesArg, stored: Option<&str>, cut: bool) -> String {
    let esc = crate::format::escape_markdown;
    match (arg, stored) {
        (NotesArg::Clear, _) => "Business notes cleared: I tell contacts only what their chat shows.".to_string(),
        (NotesArg::Set(_), Some(n)) => {
            let more = if cut { format!(" (cut to {NOTES_CAP} characters)") } else { String::new() };
            format!("Business notes kept{more}. I may tell your contacts:\n\n{}", esc(n))
        }
        (_, Some(n)) if !n.is_empty() => format!("Your business notes (what I may tell contacts):\n\n{}\n\n/business notes <text> replaces them; /business notes clear removes them.", esc(n)),
        _ => "No business notes yet. /business notes <text> tells me what contacts may know: hours, prices, links, your tone.".to_string(),
    }
}

/// A change of the owner's Business settings from the Mini App (`PUT /app/api/business`): the
/// mode, the notes (`Some(None)`: cleared), or both; the same rules as `/business`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub mode: Option<Mode>,
    pub notes: Option<Option<String>>,
}

/// Reads a Mini App change: `mode` one of the four, `notes` a text of at most [`NOTES_CAP`]
/// characters (empty or `null`: cleared). The refusal's text otherwise.
pub fn change_of(body: &serde_json::Value) -> Result<Change, &'static str> {
    let mode = match body.get("mode") {
        None => None,
        Some(m) => Some(m.as_str().and_then(Mode::parse).ok_or("mode is draft, away, auto or off")?),
    };
    let notes = match body.get("notes") {
        None => None,
        Some(serde_json::Value::Null) => Some(None),
        Some(n) => {
            let n = n.as_str().ok_or("notes are a text")?.trim();
            if n.chars().count() > NOTES_CAP {
                return Err("notes are at most 2,000 characters");
            }
            Some((!n.is_empty()).then(|| n.to_string()))
        }
    };
    if mode.is_none() && notes.is_none() {
        return Err("nothing to change: send mode, notes or both");
    }
    Ok(Change { mode, notes })
}

/// A stored connection as `/business` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connected {
    pub enabled: bool,
    /// `rights.can_reply`.
    pub can_reply: bool,
    /// `rights.can_read_messages`.
    pub can_read: bool,
}

/// What the answer to `/business` says.
pub struct Status<'a> {
    /// `BUSINESS` is not `off`.
    pub feature_on: bool,
    /// Said in the person's private chat with the bot.
    pub private: bool,
    pub arg: Arg,
    /// The mode after the command.
    pub mode: Mode,
    pub connection: Option<&'a Connected>,
    /// `BUSINESS_AWAY_SECONDS`.
    pub away_secs: u32,
}

/// `/business`'s answer (Markdown, as every command's). Says plainly what the mode will do,
/// what the connection allows and that the contacts' side is not answered yet.
pub fn status_text(s: &Status) -> String {
    if !s.feature_on {
        return "Telegram Business is turned off for this bot by its operator.".to_string();
    }
    if !s.private {
        return "Business settings are yours alone: send /business in our private chat.".to_string();
    }
    let mut text = match s.arg {
        Arg::Unclear => "Use /business draft, /business away, /business auto or /business off; /business digest for what you missed.\n\n".to_string(),
        Arg::Set(m) => format!("Business mode set to {}.\n\n", m.as_str()),
        Arg::Show | Arg::Digest => String::new(),
    };
    text.push_str(&format!("Mode: {} ({}).", s.mode.as_str(), s.mode.describe(suggest::delay_secs(Mode::Away, s.away_secs))));
    match s.connection {
        None => text.push_str(&format!("\n\n{NOT_CONNECTED}")),
        Some(c) if !c.enabled => text.push_str("\n\nYour Telegram Business connection is turned off: I do nothing in your business chats."),
        Some(c) => {
            let reply = if c.can_reply { "may reply in your chats" } else { "may not reply (only suggestions, without Send, in every mode)" };
            let read = if c.can_read { "may mark messages as read" } else { "may not mark messages as read" };
            text.push_str(&format!("\n\nConnected: I {reply}, and {read}."));
        }
    }
    text
}

/// When the person has no Business connection the bot serves.
pub const NOT_CONNECTED: &str = "No Telegram Business account is connected to me. In Telegram: Settings → Telegram Business → Chatbots, then add me.";

/// What an owner the access policy refuses is told, once, in their private chat with the bot.
pub const REFUSED_OWNER: &str = "You connected me to your Telegram Business account, but I cannot act for you: \
     this bot only works for the people its operator admits. Ask the operator, or remove me in Settings → \
     Telegram Business → Chatbots.";

/// Whether an owner is to be told [`REFUSED_OWNER`] now: refused by the access policy, the
/// connection on (a removal needs no explanation), and not told before.
pub fn tell_refused(admitted: bool, enabled: bool, told: bool) -> bool {
    !admitted && enabled && !told
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_parse_cap_and_answer() {
        assert_eq!(parse_notes("notes"), Some(NotesArg::Show));
        assert_eq!(parse_notes(" NOTES clear "), Some(NotesArg::Clear));
        assert_eq!(parse_notes("notes Open 9-17, *closed* Sundays"), Some(NotesArg::Set("Open 9-17, *closed* Sundays".into())));
        assert_eq!(parse_notes("away"), None);
        assert_eq!(parse_notes("notesy"), None);
        let (kept, cut) = capped_notes(&"é".repeat(NOTES_CAP + 5));
        assert!(cut && kept.chars().count() == NOTES_CAP);
        let set = notes_text(&NotesArg::Set("x".into()), Some("a *b*"), false);
        assert!(set.contains("a \\*b\\*"), "{set}");
        assert!(notes_text(&NotesArg::Show, None, false).starts_with("No business notes"));
    }

    #[test]
    fn a_mini_app_change_follows_the_commands_rules() {
        use serde_json::json;
        assert_eq!(change_of(&json!({"mode": "Away"})), Ok(Change { mode: Some(Mode::Away), notes: None }));
        assert_eq!(change_of(&json!({"notes": "  Open 9-5 "})), Ok(Change { mode: None, notes: Some(Some("Open 9-5".into())) }));
        assert_eq!(change_of(&json!({"notes": null, "mode": "off"})), Ok(Change { mode: Some(Mode::Off), notes: Some(None) }));
        assert_eq!(change_of(&json!({"notes": " "})).unwrap().notes, Some(None));
        assert!(change_of(&json!({"mode": "sometimes"})).is_err());
        assert!(change_of(&json!({"mode": 3})).is_err());
        assert!(change_of(&json!({"notes": 3})).is_err());
        assert!(change_of(&json!({"notes": "é".repeat(NOTES_CAP + 1)})).is_err());
        assert!(change_of(&json!({"notes": "é".repeat(NOTES_CAP)})).is_ok());
        assert!(change_of(&json!({})).is_err());
    }

    #[test]
    fn modes_parse_in_any_case_and_default_to_draft() {
        assert_eq!(parse_arg(""), Arg::Show);
        assert_eq!(parse_arg(" AWAY "), Arg::Set(Mode::Away));
        assert_eq!(parse_arg("auto"), Arg::Set(Mode::Auto));
        assert_eq!(parse_arg("off"), Arg::Set(Mode::Off));
        assert_eq!(parse_arg("sometimes"), Arg::Unclear);
        assert_eq!(parse_arg(" Digest"), Arg::Digest);
        assert_eq!(Mode::stored(None), Mode::Draft);
        assert_eq!(Mode::stored(Some("nonsense")), Mode::Draft);
        assert_eq!(Mode::stored(Some("away")), Mode::Away);
    }

    #[test]
    fn status_says_what_the_connection_allows() {
        let c = Connected { enabled: true, can_reply: false, can_read: true };
        let s = Status { feature_on: true, private: true, arg: Arg::Set(Mode::Away), mode: Mode::Away, connection: Some(&c), away_secs: 300 };
        let t = status_text(&s);
        assert!(t.starts_with("Business mode set to away."), "{t}");
        assert!(t.contains("within 5 minutes"), "{t}");
        assert!(t.contains("may not reply"), "{t}");
        assert!(t.contains("may mark messages as read"), "{t}");
        let none = status_text(&Status { connection: None, arg: Arg::Show, ..s });
        assert!(none.contains("No Telegram Business account"), "{none}");
        let off = Connected { enabled: false, ..c };
        assert!(status_text(&Status { connection: Some(&off), ..s }).contains("turned off"));
        assert!(status_text(&Status { feature_on: false, ..s }).contains("turned off for this bot"));
        assert!(status_text(&Status { private: false, ..s }).contains("private chat"));
        assert!(status_text(&Status { arg: Arg::Unclear, ..s }).starts_with("Use /business draft"));
    }

    #[test]
    fn only_a_refused_owner_of_a_live_connection_is_told_and_only_once() {
        assert!(tell_refused(false, true, false));
        assert!(!tell_refused(false, true, true));
        assert!(!tell_refused(false, false, false));
        assert!(!tell_refused(true, true, false));
    }
}
