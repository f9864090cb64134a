//! What a turn sees: from the rows a turn loads (the conversation's newest messages, the last
//! answered seq, the stored session start, the notes) and the settings, one pure function
//! decides the history window and everything the prompt says about it.
//!
//! Invariants (INVARIANTS.md): "Dedup" (a turn with nothing new from people since the last
//! answered turn has no context, so no model call; a scheduled run is the exception: it was
//! asked for earlier, and happens regardless), "Summaries stand in for cut history"
//! (`last_cut`, [`summary_for`]), "History cuts stay put", "A turn that keeps failing shrinks
//! its window", "A turn reads only new or edited messages".
//!
//! Also:
//! - The window is the current session (an idle gap after the stored start begins a new one),
//!   at most `row_limit` rows, cut from the oldest end to the token budget.
//! - The people of a turn are the senders of the shown messages (the memory scope's `people`).
//! - Operator notes (and the bundled curated notes) are instructions; the agent's notes are
//!   learned context: they never mix.

use crate::history::{self, HistoryMessage, Role};
use crate::turn::session::{in_session, session_start};
use serde::Deserialize;

/// What a turn has loaded.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The newest messages of the stored session, oldest first; one row more than
    /// `row_limit` when there are more (that row is cut).
    pub messages: Vec<HistoryMessage>,
    /// The newest message seq an earlier turn answered.
    pub answered_seq: i64,
    /// `conversations.session_start_seq` and `session_started_at`.
    pub stored_start: i64,
    pub stored_started_at: Option<i64>,
    /// The turn is a scheduled run: it happens with nothing new from people too.
    pub scheduled: bool,
    /// `conversations.history_cut_seq`: the first message the last turn showed, when it cut.
    pub stored_cut: Option<i64>,
    /// `summaries.until_seq`: the newest message the conversation's summary covers.
    pub summary_until: Option<i64>,
    /// The bot's answers kept apart from `messages` (migration 0041), each one's `seq` the
    /// message it came after: merged in where their turn's messages are shown.
    pub answers: Vec<HistoryMessage>,
}

/// The settings the window depends on.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub row_limit: usize,
    pub session_idle_secs: i64,
    pub token_budget: usize,
    pub structured: bool,
}

/// The history a turn shows, and what the prompt and the turn's row say about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// Shown, in the order the model reads them.
    pub messages: Vec<HistoryMessage>,
    /// The newest message on record (what this turn answers up to).
    pub newest_seq: i64,
    /// Where the session starts (stored as `session_start_seq`).
    pub session_start: i64,
    /// Set when the session started now (its start moved, or none was recorded).
    pub session_started_at: Option<i64>,
    /// No turn has answered in this session yet (command replies do not count).
    pub new_session: bool,
    /// The newest message that exists but is not shown (over the row limit or the budget).
    pub last_cut: Option<i64>,
    /// `turns.history_cut_seq`: with a cut, the first message shown.
    pub cut_seq: Option<i64>,
    /// The people who wrote the shown messages, sorted.
    pub people: Vec<i64>,
}

/// The window of a turn, or `None` when nothing new from people arrived since the last
/// answered turn (the turn makes no model call).
pub fn window(loaded: Loaded, limits: Limits, now_ms: i64) -> Option<Window> {
    let newest_seq = loaded.messages.last().map_or(0, |m| m.seq);
    if !loaded.scheduled && !loaded.messages.iter().any(|m| m.seq > loaded.answered_seq && m.role != Role::Bot) {
        return None;
    }
    let stored_start = loaded.stored_start;
    let stored_cut = loaded.stored_cut;
    let mut rows = loaded.messages;
    let start = session_start(&rows, stored_start, limits.session_idle_secs);
    let mut last_cut: Option<i64> = None;
    if rows.len() > limits.row_limit {
        let extra = rows.remove(0);
        last_cut = (extra.seq >= start).then_some(extra.seq);
    }
    // An answer kept apart belongs where its turn's messages are loaded (by its place when
    // its turn's row is gone): not before the oldest loaded row. Answers are not rows of the
    // row limit (which counts what a load reads).
    let oldest = rows.first().map_or(i64::MAX, |m| m.seq);
    let answers: Vec<HistoryMessage> = loaded.answers.into_iter().filter(|a| a.answered_upto.unwrap_or(a.seq) >= oldest && in_session(a, start)).collect();
    let limits = Limits { row_limit: limits.row_limit + answers.len(), ..limits };
    let mut messages: Vec<HistoryMessage> = rows.into_iter().filter(|m| in_session(m, start)).chain(answers).collect();
    history::chronological(&mut messages);
    let new_session = start > stored_start || !messages.iter().any(|m| m.role == Role::Bot && m.turn_id.is_some());
    let session_started_at = (start != stored_start || loaded.stored_started_at.is_none()).then_some(now_ms);
    let first = stable_start(&messages, last_cut.is_some(), Anchors { stored_cut, summary_until: loaded.summary_until }, limits);
    if first > 0 {
        let dropped = messages[..first].iter().map(|m| m.seq).max().unwrap_or(0);
        last_cut = Some(last_cut.map_or(dropped, |c| c.max(dropped)));
        messages.drain(..first);
    }
    let cut_seq = last_cut.map(|_| messages.first().map_or(newest_seq, |m| m.seq));
    let mut people: Vec<i64> = messages.iter().filter(|m| m.role == Role::User).filter_map(|m| m.user_id).collect();
    crate::order::sort(&mut people);
    people.dedup();
    Some(Window { messages, newest_seq, session_start: start, session_started_at, new_session, last_cut, cut_seq, people })
}

/// What a new window's start may hold on to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Anchors {
    /// The first message the last turn showed, when it cut.
    pub stored_cut: Option<i64>,
    /// The newest message the summary covers.
    pub summary_until: Option<i64>,
}

/// Where the shown history starts (an index into `messages`), chosen so that it stays put:
/// consecutive turns then repeat the same history prefix, which Gemini bills at the cached
/// rate. In order:
/// 1. the last turn's start (`stored_cut`), while it is still loaded and what follows it fits
///    the budget;
/// 2. the start of everything, when it all fits (no cut);
/// 3. right after what the summary covers, when what follows fits;
/// 4. otherwise the oldest messages go in one block, down to [`RECUT_SHARE`] of the budget and
///    of the row limit (`more_before`: more rows exist than were loaded), and that start then
///    holds for many turns.
///
/// The newest message is always shown.
pub fn stable_start(messages: &[HistoryMessage], more_before: bool, anchors: Anchors, limits: Limits) -> usize {
    // Each message's cost once (a structured message's is its rendered meta line's), summed
    // from the end: the cost of showing everything from an index on.
    let costs: Vec<usize> = messages.iter().map(|m| history::message_cost(m, limits.structured)).collect();
    let mut from_on = vec![0; costs.len() + 1];
    for i in (0..costs.len()).rev() {
        from_on[i] = from_on[i + 1] + costs[i];
    }
    let cost = |from: usize| -> usize { from_on[from] };
    let fits = |at: usize| at > 0 && cost(at) <= limits.token_budget;
    if let Some(at) = anchors.stored_cut.and_then(|c| messages.iter().position(|m| m.seq == c)).filter(|&at| fits(at)) {
        return at;
    }
    if !more_before && messages.len() <= limits.row_limit && cost(0) <= limits.token_budget {
        return 0;
    }
    if let Some(at) = anchors.summary_until.and_then(|u| messages.iter().position(|m| m.seq > u)).filter(|&at| fits(at)) {
        return at;
    }
    let (budget, rows) = (limits.token_budget * RECUT_SHARE.0 / RECUT_SHARE.1, limits.row_limit * RECUT_SHARE.0 / RECUT_SHARE.1);
    let by_rows = messages.len().saturating_sub(rows.max(1));
    let by_budget = history::fit_costs(&costs, budget);
    by_rows.max(by_budget).min(messages.len().saturating_sub(1))
}

/// A chat object's copy of the rows its turns loaded, so that a turn over a long history
/// reads and converts only the messages that are new or edited since (issue 17). Stored
/// messages change in three ways only: a new message gets a higher seq; an edit marks its row
/// with the conversation's next edit mark (`messages.rev`, migration 0019); anything else (a
/// message joining or leaving the history; a turn's `upto_seq` moving on its retry; a
/// deletion) bumps the conversation's `history_version` (triggers, migrations 0018 and 0019).
/// So the copy holds while the version and the session start are what they were when it was
/// taken; then the rows after `upto`, and the copy's rows marked after `rev`, are all that is
/// missing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowCache {
    /// The conversation the rows are of (the edge offers the copy only to its turns).
    pub conv: String,
    pub version: i64,
    pub session_start: i64,
    /// The conversation's newest edit mark when the copy was taken: rows marked later are read
    /// again.
    pub rev: i64,
    /// The newest seq the copy covers: newer rows are read from D1.
    pub upto: i64,
    /// The rows, oldest first: the newest of the session up to `upto`, at most `limit` + 1
    /// (what a turn loads).
    pub rows: Vec<HistoryMessage>,
    pub limit: usize,
}

impl RowCache {
    /// Whether the copy can serve a load of `limit` rows (it holds that many of the past).
    pub fn serves(&self, limit: usize) -> bool {
        limit <= self.limit
    }

    /// A turn's rows (oldest first, at most `limit` + 1, like a load) from the copy, the copy's
    /// rows D1 returned as edited since `rev` (`edited`, in place of the copy's) and the rows
    /// D1 returned after `upto` (`fresh`, oldest first, replaced by them), when the copy holds
    /// for the conversation's `version` and `session_start` as read with them (the query
    /// decides the same way). False when it does not: D1 then returned the whole window and
    /// `fresh` is left as it is. The copy's rows move (no copy of them is made).
    pub fn merge(self, version: i64, session_start: i64, edited: Vec<HistoryMessage>, fresh: &mut Vec<HistoryMessage>, limit: usize) -> bool {
        if version != self.version || session_start != self.session_start {
            return false;
        }
        let upto = self.upto;
        let mut rows = self.rows;
        rows.retain(|m| m.seq >= session_start);
        // An edited row the copy does not hold is older than its rows (an edit cannot add or
        // remove a row from the history: that bumps the version).
        for m in edited {
            if let Ok(i) = rows.binary_search_by_key(&m.seq, |r| r.seq) {
                rows[i] = m;
            }
        }
        rows.extend(fresh.drain(..).filter(|m| m.seq > upto));
        let extra = rows.len().saturating_sub(limit + 1);
        rows.drain(..extra);
        *fresh = rows;
        true
    }

    /// The copy to keep after a load of `rows` (oldest first, the newest `limit` + 1 of the
    /// session, as read with `version` and `session_start`). It stops before the first bot
    /// message whose turn is not stored yet (an answer's chunk goes out while its turn runs;
    /// the turn's row, which places the answer, is written at its end): from there on the rows
    /// are read again, until that row exists.
    pub fn keep(conv: &str, version: i64, session_start: i64, rev: i64, rows: &[HistoryMessage], limit: usize) -> RowCache {
        let settled = rows.iter().position(|m| m.role == Role::Bot && m.turn_id.is_some() && m.answered_upto.is_none()).unwrap_or(rows.len());
        let rows = rows[..settled].to_vec();
        let upto = rows.last().map_or(session_start - 1, |m| m.seq);
        RowCache { conv: conv.to_string(), version, session_start, rev, upto, rows, limit }
    }
}

/// The rows a turn's attempt loads at most: `base` for the first two attempts, then half as
/// many for each further one, down to [`MIN_ROWS`]. A turn that failed twice may have run out
/// of its invocation's CPU time over a long history (the runtime ends such an invocation and
/// the turn is recovered as its next attempt): it goes on with a smaller window (what it cuts
/// is what the summary covers, or the prompt says it is not shown) rather than failing again.
pub fn rows_for_attempt(base: usize, attempt: u32) -> usize {
    let halvings = attempt.saturating_sub(2).min(16);
    (base >> halvings).max(MIN_ROWS.min(base))
}

/// The fewest rows a retried turn still loads.
pub const MIN_ROWS: usize = 50;

/// When the history has to be cut anew, it is cut to this share (numerator, denominator) of
/// the budget and the row limit, so the next cuts are many turns away.
pub const RECUT_SHARE: (usize, usize) = (2, 3);

/// The summary a turn shows, and whether the history is cut beyond what it covers (the prompt
/// then says so). Without a cut the summary is not needed and not shown.
pub fn summary_for<'a>(last_cut: Option<i64>, summary: Option<&'a str>, summary_until: Option<i64>) -> (Option<&'a str>, bool) {
    let shown = last_cut.and(summary);
    let uncovered = last_cut.is_some_and(|cut| summary_until.is_none_or(|until| until < cut));
    (shown, uncovered)
}

/// A note as a turn loads it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Note {
    pub id: i64,
    pub about_user_id: Option<i64>,
    pub content: String,
    /// `operator` or `agent`.
    pub source: String,
    /// Who supplied it, for a note about a person (migration 0022).
    #[serde(default)]
    pub supplied_by: Option<i64>,
}

/// The notes of a turn split by who wrote them: the operator's (first, then the bundled
/// curated notes) are instructions; the agent's, then the recalled memories, are learned
/// context, a note about a person marked with whom it is about (and who said it, when that
/// was someone else: never read as the person's own words).
pub fn split_notes(notes: &[Note], curated: Vec<String>, memories: Vec<String>) -> (Vec<String>, Vec<String>) {
    let operator: Vec<String> = notes.iter().filter(|n| n.source == "operator").map(|n| n.content.clone()).chain(curated).collect();
    let mut learned: Vec<String> = notes
        .iter()
        .filter(|n| n.source != "operator")
        .map(|n| match (n.about_user_id, n.supplied_by) {
            (Some(u), Some(by)) if by != u => format!("(about user {u}, said by user {by}) {}", n.content),
            (Some(u), _) => format!("(about user {u}) {}", n.content),
            (None, _) => n.content.clone(),
        })
        .collect();
    learned.extend(memories);
    (operator, learned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::Part;

    const DAY: i64 = 86_400;

    fn msg(seq: i64, date: i64, role: Role, user: i64, text: &str) -> HistoryMessage {
        HistoryMessage {
            seq,
            message_id: Some(seq),
            role,
            user_id: Some(user),
            name: format!("U{user}"),
            username: None,
            reply_to: None,
            reply_info: None,
            forwarded_from: None,
            parts: vec![Part::text(text)],
            date,
            edited: false,
            turn_id: (role == Role::Bot).then(|| format!("t{seq}")),
            answered_upto: (role == Role::Bot).then_some(seq - 1),
            media_group_id: None,
            album_ids: Vec::new(),
        }
    }

    fn user(seq: i64, date: i64, who: i64) -> HistoryMessage {
        msg(seq, date, Role::User, who, "hello there")
    }

    fn limits() -> Limits {
        Limits { row_limit: 400, session_idle_secs: DAY, token_budget: 100_000, structured: true }
    }

    fn loaded(messages: Vec<HistoryMessage>, answered_seq: i64) -> Loaded {
        Loaded { messages, answered_seq, stored_start: 0, stored_started_at: Some(1), scheduled: false, stored_cut: None, summary_until: None, answers: Vec::new() }
    }

    /// What D1 returns for a load of `limit` rows after `after` (oldest first): the newest
    /// `limit` + 1 of the session's rows newer than `after`.
    fn load_rows(all: &[HistoryMessage], start: i64, after: i64, limit: usize) -> Vec<HistoryMessage> {
        let matching: Vec<HistoryMessage> = all.iter().filter(|m| m.seq >= start && m.seq > after).cloned().collect();
        let from = matching.len().saturating_sub(limit + 1);
        matching[from..].to_vec()
    }

    #[test]
    fn a_kept_copy_plus_what_is_new_or_edited_is_the_load_it_replaces() {
        // Conversations of many lengths, grown by many steps, with edits of old and new rows
        // between loads and the copy kept after each load: what it serves equals a full load
        // every time.
        for limit in [3usize, 10, 400] {
            for step in [1i64, 2, 7, 30] {
                let mut all: Vec<HistoryMessage> = Vec::new();
                let mut revs: Vec<i64> = Vec::new(); // each row's edit mark, 0 when never edited
                let mut copy: Option<RowCache> = None;
                let mut seq = 0;
                for round in 0..40i64 {
                    for _ in 0..step {
                        seq += 1;
                        let role = if seq % 5 == 0 { Role::Bot } else { Role::User };
                        all.push(msg(seq, seq, role, 1 + seq % 3, "words"));
                        revs.push(0);
                    }
                    // Edits: a row far back, one in the middle, the newest (some rounds).
                    for at in [round * 7 % seq, seq / 2, seq - 1].into_iter().filter(|at| (round + at) % 3 != 0) {
                        let i = at as usize;
                        if all[i].role == Role::User {
                            all[i].parts = vec![crate::conversation::Part::Text { text: format!("edited in round {round}"), entities: vec![] }];
                            all[i].edited = true;
                            revs[i] = revs.iter().max().unwrap() + 1;
                        }
                    }
                    let rev = *revs.iter().max().unwrap();
                    let full = load_rows(&all, 0, -1, limit);
                    let rows = match copy.take().filter(|c| c.serves(limit)) {
                        Some(c) => {
                            let mut rows = load_rows(&all, 0, c.upto, limit);
                            let edited: Vec<HistoryMessage> =
                                all.iter().zip(&revs).filter(|(m, r)| **r > c.rev && m.seq <= c.upto).map(|(m, _)| m.clone()).collect();
                            assert!(c.merge(0, 0, edited, &mut rows, limit), "the copy holds");
                            rows
                        }
                        None => full.clone(),
                    };
                    assert_eq!(rows, full, "limit {limit}, step {step}, at seq {seq}");
                    copy = Some(RowCache::keep("c", 0, 0, rev, &rows, limit));
                }
            }
        }
    }

    /// Without the edited rows the copy would serve the old text: the merge is what puts the
    /// edit in.
    #[test]
    fn an_edit_reaches_the_copy_only_through_the_edited_rows() {
        let rows: Vec<HistoryMessage> = (1..=6).map(|s| user(s, s, 1)).collect();
        let copy = RowCache::keep("c", 4, 1, 2, &rows, 10);
        assert_eq!(copy.rev, 2);
        let mut changed = rows[2].clone();
        changed.edited = true;
        let mut stale = vec![user(7, 7, 1)];
        assert!(copy.clone().merge(4, 1, Vec::new(), &mut stale, 10));
        assert!(!stale[2].edited);
        let mut merged = vec![user(7, 7, 1)];
        assert!(copy.merge(4, 1, vec![changed.clone(), user(40, 40, 1)], &mut merged, 10));
        assert_eq!(merged.len(), 7, "a row the copy does not hold is not added");
        assert_eq!(merged[2], changed);
    }

    #[test]
    fn a_copy_does_not_hold_past_a_change_and_stops_before_an_unplaced_answer() {
        let rows: Vec<HistoryMessage> = (1..=6).map(|s| user(s, s, 1)).collect();
        let copy = RowCache::keep("c", 4, 1, 0, &rows, 10);
        assert_eq!(copy.upto, 6);
        let mut fresh = vec![user(7, 7, 1)];
        assert!(!copy.clone().merge(5, 1, Vec::new(), &mut fresh, 10), "a bumped version (a retry's answer placed anew)");
        assert!(!copy.clone().merge(4, 3, Vec::new(), &mut fresh, 10), "another session start");
        assert_eq!(fresh, vec![user(7, 7, 1)], "left as D1 returned it");
        assert!(copy.serves(10) && !copy.serves(11), "a bigger load needs rows the copy lacks");
        // A chunk of an answer sent while its turn ran: no turn row yet, so no place.
        let mut unplaced = msg(4, 4, Role::Bot, 0, "early chunk");
        unplaced.answered_upto = None;
        let mut with_chunk = rows.clone();
        with_chunk[3] = unplaced;
        let copy = RowCache::keep("c", 4, 1, 0, &with_chunk, 10);
        assert_eq!(copy.upto, 3);
        assert_eq!(copy.rows.len(), 3);
        // The rows from it on are read again (now placed) and served.
        let placed = msg(4, 4, Role::Bot, 0, "early chunk");
        let mut merged: Vec<HistoryMessage> = std::iter::once(placed).chain((5..=6).map(|s| user(s, s, 1))).collect();
        assert!(copy.merge(4, 1, Vec::new(), &mut merged, 10));
        assert_eq!(merged.len(), 6);
        assert_eq!(merged[3].answered_upto, Some(3));
        // Nothing settled: the copy covers nothing and everything is read.
        let none = RowCache::keep("c", 4, 1, 0, &with_chunk[3..], 10);
        assert_eq!((none.upto, none.rows.len()), (0, 0));
    }

    #[test]
    fn nothing_new_from_people_means_no_context() {
        let msgs = vec![user(1, 0, 7), msg(2, 5, Role::Bot, 0, "hi")];
        assert_eq!(window(loaded(msgs.clone(), 1), limits(), 99), None);
        assert!(window(loaded(msgs, 0), limits(), 99).is_some());
        assert_eq!(window(loaded(vec![], 0), limits(), 99), None);
    }

    #[test]
    fn a_scheduled_run_has_a_context_with_nothing_new_and_even_with_no_history() {
        let msgs = vec![user(1, 0, 7), msg(2, 5, Role::Bot, 0, "hi")];
        let mut l = loaded(msgs, 2);
        l.scheduled = true;
        let w = window(l, limits(), 99).expect("a scheduled run always has a turn");
        assert_eq!(w.messages.len(), 2);
        let mut empty = loaded(vec![], 0);
        empty.scheduled = true;
        assert!(window(empty, limits(), 99).is_some_and(|w| w.messages.is_empty()));
    }

    #[test]
    fn a_plain_window_shows_everything_and_cuts_nothing() {
        let w = window(loaded(vec![user(1, 0, 7), msg(2, 5, Role::Bot, 0, "hi"), user(3, 9, 8)], 1), limits(), 99).unwrap();
        assert_eq!(w.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
        assert_eq!((w.newest_seq, w.session_start, w.last_cut, w.cut_seq), (3, 0, None, None));
        assert_eq!(w.people, vec![7, 8]);
        assert!(!w.new_session, "a turn answered in this session");
        assert_eq!(w.session_started_at, None, "the stored start stands");
    }

    #[test]
    fn without_a_bot_turn_the_session_is_new_and_its_start_is_recorded() {
        let mut l = loaded(vec![user(1, 0, 7)], 0);
        l.stored_started_at = None;
        let w = window(l, limits(), 1234).unwrap();
        assert!(w.new_session);
        assert_eq!(w.session_started_at, Some(1234));
    }

    #[test]
    fn an_idle_gap_moves_the_session_start_and_hides_the_old_session() {
        let msgs = vec![user(1, 0, 7), msg(2, 5, Role::Bot, 0, "hi"), user(3, 2 * DAY, 8)];
        let w = window(loaded(msgs, 2), limits(), 99).unwrap();
        assert_eq!(w.session_start, 3);
        assert_eq!(w.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![3]);
        assert!(w.new_session);
        assert_eq!(w.session_started_at, Some(99));
        assert_eq!(w.last_cut, None, "the old session is not a cut: it is over");
        assert_eq!(w.people, vec![8]);
    }

    /// An answer kept apart (migration 0041): `seq` is the message it came after, the turn's
    /// `upto` where it is shown.
    fn answer(after: i64, upto: Option<i64>, text: &str) -> HistoryMessage {
        HistoryMessage { turn_id: Some(format!("turn-{after}-{text}")), answered_upto: upto, ..msg(after, after, Role::Bot, 0, text) }
    }

    #[test]
    fn answers_kept_apart_sit_after_what_they_answered_and_do_not_count_as_loaded_rows() {
        // Messages 1..=7, answers to 2 (sent after 3 had come) and to 5, and one of a turn that
        // answered up to 1 but is older than the loaded rows' oldest (2): with six rows loaded
        // and a limit of six, no row is over the limit, however many answers there are.
        let msgs: Vec<_> = (2..=7).map(|s| user(s, s, 7)).collect();
        let mut l = loaded(msgs, 5);
        l.answers = vec![answer(1, Some(1), "old"), answer(3, Some(2), "to two"), answer(5, Some(5), "to five"), answer(5, None, "no turn row")];
        let w = window(l, Limits { row_limit: 6, ..limits() }, 99).unwrap();
        let shown: Vec<String> = w.messages.iter().map(|m| format!("{}{}", m.seq, if m.role == Role::Bot { m.compact_text() } else { String::new() })).collect();
        assert_eq!(
            shown,
            ["2", "3to two", "3", "4", "5", "5no turn row", "5to five", "6", "7"].map(String::from).to_vec(),
            "each after what its turn saw (by its place without its turn's row); the older turn's answer not shown"
        );
        assert_eq!((w.newest_seq, w.last_cut, w.cut_seq), (7, None, None), "the newest is a message; nothing is cut");
        assert!(!w.new_session, "an answer kept apart is a turn's answer");
    }

    #[test]
    fn the_row_over_the_limit_cuts_anew_to_two_thirds_of_the_rows() {
        let msgs: Vec<_> = (1..=7).map(|s| user(s, s, 7)).collect();
        let w = window(loaded(msgs, 0), Limits { row_limit: 6, ..limits() }, 99).unwrap();
        assert_eq!(w.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
        assert_eq!(w.last_cut, Some(3));
        assert_eq!(w.cut_seq, Some(4));
    }

    #[test]
    fn the_budget_cuts_the_oldest_to_two_thirds_and_the_cut_point_is_the_first_shown() {
        let long = "word ".repeat(400);
        let msgs = vec![msg(1, 0, Role::User, 7, &long), msg(2, 1, Role::User, 8, &long), user(3, 2, 9), user(4, 3, 6)];
        // A budget that holds the newest three (but not two thirds of it).
        let budget = (1..100_000).find(|&b| history::fit_budget(&msgs, b, true) == 1).unwrap();
        let w = window(loaded(msgs, 0), Limits { token_budget: budget, ..limits() }, 99).unwrap();
        assert_eq!(w.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!((w.last_cut, w.cut_seq), (Some(2), Some(3)));
        assert_eq!(w.people, vec![6, 9], "only the people shown");
    }

    /// A conversation grows by a message per turn: each turn stores its cut and the next loads
    /// it. The start moves rarely (so consecutive requests share their history prefix), every
    /// window fits the budget and the row limit, and the newest message is always shown.
    #[test]
    fn the_cut_stays_put_for_many_turns() {
        let lim = Limits { row_limit: 60, session_idle_secs: DAY, token_budget: 400, structured: false };
        let mut all: Vec<HistoryMessage> = Vec::new();
        let mut stored_cut = None;
        let (mut moves, mut starts) = (0, Vec::new());
        for seq in 1..=600 {
            let words = 1 + (seq as usize * 7) % 13;
            all.push(msg(seq, seq, Role::User, 1 + seq % 5, &"word ".repeat(words)));
            let from = all.len().saturating_sub(lim.row_limit + 1);
            let mut l = loaded(all[from..].to_vec(), seq - 1);
            l.stored_cut = stored_cut;
            let w = window(l, lim, 0).unwrap();
            assert_eq!(w.messages.last().map(|m| m.seq), Some(seq));
            assert!(w.messages.len() <= lim.row_limit);
            let cost: usize = w.messages.iter().map(|m| history::message_cost(m, false)).sum();
            assert!(cost <= lim.token_budget, "turn {seq}: {cost} tokens");
            let start = w.messages[0].seq;
            if starts.last().is_some_and(|&s| s != start) {
                moves += 1;
            }
            starts.push(start);
            stored_cut = w.cut_seq;
            if let (Some(cut), Some(last)) = (w.last_cut, w.cut_seq) {
                assert!(cut < last, "the newest cut message is before the first shown");
            }
        }
        // Without stable cuts the start would move on nearly every one of the ~550 turns after
        // the first cut.
        assert!(moves <= 600 / 10, "the start moved {moves} times");
        assert!(moves >= 5, "the window did move as the conversation grew ({moves})");
    }

    #[test]
    fn without_a_stored_cut_the_window_starts_right_after_the_summary_when_that_fits() {
        let lim = Limits { row_limit: 100, session_idle_secs: DAY, token_budget: 1000, structured: true };
        // Ids of one length: every message costs the same (each digit is a token).
        let each = history::message_cost(&user(11, 11, 7), true);
        let msgs: Vec<_> = (11..=30).map(|s| user(s, s, 7)).collect();
        assert!(msgs.iter().all(|m| history::message_cost(m, true) == each));
        // Over the budget by a few messages; the summary covers the first five.
        let tight = Limits { token_budget: 17 * each, ..lim };
        let mut l = loaded(msgs.clone(), 0);
        l.summary_until = Some(15);
        let w = window(l, tight, 0).unwrap();
        assert_eq!((w.cut_seq, w.last_cut), (Some(16), Some(15)), "the summary covers exactly what is cut");
        assert_eq!(summary_for(w.last_cut, Some("s"), Some(15)), (Some("s"), false));
        // A summary that leaves too much to show is not a start: cut anew to two thirds.
        let mut l = loaded(msgs, 0);
        l.summary_until = Some(11);
        let w = window(l, tight, 0).unwrap();
        assert_eq!(w.messages.len(), 17 * 2 / 3);
    }

    #[test]
    fn later_attempts_load_fewer_rows() {
        let rows: Vec<usize> = (1..=7).map(|a| rows_for_attempt(400, a)).collect();
        assert_eq!(rows, vec![400, 400, 200, 100, 50, 50, 50]);
        assert_eq!(rows_for_attempt(20, 9), 20, "never more than the base");
        assert_eq!(rows_for_attempt(400, u32::MAX), 50);
    }

    #[test]
    fn a_stored_cut_is_dropped_when_it_is_not_loaded_or_no_longer_fits() {
        let lim = Limits { row_limit: 10, session_idle_secs: DAY, token_budget: 1000, structured: true };
        let msgs: Vec<_> = (1..=5).map(|s| user(s, s, 7)).collect();
        // Kept: loaded, fits.
        let mut l = loaded(msgs.clone(), 0);
        l.stored_cut = Some(3);
        assert_eq!(window(l, lim, 0).unwrap().cut_seq, Some(3));
        // A cut at the first loaded row would hide nothing known: everything fits, no cut.
        let mut l = loaded(msgs.clone(), 0);
        l.stored_cut = Some(1);
        let w = window(l, lim, 0).unwrap();
        assert_eq!((w.cut_seq, w.last_cut), (None, None));
        // Unknown seq (excluded, or another session): no cut when everything fits.
        let mut l = loaded(msgs.clone(), 0);
        l.stored_cut = Some(42);
        assert_eq!(window(l, lim, 0).unwrap().cut_seq, None);
        // No longer fits: cut anew.
        let mut l = loaded(msgs, 0);
        l.stored_cut = Some(2);
        let tight = Limits { token_budget: 3 * history::message_cost(&user(1, 1, 7), true), ..lim };
        let w = window(l, tight, 0).unwrap();
        assert_eq!(w.messages.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![4, 5]);
    }

    #[test]
    fn the_summary_is_shown_only_for_a_cut_and_an_uncovered_cut_is_said() {
        assert_eq!(summary_for(None, Some("s"), Some(10)), (None, false));
        assert_eq!(summary_for(Some(10), Some("s"), Some(10)), (Some("s"), false));
        assert_eq!(summary_for(Some(11), Some("s"), Some(10)), (Some("s"), true));
        assert_eq!(summary_for(Some(3), None, None), (None, true));
    }

    #[test]
    fn operator_notes_are_instructions_and_agent_notes_are_learned() {
        let note = |id, about, source: &str| Note { id, about_user_id: about, content: format!("note {id}"), source: source.into(), supplied_by: about };
        let notes = vec![note(1, None, "agent"), note(2, Some(5), "operator"), note(3, Some(6), "agent")];
        let (operator, learned) = split_notes(&notes, vec!["curated".into()], vec!["memory".into()]);
        assert_eq!(operator, vec!["note 2", "curated"]);
        assert_eq!(learned, vec!["note 1", "(about user 6) note 3", "memory"]);
    }
}
