//! The privacy scope of long-term memory: who may see (or erase) which rows of `memories` and
//! `notes`. Every query that reads or deletes them takes its `WHERE` fragment from here, so the
//! rule is written once and tested once.
//!
//! The rule (a reader is always a conversation in some chat, or the operator):
//! - A memory or note is seen in the chat where it was learned.
//! - In a person's private chat (chat id = user id), also *facts* and agent notes about that
//!   person learned anywhere, when they are the person's own words (`supplied_by` is the
//!   person: `core::access::authority`). What someone else supplied about them stays in the chat where
//!   it was said. Nothing else crosses chats: an episode, commitment or alias of one group
//!   never shows in another chat, and nothing learned in a private chat shows in a group.
//! - Operator notes without a chat are for everyone, but one about a person only where that
//!   person is present (in a private chat, the person always is); an operator note with a chat
//!   only there.
//! - What a person may list or erase with `/memory` and `/forget` is what the chat sees, about
//!   them or about nobody, and never an operator note. `/forget all` in a private chat also
//!   erases everything about the person learned anywhere (the person's right to be forgotten
//!   does not depend on where they ask); in a group it stays within what the group sees.
//! - Consolidation reads and changes only what was learned in its own chat.
//! - The operator (admin API) sees everything, narrowed by optional filters.
//!
//! Invariants (INVARIANTS.md): "Memory privacy is one rule" (the rule above is its detail),
//! "Every SQL value is bound" (here: the SQL text depends only on the scope's variant, and for
//! `Erase` whether the chat is the person's private chat, the table alias and the first
//! placeholder number).

/// A value bound to a placeholder of a scope predicate.
#[derive(Debug, Clone, PartialEq)]
pub enum Bind {
    Null,
    Int(i64),
    Text(String),
}

impl From<Option<i64>> for Bind {
    fn from(v: Option<i64>) -> Self {
        v.map_or(Bind::Null, Bind::Int)
    }
}

/// A `WHERE` fragment (parenthesised) and the values of its placeholders, which are numbered
/// `?first`, `?first+1`, ... in the order of `binds`.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    pub sql: String,
    pub binds: Vec<Bind>,
}

/// Who reads (or erases) memories and notes.
#[derive(Debug, Clone, PartialEq)]
pub enum Scope {
    /// A conversation in `chat_id` (a turn's recall and notes, `search_memory`): `people` are
    /// the users present (for operator notes about a person).
    Chat { chat_id: i64, people: Vec<i64> },
    /// `/memory` and `/forget <id>`: what `chat_id` sees about `user_id`, and, in the person's
    /// own private chat, also what is about nobody (in a group, what is about the group is
    /// everyone's: no member lists or erases it); agent notes only.
    Own { chat_id: i64, user_id: Option<i64> },
    /// `/forget all`: like `Own`, and in the person's private chat everything about them.
    Erase { chat_id: i64, user_id: Option<i64> },
    /// Consolidation: only what was learned in `chat_id`.
    LearnedIn { chat_id: i64 },
    /// The operator: everything, narrowed to a chat and/or a person when given.
    Operator { chat_id: Option<i64>, about_user_id: Option<i64> },
}

/// The user of a private chat (Telegram private chat ids are the user's id; groups are
/// negative).
pub fn private_user(chat_id: i64) -> Option<i64> {
    (chat_id > 0).then_some(chat_id)
}

struct Builder {
    alias: String,
    next: usize,
    binds: Vec<Bind>,
}

impl Builder {
    fn new(alias: &str, first: usize) -> Self {
        let alias = if alias.is_empty() { String::new() } else { format!("{alias}.") };
        Builder { alias, next: first, binds: Vec::new() }
    }
    fn col(&self, name: &str) -> String {
        format!("{}{name}", self.alias)
    }
    fn bind(&mut self, v: Bind) -> String {
        let p = format!("?{}", self.next);
        self.next += 1;
        self.binds.push(v);
        p
    }
    fn done(self, sql: String) -> Predicate {
        Predicate { sql: format!("({sql})"), binds: self.binds }
    }
}

fn people_json(chat_id: i64, people: &[i64]) -> String {
    let mut p: Vec<i64> = people.to_vec();
    if let Some(u) = private_user(chat_id) {
        p.push(u);
    }
    crate::order::sort(&mut p);
    p.dedup();
    serde_json::to_string(&p).unwrap_or_else(|_| "[]".into())
}

/// Whether `chat_id` is `user_id`'s own private chat (what is about nobody there is theirs).
fn owns_chat(chat_id: i64, user_id: Option<i64>) -> bool {
    private_user(chat_id).is_some_and(|p| Some(p) == user_id)
}

impl Scope {
    /// The predicate over rows of `memories` (as `alias`, or bare columns when empty).
    pub fn memories(&self, alias: &str, first: usize) -> Predicate {
        let mut b = Builder::new(alias, first);
        let sql = match self {
            Scope::Chat { chat_id, .. } => chat_memories(&mut b, *chat_id),
            Scope::Own { chat_id, user_id } => {
                let seen = chat_memories(&mut b, *chat_id);
                let about = b.col("about_user_id");
                let u = b.bind((*user_id).into());
                if owns_chat(*chat_id, *user_id) {
                    format!("{seen} AND ({about} = {u} OR {about} IS NULL)")
                } else {
                    format!("{seen} AND {about} = {u}")
                }
            }
            Scope::Erase { chat_id, user_id } => {
                let own = Scope::Own { chat_id: *chat_id, user_id: *user_id }.memories(alias, b.next);
                b.next += own.binds.len();
                b.binds.extend(own.binds);
                match private_user(*chat_id).filter(|p| Some(*p) == *user_id) {
                    Some(p) => {
                        let about = b.col("about_user_id");
                        let u = b.bind(Bind::Int(p));
                        format!("{} OR {about} = {u}", own.sql)
                    }
                    None => own.sql,
                }
            }
            Scope::LearnedIn { chat_id } => {
                let chat = b.col("chat_id");
                let c = b.bind(Bind::Int(*chat_id));
                format!("{chat} = {c}")
            }
            Scope::Operator { chat_id, about_user_id } => operator(&mut b, *chat_id, *about_user_id),
        };
        b.done(sql)
    }

    /// An FTS5 filter over `memory_fts.scope` (migration 0017) that every memory row
    /// [`Scope::memories`] accepts matches: a narrowing for full-text queries, so that D1 reads
    /// the matches of this scope's chats and people rather than of every chat. It decides
    /// nothing: the predicate still does. `None` when the scope spans every chat.
    pub fn memories_fts(&self) -> Option<String> {
        self.fts_filter(false)
    }

    /// [`Scope::memories_fts`] for a search over memories and notes: it also matches every note
    /// row [`Scope::notes`] accepts (a chat also sees the operator's notes for no chat).
    pub fn search_fts(&self) -> Option<String> {
        self.fts_filter(true)
    }

    fn fts_filter(&self, notes: bool) -> Option<String> {
        let mut tokens: Vec<String> = match self {
            Scope::Chat { chat_id, .. } | Scope::Own { chat_id, .. } | Scope::Erase { chat_id, .. } => {
                // What the chat sees: learned there, or (a fact) about its private person; an
                // `Erase` in that private chat also takes everything about the person.
                std::iter::once(fts_chat_token(Some(*chat_id))).chain(private_user(*chat_id).map(fts_user_token)).collect()
            }
            Scope::LearnedIn { chat_id } => vec![fts_chat_token(Some(*chat_id))],
            Scope::Operator { chat_id: Some(c), .. } => vec![fts_chat_token(Some(*c))],
            Scope::Operator { chat_id: None, about_user_id: Some(u) } => vec![fts_user_token(*u)],
            Scope::Operator { chat_id: None, about_user_id: None } => return None,
        };
        if notes && matches!(self, Scope::Chat { .. }) {
            tokens.push(fts_chat_token(None));
        }
        let quoted: Vec<String> = tokens.iter().map(|t| format!("\"{t}\"")).collect();
        Some(format!("scope : ({})", quoted.join(" OR ")))
    }

    /// The predicate over rows of `notes` (as `alias`, or bare columns when empty).
    pub fn notes(&self, alias: &str, first: usize) -> Predicate {
        let mut b = Builder::new(alias, first);
        let sql = match self {
            Scope::Chat { chat_id, people } => {
                let seen = chat_notes(&mut b, *chat_id);
                let (chat, about, source) = (b.col("chat_id"), b.col("about_user_id"), b.col("source"));
                let p = b.bind(Bind::Text(people_json(*chat_id, people)));
                format!(
                    "{seen} OR ({source} = 'operator' AND {chat} IS NULL
                       AND ({about} IS NULL OR {about} IN (SELECT value FROM json_each({p}))))"
                )
            }
            Scope::Own { chat_id, user_id } => {
                let seen = chat_notes(&mut b, *chat_id);
                let (about, source) = (b.col("about_user_id"), b.col("source"));
                let u = b.bind((*user_id).into());
                if owns_chat(*chat_id, *user_id) {
                    format!("{source} = 'agent' AND ({seen}) AND ({about} = {u} OR {about} IS NULL)")
                } else {
                    format!("{source} = 'agent' AND ({seen}) AND {about} = {u}")
                }
            }
            Scope::Erase { chat_id, user_id } => {
                let own = Scope::Own { chat_id: *chat_id, user_id: *user_id }.notes(alias, b.next);
                b.next += own.binds.len();
                b.binds.extend(own.binds);
                match private_user(*chat_id).filter(|p| Some(*p) == *user_id) {
                    Some(p) => {
                        let (about, source) = (b.col("about_user_id"), b.col("source"));
                        let u = b.bind(Bind::Int(p));
                        format!("{} OR ({source} = 'agent' AND {about} = {u})", own.sql)
                    }
                    None => own.sql,
                }
            }
            Scope::LearnedIn { chat_id } => {
                let chat = b.col("chat_id");
                let c = b.bind(Bind::Int(*chat_id));
                format!("{chat} = {c}")
            }
            Scope::Operator { chat_id, about_user_id } => operator(&mut b, *chat_id, *about_user_id),
        };
        b.done(sql)
    }
}

/// The `memory_fts.scope` token of the chat a row was learned in, as migration 0017's triggers
/// write it: `c<id>`, `cm<id>` for a negative id (the tokenizer splits at `-`), `cnone`.
pub fn fts_chat_token(chat_id: Option<i64>) -> String {
    match chat_id {
        None => "cnone".to_string(),
        Some(c) if c < 0 => format!("cm{}", c.unsigned_abs()),
        Some(c) => format!("c{c}"),
    }
}

/// The `memory_fts.scope` token of the person a row is about: `u<id>`.
pub fn fts_user_token(user_id: i64) -> String {
    format!("u{user_id}")
}

/// Memories a conversation in `chat_id` sees: learned there, and in a private chat the facts
/// about its person in their own words.
fn chat_memories(b: &mut Builder, chat_id: i64) -> String {
    let (chat, kind, about, by) = (b.col("chat_id"), b.col("kind"), b.col("about_user_id"), b.col("supplied_by"));
    let c = b.bind(Bind::Int(chat_id));
    let u = b.bind(private_user(chat_id).into());
    format!("({chat} = {c} OR ({kind} = 'fact' AND {about} = {u} AND {by} = {u}))")
}

/// Notes learned in `chat_id`, and in a private chat agent notes about its person in their
/// own words.
fn chat_notes(b: &mut Builder, chat_id: i64) -> String {
    let (chat, about, source, by) = (b.col("chat_id"), b.col("about_user_id"), b.col("source"), b.col("supplied_by"));
    let c = b.bind(Bind::Int(chat_id));
    let u = b.bind(private_user(chat_id).into());
    format!("({chat} = {c} OR ({source} = 'agent' AND {about} = {u} AND {by} = {u}))")
}

fn operator(b: &mut Builder, chat_id: Option<i64>, about_user_id: Option<i64>) -> String {
    let (chat, about) = (b.col("chat_id"), b.col("about_user_id"));
    let c = b.bind(chat_id.into());
    let u = b.bind(about_user_id.into());
    format!("({c} IS NULL OR {chat} = {c}) AND ({u} IS NULL OR {about} = {u})")
}

#[cfg(test)]
mod tests {
    //! The generated SQL is evaluated, with a minimal three-valued evaluator of the few forms the
    //! builder emits, on every combination of kind/source × chat × subject, and compared with
    //! the rule of the module doc written as plain Rust (`sees`). The end-to-end test
    //! `tests/e2e/memory-privacy.test.js` runs the real SQL in D1 over a table of the same cases.
    use super::*;

    /// A row of `memories` or `notes`.
    #[derive(Clone, Copy)]
    struct Row {
        note: bool,
        kind: &'static str,
        source: &'static str,
        chat: Option<i64>,
        about: Option<i64>,
        /// Who supplied it (`supplied_by`).
        by: Option<i64>,
    }

    /// The rule of the module doc, written as plain Rust: the reference the SQL must match.
    fn sees(scope: &Scope, r: &Row) -> bool {
        // The person's own words: only these cross into their private chat.
        let own_words = r.about.is_some() && r.by == r.about;
        let chat_sees = |c: i64, people: &[i64]| {
            let private = private_user(c);
            if r.note {
                r.chat == Some(c)
                    || (r.source == "agent" && r.about.is_some() && r.about == private && own_words)
                    || (r.source == "operator"
                        && r.chat.is_none()
                        && r.about.is_none_or(|a| people.contains(&a) || Some(a) == private))
            } else {
                r.chat == Some(c) || (r.kind == "fact" && r.about.is_some() && r.about == private && own_words)
            }
        };
        let own = |c: i64, u: Option<i64>| {
            (!r.note || r.source == "agent") && {
                let base = if r.note {
                    r.chat == Some(c) || (r.about.is_some() && r.about == private_user(c) && own_words)
                } else {
                    chat_sees(c, &[])
                };
                // About nobody: only in the person's own private chat (a group's are everyone's).
                base && ((u.is_some() && r.about == u) || (r.about.is_none() && private_user(c).is_some() && private_user(c) == u))
            }
        };
        match scope {
            Scope::Chat { chat_id, people } => chat_sees(*chat_id, people),
            Scope::Own { chat_id, user_id } => own(*chat_id, *user_id),
            Scope::Erase { chat_id, user_id } => {
                own(*chat_id, *user_id)
                    || (private_user(*chat_id).is_some()
                        && private_user(*chat_id) == *user_id
                        && r.about == *user_id
                        && (!r.note || r.source == "agent"))
            }
            Scope::LearnedIn { chat_id } => r.chat == Some(*chat_id),
            Scope::Operator { chat_id, about_user_id } => {
                chat_id.is_none_or(|c| r.chat == Some(c)) && about_user_id.is_none_or(|u| r.about == Some(u))
            }
        }
    }

    /// Evaluates a predicate's SQL on a row with a minimal evaluator of the few forms the
    /// builder emits (=, IS NULL, IN json_each, AND, OR, parentheses, string literals).
    fn eval(p: &Predicate, first: usize, r: &Row) -> bool {
        let mut sql = p.sql.clone();
        // Substitute placeholders, highest number first (?12 before ?1).
        for (i, b) in p.binds.iter().enumerate().rev() {
            let v = match b {
                Bind::Null => "NULL".to_string(),
                Bind::Int(n) => n.to_string(),
                Bind::Text(t) => format!("'{t}'"),
            };
            sql = sql.replace(&format!("?{}", first + i), &v);
        }
        let col = |name: &str| -> String {
            match name {
                "chat_id" => r.chat.map_or("NULL".into(), |v| v.to_string()),
                "about_user_id" => r.about.map_or("NULL".into(), |v| v.to_string()),
                "kind" => format!("'{}'", r.kind),
                "source" => format!("'{}'", r.source),
                "supplied_by" => r.by.map_or("NULL".into(), |v| v.to_string()),
                other => panic!("unknown column {other}"),
            }
        };
        for c in ["chat_id", "about_user_id", "kind", "source", "supplied_by"] {
            sql = sql.replace(&format!("x.{c}"), &col(c));
        }
        let tokens = tokenize(&sql);
        let mut pos = 0;
        let v = parse_or(&tokens, &mut pos);
        assert_eq!(pos, tokens.len(), "unparsed SQL: {sql}");
        v == Some(true)
    }

    fn tokenize(s: &str) -> Vec<String> {
        let mut out = Vec::new();
        let chars: Vec<char> = s.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() {
                i += 1;
            } else if c == '(' || c == ')' || c == '=' {
                out.push(c.to_string());
                i += 1;
            } else if c == '\'' {
                let mut j = i + 1;
                while chars[j] != '\'' {
                    j += 1;
                }
                out.push(chars[i..=j].iter().collect());
                i = j + 1;
            } else {
                let mut j = i;
                while j < chars.len() && !chars[j].is_whitespace() && !"()=".contains(chars[j]) {
                    j += 1;
                }
                out.push(chars[i..j].iter().collect());
                i = j;
            }
        }
        out
    }

    // Three-valued logic: None is SQL NULL.
    fn parse_or(t: &[String], p: &mut usize) -> Option<bool> {
        let mut v = parse_and(t, p);
        while t.get(*p).map(String::as_str) == Some("OR") {
            *p += 1;
            let r = parse_and(t, p);
            v = match (v, r) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            };
        }
        v
    }
    fn parse_and(t: &[String], p: &mut usize) -> Option<bool> {
        let mut v = parse_atom(t, p);
        while t.get(*p).map(String::as_str) == Some("AND") {
            *p += 1;
            let r = parse_atom(t, p);
            v = match (v, r) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
        }
        v
    }
    fn parse_atom(t: &[String], p: &mut usize) -> Option<bool> {
        if t[*p] == "(" {
            *p += 1;
            let v = parse_or(t, p);
            assert_eq!(t[*p], ")");
            *p += 1;
            return v;
        }
        let left = t[*p].clone();
        *p += 1;
        match t[*p].as_str() {
            "=" => {
                let right = t[*p + 1].clone();
                *p += 2;
                if left == "NULL" || right == "NULL" {
                    None
                } else {
                    Some(left == right)
                }
            }
            "IS" => {
                assert_eq!(t[*p + 1], "NULL");
                *p += 2;
                Some(left == "NULL")
            }
            "IN" => {
                // IN ( SELECT value FROM json_each ( '[..]' ) )
                let list = t[*p + 7].trim_matches('\'').to_string();
                assert_eq!(t[*p + 9], ")");
                *p += 10;
                if left == "NULL" {
                    return None;
                }
                let ids: Vec<i64> = serde_json::from_str(&list).unwrap();
                Some(ids.iter().any(|i| i.to_string() == left))
            }
            other => panic!("unexpected token {other}"),
        }
    }

    const U: i64 = 501;
    const V: i64 = 502;
    const W: i64 = 503;
    const G: i64 = -100;
    const H: i64 = -200;

    fn rows() -> Vec<Row> {
        let m = |kind, chat, about, by| Row { note: false, kind, source: "", chat, about, by };
        let n = |source, chat, about, by| Row { note: true, kind: "", source, chat, about, by };
        let mut rows = Vec::new();
        // Supplied by the subject, by someone else, or unknown.
        for by in [Some(U), Some(V), None] {
            for kind in ["fact", "episode", "commitment", "alias"] {
                for chat in [Some(U), Some(V), Some(G), Some(H), None] {
                    for about in [Some(U), Some(V), Some(W), None] {
                        rows.push(m(kind, chat, about, by));
                    }
                }
            }
            for source in ["agent", "operator"] {
                for chat in [Some(U), Some(V), Some(G), Some(H), None] {
                    for about in [Some(U), Some(V), Some(W), None] {
                        rows.push(n(source, chat, about, by));
                    }
                }
            }
        }
        rows
    }

    fn scopes() -> Vec<Scope> {
        vec![
            Scope::Chat { chat_id: G, people: vec![U, V] },
            Scope::Chat { chat_id: U, people: vec![] },
            Scope::Chat { chat_id: H, people: vec![W] },
            Scope::Own { chat_id: G, user_id: Some(U) },
            Scope::Own { chat_id: U, user_id: Some(U) },
            Scope::Own { chat_id: G, user_id: None },
            Scope::Erase { chat_id: G, user_id: Some(U) },
            Scope::Erase { chat_id: U, user_id: Some(U) },
            Scope::LearnedIn { chat_id: G },
            Scope::LearnedIn { chat_id: U },
            Scope::Operator { chat_id: None, about_user_id: None },
            Scope::Operator { chat_id: Some(G), about_user_id: None },
            Scope::Operator { chat_id: None, about_user_id: Some(U) },
            Scope::Operator { chat_id: Some(G), about_user_id: Some(V) },
        ]
    }

    #[test]
    fn the_sql_matches_the_rule_on_every_case() {
        for scope in scopes() {
            for first in [1, 4] {
                for r in rows() {
                    let p = if r.note { scope.notes("x", first) } else { scope.memories("x", first) };
                    assert_eq!(eval(&p, first, &r), sees(&scope, &r), "{scope:?} on {}", describe(&r));
                }
            }
        }
    }

    /// The tokens migration 0017 writes in `memory_fts.scope` for a row.
    fn fts_tokens(r: &Row) -> Vec<String> {
        std::iter::once(fts_chat_token(r.chat)).chain(r.about.map(fts_user_token)).collect()
    }

    /// Every row (of `rows`) a scope sees is matched by its filter, and a filter leaves some
    /// row out (or there is none).
    fn assert_filter_keeps_what_is_seen(filter_of: impl Fn(&Scope) -> Option<String>, rows: impl Fn() -> Vec<Row>) {
        for scope in scopes() {
            let filter = filter_of(&scope);
            let mut narrowed = false;
            for r in rows() {
                let Some(f) = &filter else { continue };
                let hit = fts_tokens(&r).iter().any(|t| f.contains(&format!("\"{t}\"")));
                if sees(&scope, &r) {
                    assert!(hit, "{scope:?} filter {f} misses {}", describe(&r));
                }
                narrowed |= !hit;
            }
            assert_eq!(filter.is_some(), narrowed, "{scope:?}: a filter must leave rows out, or be none");
        }
    }

    #[test]
    fn the_fts_filter_keeps_every_memory_the_scope_sees_and_narrows() {
        assert_filter_keeps_what_is_seen(Scope::memories_fts, || rows().into_iter().filter(|r| !r.note).collect());
        assert_eq!(Scope::Chat { chat_id: G, people: vec![U] }.memories_fts().as_deref(), Some("scope : (\"cm100\")"));
        assert_eq!(Scope::Chat { chat_id: U, people: vec![] }.memories_fts().as_deref(), Some("scope : (\"c501\" OR \"u501\")"));
        assert_eq!(fts_chat_token(None), "cnone");
    }

    #[test]
    fn the_search_filter_keeps_every_memory_and_note_the_scope_sees_and_narrows() {
        assert_filter_keeps_what_is_seen(Scope::search_fts, rows);
        assert_eq!(Scope::Chat { chat_id: G, people: vec![U] }.search_fts().as_deref(), Some("scope : (\"cm100\" OR \"cnone\")"));
    }

    fn describe(r: &Row) -> String {
        format!("{} {} {} chat {:?} about {:?} by {:?}", if r.note { "note" } else { "memory" }, r.kind, r.source, r.chat, r.about, r.by)
    }

    #[test]
    fn the_rule_keeps_private_and_group_apart() {
        let private_fact = Row { note: false, kind: "fact", source: "", chat: Some(U), about: Some(U), by: Some(U) };
        let group_fact = Row { note: false, kind: "fact", source: "", chat: Some(G), about: Some(U), by: Some(U) };
        let group_episode = Row { note: false, kind: "episode", source: "", chat: Some(G), about: None, by: None };
        let group_commitment = Row { note: false, kind: "commitment", source: "", chat: Some(G), about: Some(U), by: Some(U) };
        let operator_note = Row { note: true, kind: "", source: "operator", chat: None, about: Some(U), by: None };
        // What V said about U in the group: seen there, never in U's private chat.
        let planted_fact = Row { by: Some(V), ..group_fact };
        let planted_note = Row { note: true, kind: "", source: "agent", chat: Some(G), about: Some(U), by: Some(V) };
        let in_group_u = Scope::Chat { chat_id: G, people: vec![U, V] };
        for planted in [planted_fact, planted_note] {
            assert!(sees(&in_group_u, &planted), "seen where it was said");
            assert!(!sees(&Scope::Chat { chat_id: U, people: vec![] }, &planted), "never in the person's private chat as their own words");
            assert!(!sees(&Scope::Own { chat_id: U, user_id: Some(U) }, &planted), "nor in their /memory there");
            assert!(sees(&Scope::Erase { chat_id: U, user_id: Some(U) }, &planted), "/forget all there still erases it");
            assert!(!sees(&Scope::Chat { chat_id: U, people: vec![] }, &Row { by: None, ..planted }), "unknown supplier: not their own either");
        }
        let in_group = Scope::Chat { chat_id: G, people: vec![U] };
        let in_private = Scope::Chat { chat_id: U, people: vec![] };
        assert!(!sees(&in_group, &private_fact), "a private fact never shows in a group");
        assert!(sees(&in_private, &group_fact), "a fact about the person shows in their private chat");
        assert!(!sees(&in_private, &group_episode) && !sees(&in_private, &group_commitment));
        assert!(!sees(&Scope::Chat { chat_id: H, people: vec![U] }, &group_fact), "nothing crosses groups");
        assert!(!sees(&Scope::Own { chat_id: U, user_id: Some(U) }, &operator_note), "/forget never erases operator notes");
        assert!(!sees(&Scope::Erase { chat_id: U, user_id: Some(U) }, &operator_note));
        assert!(sees(&Scope::Erase { chat_id: U, user_id: Some(U) }, &group_commitment), "/forget all in private erases everything about the person");
        assert!(!sees(&Scope::Erase { chat_id: G, user_id: Some(U) }, &private_fact), "/forget all in a group stays in the group");
        let group_episode = Row { chat: Some(G), about: None, ..group_commitment.clone() };
        assert!(!sees(&Scope::Erase { chat_id: G, user_id: Some(U) }, &group_episode), "a member cannot erase what is about the group");
        assert!(!sees(&Scope::Own { chat_id: G, user_id: Some(U) }, &group_episode), "nor list it as theirs");
        assert!(!sees(&Scope::LearnedIn { chat_id: G }, &private_fact), "consolidation of a group never sees private memories");
        assert!(!sees(&Scope::Chat { chat_id: G, people: vec![V] }, &operator_note), "operator notes about a person only where they are");
    }

    #[test]
    fn placeholders_are_numbered_from_first_and_all_values_bound() {
        let p = Scope::Chat { chat_id: G, people: vec![V, U, U] }.notes("n", 3);
        assert_eq!(p.binds, vec![Bind::Int(G), Bind::Null, Bind::Text(format!("[{U},{V}]"))]);
        assert!(p.sql.contains("?3") && p.sql.contains("?4") && p.sql.contains("?5") && !p.sql.contains("?6"));
        assert!(p.sql.contains("n.chat_id") && !p.sql.contains(&G.to_string()), "values are bound, never written in: {}", p.sql);
        let bare = Scope::LearnedIn { chat_id: G }.memories("", 1);
        assert_eq!(bare.sql, "(chat_id = ?1)");
        // The text depends on the variant only.
        assert_eq!(Scope::Chat { chat_id: 1, people: vec![] }.memories("m", 1).sql, Scope::Chat { chat_id: -5, people: vec![9] }.memories("m", 1).sql);
    }
}
