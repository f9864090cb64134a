//! What history costs and how much of it fits: estimated tokens of text, of request contents
//! and of one message in either format, counted without building the text, and the newest
//! messages that fit a budget. The cut is reported by the caller, never silent.
use super::message::HistoryMessage;
use super::structured::write_meta;
use crate::conversation::Part as MsgPart;
use crate::gemini::Content;

/// Rough token estimate, after Gemini's tokenizer (SentencePiece, digits split): each ASCII
/// digit one token, about 4 other ASCII characters per token, 1.5 characters of other scripts.
/// Counted as a quarter token each, digits made it about two thirds of Gemini's count of the
/// recorded conversation's history in either format: message ids are digits (BENCHMARKS.md,
/// "Prompt size", has the estimate against Gemini's count).
pub fn estimate_tokens(s: &str) -> usize {
    let mut tally = Tally::default();
    tally.add(s);
    tally.tokens()
}

/// Estimated prompt tokens of request contents, as the model sees them: the text of each part
/// (function calls and responses by their JSON), plus a few tokens of framing per turn and per
/// part. The JSON syntax of the request itself is not tokenized; thought signatures are not
/// counted.
pub fn estimate_contents_tokens(contents: &[Content]) -> usize {
    contents
        .iter()
        .map(|c| {
            3 + c
                .parts
                .iter()
                .map(|p| {
                    let body = match (&p.text, &p.function_call, &p.function_response) {
                        (Some(t), _, _) => estimate_tokens(t),
                        (_, Some(fc), _) => estimate_tokens(&fc.name) + estimate_tokens(&fc.args.to_string()),
                        (_, _, Some(fr)) => estimate_tokens(&fr.name) + estimate_tokens(&fr.response.to_string()),
                        _ => 0,
                    };
                    2 + body
                })
                .sum::<usize>()
        })
        .sum()
}

/// Characters of the request contents as sent (JSON), for size comparisons.
pub fn contents_json_chars(contents: &[Content]) -> usize {
    serde_json::to_string(contents).map(|s| s.chars().count()).unwrap_or(0)
}

/// Counts what is written as [`estimate_tokens`] counts a string.
#[derive(Default)]
pub(crate) struct Tally {
    /// ASCII characters but digits.
    ascii: usize,
    digits: usize,
    other: usize,
}

impl Tally {
    pub(crate) fn tokens(&self) -> usize {
        self.digits + self.ascii.div_ceil(4) + (self.other * 2).div_ceil(3)
    }

    pub(crate) fn add(&mut self, s: &str) {
        // Most text is ASCII, which `is_ascii` checks a word at a time.
        if s.is_ascii() {
            let digits = s.bytes().filter(u8::is_ascii_digit).count();
            self.digits += digits;
            self.ascii += s.len() - digits;
            return;
        }
        for c in s.chars() {
            if c.is_ascii_digit() {
                self.digits += 1;
            } else if c.is_ascii() {
                self.ascii += 1;
            } else {
                self.other += 1;
            }
        }
    }
}

impl std::fmt::Write for Tally {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.add(s);
        Ok(())
    }
}

/// [`estimate_tokens`] of a message's `compact_text`, without building it (a turn counts
/// every loaded message).
pub(crate) fn compact_text_tokens(m: &HistoryMessage) -> usize {
    // The parts are joined by single spaces (ASCII).
    let mut tally = Tally { ascii: m.parts.len().saturating_sub(1), ..Tally::default() };
    for p in &m.parts {
        match p {
            MsgPart::Text { text, .. } => tally.add(text),
            p => tally.add(&p.render_compact()),
        }
    }
    tally.tokens()
}

/// Estimated cost of one message in either format (bot turns counted once, by their text).
pub fn message_cost(m: &HistoryMessage, structured: bool) -> usize {
    let text = compact_text_tokens(m);
    if structured {
        text + meta_tokens(m) + 12
    } else {
        // `Name: text` and the line break; an arrow and its author for a reply. The ids of the
        // last lines are within the budget's slack.
        text + estimate_tokens(&m.name) + 2 + if m.reply_to.is_some() { 3 } else { 0 }
    }
}

/// The index of the first message that fits the budget when the newest are kept. Always keeps
/// at least the last message.
pub fn fit_budget(msgs: &[HistoryMessage], budget: usize, structured: bool) -> usize {
    let costs: Vec<usize> = msgs.iter().map(|m| message_cost(m, structured)).collect();
    fit_costs(&costs, budget)
}

/// [`fit_budget`] over the messages' costs, computed once by the caller.
pub fn fit_costs(costs: &[usize], budget: usize) -> usize {
    let mut used = 0;
    for (i, c) in costs.iter().enumerate().rev() {
        used += c;
        if used > budget && i + 1 < costs.len() {
            return i + 1;
        }
    }
    0
}

/// The estimated tokens of [`meta_line`](super::meta_line) (`estimate_tokens` of it), counted as it is written,
/// with no line made: a turn costs every message it loaded, hundreds, to find where to cut.
pub fn meta_tokens(m: &HistoryMessage) -> usize {
    let mut tally = Tally::default();
    let _ = write_meta(m, &mut tally);
    tally.tokens()
}
