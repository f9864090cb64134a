//! People's text kept from looking like the renderer's own metadata, and the model's echo of
//! that metadata kept from the reply: values JSON-quoted in one pass (`quote`), text that
//! starts like a `[meta]` header shown as `[quoted meta]` ([`escape_meta_lookalikes`]), names
//! that could pass for a compact line's prefix quoted (`compact_name`), and `[meta]` lines
//! and a `bot:` prefix removed from replies ([`sanitize_reply`]).

/// Removes metadata the model may echo from what users will see: `[meta]` lines and a leading
/// `bot:` / `#123 bot:` prefix copied from the compact format.
pub fn sanitize_reply(text: &str) -> String {
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().to_ascii_lowercase().starts_with("[meta]"))
        .collect();
    let joined = kept.join("\n");
    let mut t = joined.trim();
    if let Some(rest) = t.strip_prefix('#') {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && rest[digits..].trim_start().to_ascii_lowercase().starts_with("bot:") {
            t = rest[digits..].trim_start();
        }
    }
    // `get` rather than indexing: model output may start with any character (a panic here
    // once crashed the worker on a reply starting with an emoji).
    if t.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("bot:")) {
        t = t[4..].trim_start();
    }
    t.to_string()
}

/// A JSON string literal of people's text: quotes, backslashes, newlines and other control
/// characters escaped, so a value can never end its field or start a new line; [`escape_meta_lookalikes`]d.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    let _ = write_quoted(&mut out, s);
    out
}

/// [`quote`] written into `out`: `s` escaped_meta_lookalikes, as a JSON string, with the line separators
/// JSON leaves as they are escaped too ([`escape_separators`]). The same text as
/// `escape_separators(&serde_json::to_string(&escape_meta_lookalikes(s)))`, made in one pass and without
/// the three strings between (a turn quotes a name for every message it costs or shows).
pub(crate) fn write_quoted(out: &mut impl std::fmt::Write, s: &str) -> std::fmt::Result {
    out.write_char('"')?;
    let mut result = Ok(());
    escaped_meta_lookalikes(s, |piece| {
        if result.is_ok() {
            result = write_json_escaped(out, piece);
        }
    });
    result?;
    out.write_char('"')
}

/// The inside of a JSON string, as serde_json escapes it, plus NEL, U+2028 and U+2029 as
/// `\u` escapes.
pub(crate) fn write_json_escaped(out: &mut impl std::fmt::Write, s: &str) -> std::fmt::Result {
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let escaped: Option<&str> = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            '\u{08}' => Some("\\b"),
            '\u{0C}' => Some("\\f"),
            c if (c as u32) < 0x20 || matches!(c, '\u{85}' | '\u{2028}' | '\u{2029}') => None,
            _ => continue,
        };
        out.write_str(&s[start..i])?;
        match escaped {
            Some(e) => out.write_str(e)?,
            None => write!(out, "\\u{:04x}", c as u32)?,
        }
        start = i + c.len_utf8();
    }
    out.write_str(&s[start..])
}

/// JSON leaves U+2028, U+2029, NEL, VT and FF as they are; a reader (and a model) sees a new
/// line there. Escaped, a quoted value stays on one line.
pub fn escape_separators(json: &str) -> String {
    let separator = |c: char| matches!(c, '\u{2028}' | '\u{2029}' | '\u{85}' | '\u{0B}' | '\u{0C}');
    if !json.contains(separator) {
        return json.to_string();
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if separator(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters that end a line for a reader (and for a model): `\n`, `\r`, vertical tab, form
/// feed, NEL and the Unicode line and paragraph separators.
pub(crate) fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// Text written by people, made unable to pose as the renderer's metadata: every `[meta`
/// (any case, spaces allowed after the bracket) becomes `[quoted meta`, so a line typed to look
/// like the bot's own header for another member or the operator reads as what it is. Look-alikes
/// count too, judged by the Unicode confusables skeleton (the `decancer` crate) and Unicode's
/// general categories rather than a hand list: any bracket or quote (Unicode's open, close,
/// initial and final punctuation: `［`, `⟦`, `【`, `(`, `«`…, and the bracket look-alikes of
/// [`super::brackets`]: `⎡`, `⌜`…), letters that pass for Latin (fullwidth, mathematical, small capitals, circled,
/// Cyrillic, Greek: `[mеta`, `［ｍｅｔａ`, `[ᴍᴇᴛᴀ`), and invisible characters anywhere in it
/// (format characters such as zero-width spaces, bidi isolates and tag characters; marks such
/// as variation selectors and combining accents: `[m\u{2066}eta`).
pub fn escape_meta_lookalikes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escaped_meta_lookalikes(text, |piece| out.push_str(piece));
    out
}

/// [`escape_meta_lookalikes`], given to `emit` piece by piece.
pub(crate) fn escaped_meta_lookalikes(text: &str, mut emit: impl FnMut(&str)) {
    let mut rest = text;
    while let Some((i, bracket)) = rest.char_indices().find(|(_, c)| is_bracket(*c)) {
        let end = i + bracket.len_utf8();
        emit(&rest[..end]);
        let after = &rest[end..];
        let spaced = after.chars().next().is_some_and(|c| c.is_whitespace() || is_invisible(c));
        if reads_meta(after) {
            emit(if spaced { "quoted" } else { "quoted " });
        }
        rest = after;
    }
    emit(rest);
}

/// What a character passes for, lower case (its confusables skeleton, by `decancer`, as far as
/// the "meta" check needs it: [`super::confusables`]); `None` for what shows as nothing of its
/// own (marks, controls).
pub(crate) fn skeleton(c: char) -> Option<&'static str> {
    super::confusables::skeleton(c)
}

/// Characters that show as nothing, or only change the one before: format characters
/// (zero-width spaces and joiners, bidi controls and isolates, tag characters, the soft
/// hyphen), marks (combining accents, variation selectors), and what has no skeleton.
pub(crate) fn is_invisible(c: char) -> bool {
    !c.is_ascii() && (super::categories::is_format_or_mark(c) || skeleton(c).is_none())
}

/// A bracket or quote of any script: Unicode's open, close, initial and final punctuation
/// (`[`, `]`, `(`, `{`, `［`, `⟦`, `【`, `«`, `»`…), and the look-alikes Unicode's confusables
/// data maps to a bracket or that are named as one (`⎡`, `⌜`: [`super::brackets`]). ASCII text
/// costs one comparison a character.
pub(crate) fn is_bracket(c: char) -> bool {
    matches!(c, '[' | '(' | '{' | ']' | ')' | '}')
        || (!c.is_ascii() && (super::categories::is_opening(c) || super::categories::is_closing(c) || super::brackets::is_lookalike(c)))
}

/// Whether text (right after a bracket) reads "meta" by its skeleton, spaces before and
/// invisible characters anywhere in it aside (a bounded look: the first 64 characters).
pub(crate) fn reads_meta(after: &str) -> bool {
    let mut folded = String::new();
    let start = after.trim_start_matches(|c: char| c.is_whitespace() || is_invisible(c));
    for c in start.chars().take(64).filter(|c| !is_invisible(*c)) {
        let Some(s) = skeleton(c) else { continue };
        folded.push_str(s);
        if folded.len() >= 4 {
            break;
        }
    }
    folded.starts_with("meta")
}

/// A name as the compact format shows it: as is when it cannot pass for a line prefix,
/// JSON-quoted otherwise.
pub(crate) fn compact_name(name: &str) -> String {
    let risky = name.is_empty()
        || name.trim() != name
        || name.eq_ignore_ascii_case("bot")
        || name.chars().any(|c| c.is_control() || is_line_break(c) || "#:→()[]\"\\".contains(c));
    if risky {
        quote(name)
    } else {
        escape_meta_lookalikes(name)
    }
}

/// The characters of a username `[meta]` shows: Telegram usernames are letters, digits and
/// underscores; anything else is dropped.
pub(crate) fn username_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}
