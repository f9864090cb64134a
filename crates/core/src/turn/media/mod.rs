//! Media a turn looks at: which photos, voice notes, documents, stickers and videos of the
//! messages a turn answers are given to Gemini as bytes (`inlineData`), with which MIME type,
//! within which limits, and what the model is told instead when one is not viewed.
//!
//! Invariants (INVARIANTS.md): "Media bytes go only into the turn that answers them" (older
//! history never re-sends bytes), "An album is one unit" (one person's messages sharing a
//! `media_group_id`: [`join_albums`]), "Media are described once" (what can never be viewed,
//! by its type or stated size, or whose file is gone is [`Unviewable`]: kept with its status
//! and reason).
//!
//! Also:
//! - At most [`MAX_ITEMS_PER_TURN`] items and `MediaLimits::bytes_per_turn` bytes a turn; no
//!   file over Telegram's download cap is fetched.
//! - Only MIME types Gemini reads inline are sent; anything else is named, never sent.
//!
//! Split by job: [`inline`] (what is sent as bytes, within which limits), [`unviewable`](mod@unviewable),
//! [`describe`] (descriptions and transcripts), [`stickers`].

pub mod describe;
pub mod inline;
pub mod stickers;
pub mod unviewable;

pub use describe::*;
pub use inline::*;
pub use stickers::*;
pub use unviewable::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{HistoryMessage, Role};
    use serde_json::json;
    use crate::conversation::Part as M;

    fn media(kind: &str, detail: &str, file: &str, mime: Option<&str>) -> M {
        M::Media { kind: kind.into(), detail: detail.into(), file_id: Some(file.into()), file_unique_id: None, mime_type: mime.map(String::from), thumb_file_id: None, size: None }
    }

    fn msg(seq: i64, role: Role, parts: Vec<M>, reply_to: Option<i64>) -> HistoryMessage {
        HistoryMessage {
            seq,
            message_id: Some(100 + seq),
            role,
            user_id: Some(7),
            name: "A".into(),
            username: None,
            reply_to,
            reply_info: None,
            forwarded_from: None,
            parts,
            date: 0,
            edited: false,
            turn_id: None,
            answered_upto: None,
            media_group_id: None,
            album_ids: Vec::new(),
        }
    }

    #[test]
    fn kinds_map_to_what_gemini_reads() {
        let inline = |m: &str| Treatment::Inline { mime: m.into() };
        assert_eq!(treatment("photo", None, "1280x960"), inline("image/jpeg"));
        assert_eq!(treatment("voice", Some("audio/ogg"), "3s"), inline("audio/ogg"));
        assert_eq!(treatment("audio", Some("audio/mpeg"), ""), inline("audio/mp3"));
        assert_eq!(treatment("audio", Some("audio/x-m4a"), ""), inline("audio/aac"));
        assert_eq!(treatment("video_note", None, ""), inline("video/mp4"));
        assert_eq!(treatment("gif", Some("video/mp4"), ""), inline("video/mp4"));
        assert_eq!(treatment("sticker", Some("image/webp"), "😀, set x"), inline("image/webp"));
        assert_eq!(treatment("sticker", None, "😀, set x, video, id u1"), inline("video/webm"));
        assert!(matches!(treatment("sticker", None, "😀, animated"), Treatment::NotViewed { .. }));
        assert_eq!(treatment("document", Some("application/PDF"), ""), inline("application/pdf"));
        assert_eq!(treatment("document", Some("image/png"), ""), inline("image/png"));
        assert!(matches!(treatment("document", Some("application/zip"), ""), Treatment::NotViewed { reason } if reason.contains("application/zip")));
        assert!(matches!(treatment("audio", Some("audio/x-ms-wma"), ""), Treatment::NotViewed { .. }));
        assert!(matches!(treatment("document", None, ""), Treatment::NotViewed { .. }));
    }

    #[test]
    fn only_the_media_the_turn_answers_and_the_message_it_replies_to() {
        let msgs = vec![
            msg(1, Role::User, vec![media("photo", "800x600", "old", None)], None),
            msg(2, Role::User, vec![media("photo", "800x600", "older-unrelated", None)], None),
            msg(3, Role::Bot, vec![M::text("nice")], None),
            msg(4, Role::User, vec![M::text("and this one?"), media("voice", "2s", "v", None)], Some(101)),
        ];
        let w = wanted(&msgs, 3);
        assert_eq!(w.iter().map(|w| w.file_id.as_str()).collect::<Vec<_>>(), vec!["old", "v"]);
        assert_eq!(w[0].label, "photo 800x600");
        assert_eq!(wanted(&msgs, 4), vec![], "nothing new: nothing fetched");
        // The bot's own media are never fetched, not even when replied to.
        let bot = vec![msg(1, Role::Bot, vec![media("sticker", "", "s", None)], None), msg(2, Role::User, vec![M::text("ha")], Some(101))];
        assert_eq!(wanted(&bot, 0), vec![]);
    }

    #[test]
    fn an_album_keeps_telegram_order_and_the_count_is_capped() {
        let msgs: Vec<_> = (1..=12).map(|s| msg(s, Role::User, vec![media("photo", "", &format!("p{s}"), None)], None)).collect();
        let w = wanted(&msgs, 0);
        assert_eq!(w.len(), MAX_ITEMS_PER_TURN);
        assert_eq!(w[0].file_id, "p1");
        assert_eq!(w[9].file_id, "p10");
    }

    #[test]
    fn sizes_over_telegrams_cap_or_the_turns_limit_are_not_viewed_with_the_reason() {
        let limits = MediaLimits { bytes_per_turn: 10 << 20 };
        assert_eq!(admit("photo", 300 << 10, 0, &limits), Ok(()));
        assert_eq!(admit("video", 48 << 20, 0, &limits), Err("video, 48.0 MB, too large to view".into()));
        assert_eq!(admit("video", 6 << 20, 5 << 20, &limits), Err("video, 6.0 MB, over this turn's media limit".into()));
        assert_eq!(admit("voice", 5 << 20, 5 << 20, &limits), Ok(()));
    }

    #[test]
    fn a_viewed_item_is_a_label_then_inline_data_and_the_rest_say_why() {
        let w = Wanted { seq: 1, message_id: Some(35), kind: "photo".into(), label: "photo 2x2".into(), file_id: "f".into(), unique_id: None, thumb: None, size: None, mime_type: None, treatment: Treatment::Inline { mime: "image/jpeg".into() } };
        let p = parts(&w, &Seen::Inline { mime: "image/jpeg".into(), base64: "AAEC".into() });
        assert_eq!(p[0].text.as_deref(), Some("[#35 photo 2x2, attached]"));
        assert_eq!(serde_json::to_value(&p[1]).unwrap(), json!({"inlineData": {"mimeType": "image/jpeg", "data": "AAEC"}}));
        let p = parts(&w, &Seen::Thumbnail { mime: "image/jpeg".into(), base64: "AAEC".into(), reason: "video, 48.0 MB, too large to view".into() });
        assert_eq!(p[0].text.as_deref(), Some("[#35 photo 2x2: not viewed: video, 48.0 MB, too large to view; its thumbnail is attached]"));
        assert!(p[1].extra.contains_key("inlineData"));
        assert_eq!(thumbnail_mime("sticker"), "image/webp");
        assert_eq!(thumbnail_mime("video"), "image/jpeg");
        let p = parts(&w, &Seen::NotViewed { reason: "could not be fetched".into() });
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].text.as_deref(), Some("[#35 photo 2x2: not viewed: could not be fetched]"));
    }

    #[test]
    fn without_bytes_names_what_was_to_be_sent_and_keeps_the_other_reasons() {
        let w = |seq, kind: &str| Wanted { seq, message_id: Some(seq), kind: kind.into(), label: kind.into(), file_id: "f".into(), unique_id: None, thumb: None, size: None, mime_type: None, treatment: Treatment::Inline { mime: "image/jpeg".into() } };
        let items = vec![
            (w(1, "photo"), Seen::Inline { mime: "image/jpeg".into(), base64: "AAAA".into() }),
            (w(1, "sticker"), Seen::NotViewed { reason: "an animated sticker, which I cannot view".into() }),
        ];
        assert!(any_inline(&items));
        let plain = without_bytes(&items, "the model could not read it");
        assert!(!any_inline(&plain));
        let parts = by_message(&plain);
        let texts: Vec<_> = parts[&1].iter().map(|p| p.text.clone().unwrap_or_default()).collect();
        assert_eq!(texts, vec!["[#1 photo: not viewed: the model could not read it]", "[#1 sticker: not viewed: an animated sticker, which I cannot view]"]);
        assert_eq!(by_message(&items)[&1].len(), 3, "label and bytes, then the sticker's reason");
    }

    #[test]
    fn known_descriptions_and_transcripts_show_in_history_and_the_rest_stay_placeholders() {
        let part = |u: &str, detail: &str| M::Media { kind: "photo".into(), detail: detail.into(), file_id: Some("f".into()), file_unique_id: Some(u.into()), mime_type: None, thumb_file_id: None, size: None };
        let mut msgs = vec![msg(1, Role::User, vec![part("a", "720x1280"), part("b", ""), part("c", "3s"), part("d", "")], None)];
        let known = vec![
            Described { file_unique_id: "a".into(), status: "ok".into(), description: Some("a tabby cat".into()), transcript: None },
            Described { file_unique_id: "b".into(), status: "failed".into(), description: Some("stale".into()), transcript: None },
            Described { file_unique_id: "c".into(), status: "ok".into(), description: Some("a voice note".into()), transcript: Some(" see you at 6 ".into()) },
        ];
        assert_eq!(unique_ids(&msgs), vec!["a", "b", "c", "d"]);
        annotate(&mut msgs, &known);
        let text = msgs[0].compact_text();
        assert!(text.contains("[photo: 720x1280 — a tabby cat]"), "{text}");
        assert!(text.contains("[photo]"), "a failed one stays a placeholder: {text}");
        assert!(text.contains("[photo: 3s — a voice note; said: \"see you at 6\"]"), "{text}");
    }

    #[test]
    fn each_unknown_viewed_key_is_described_once_within_the_budget() {
        let item = |u: Option<&str>, inline: bool| {
            let w = Wanted { seq: 1, message_id: Some(1), kind: "sticker".into(), label: "sticker".into(), file_id: "f".into(), unique_id: u.map(String::from), thumb: None, size: None, mime_type: None, treatment: Treatment::Inline { mime: "image/webp".into() } };
            let seen = if inline { Seen::Inline { mime: "image/webp".into(), base64: "AAAA".into() } } else { Seen::NotViewed { reason: "x".into() } };
            (w, seen)
        };
        let items = vec![item(Some("s1"), true), item(Some("s1"), true), item(Some("known"), true), item(Some("s2"), false), item(None, true), item(Some("s3"), true), item(Some("s4"), true)];
        let known = vec![Described { file_unique_id: "known".into(), status: "ok".into(), description: None, transcript: None }];
        assert_eq!(to_describe(&items, &known, 4), vec![0, 5, 6]);
        assert_eq!(to_describe(&items, &known, 1), vec![0]);
        assert_eq!(to_describe(&items, &known, 0), Vec::<usize>::new());
    }

    #[test]
    fn descriptions_are_trimmed_capped_and_required() {
        assert_eq!(parse_description(&json!({"description": " a cat ", "transcript": ""})), Some(("a cat".into(), None)));
        assert_eq!(parse_description(&json!({"description": "x", "transcript": " hi "})), Some(("x".into(), Some("hi".into()))));
        assert_eq!(parse_description(&json!({"description": "  "})), None);
        assert_eq!(parse_description(&json!({"transcript": "hi"})), None);
        let long = parse_description(&json!({"description": "é".repeat(5000)})).unwrap();
        assert_eq!(long.0.chars().count(), 600);
    }

    #[test]
    fn undescribed_window_media_are_filled_in_newest_first_within_the_budget() {
        let part = |u: &str, kind: &str| M::Media { kind: kind.into(), detail: String::new(), file_id: Some(format!("f-{u}")), file_unique_id: Some(u.into()), mime_type: None, thumb_file_id: None, size: None };
        let msgs = vec![
            msg(1, Role::User, vec![part("old", "photo")], None),
            msg(2, Role::User, vec![part("known", "photo"), part("anim", "location")], None),
            msg(3, Role::Bot, vec![part("bots", "sticker")], None),
            msg(4, Role::User, vec![part("new", "photo"), part("new", "photo")], None),
            msg(5, Role::User, vec![part("current", "photo")], None),
        ];
        let known = vec![Described { file_unique_id: "known".into(), status: "ok".into(), description: None, transcript: None }];
        let current = wanted(&msgs, 4);
        let keys = |w: Vec<Wanted>| w.into_iter().filter_map(|w| w.unique_id).collect::<Vec<_>>();
        assert_eq!(keys(undescribed(&msgs, &known, &current, 4)), vec!["new", "old"]);
        assert_eq!(keys(undescribed(&msgs, &known, &current, 1)), vec!["new"]);
        assert_eq!(keys(undescribed(&msgs, &known, &current, 0)), Vec::<String>::new());
    }

    #[test]
    fn what_can_never_be_viewed_is_recorded_once_with_its_status_and_reason() {
        let file = |u: &str, kind: &str, detail: &str, mime: Option<&str>, size: Option<u64>, thumb: Option<&str>| M::Media {
            kind: kind.into(),
            detail: detail.into(),
            file_id: Some(format!("f-{u}")),
            file_unique_id: Some(u.into()),
            mime_type: mime.map(String::from),
            thumb_file_id: thumb.map(String::from),
            size,
        };
        let msgs = vec![
            msg(1, Role::User, vec![file("zip", "document", "a.zip", Some("application/zip"), Some(100), None), file("zip", "document", "", Some("application/zip"), Some(100), None)], None),
            msg(2, Role::User, vec![file("big", "video", "60s", Some("video/mp4"), Some(48 << 20), Some("t"))], None),
            msg(3, Role::User, vec![file("long", "voice", "30s", None, Some(9000), None), file("ok", "photo", "", None, Some(500), None)], None),
            msg(4, Role::User, vec![file("anim", "sticker", "😀, animated", None, None, Some("t")), file("anim-bare", "sticker", "😀, animated", None, None, None)], None),
            msg(5, Role::Bot, vec![file("bots", "document", "", Some("application/zip"), None, None)], None),
            msg(6, Role::User, vec![file("known", "document", "", Some("application/zip"), None, None)], None),
        ];
        let known = vec![Described { file_unique_id: "known".into(), status: "unsupported".into(), description: None, transcript: None }];
        let limits = MediaLimits { bytes_per_turn: 6000 };
        let found = unviewable(&msgs, &known, &limits);
        let brief: Vec<_> = found.iter().map(|u| (u.unique_id.as_str(), u.status, u.reason.as_str(), u.size)).collect();
        assert_eq!(
            brief,
            vec![
                ("zip", "unsupported", "a document of a type I cannot read (application/zip)", Some(100)),
                ("big", "too_large", "video, 48.0 MB, too large to view", Some(48 << 20)),
                ("long", "too_large", "voice, 8 KB, over this turn's media limit", Some(9000)),
                ("anim-bare", "unsupported", "an animated sticker, which I cannot view", None),
            ]
        );
        assert_eq!(found[0].mime.as_deref(), Some("application/zip"));
        assert_eq!(found[1].mime.as_deref(), Some("video/mp4"));
        assert!(telegram_too_big("Bad Request: file is too big"));
    }

    #[test]
    fn a_sticker_keeps_its_set_and_emoji_and_what_a_failed_fetch_says_for_good() {
        let part = |kind: &str, detail: &str| M::Media { kind: kind.into(), detail: detail.into(), file_id: Some("f".into()), file_unique_id: Some("u".into()), mime_type: None, thumb_file_id: None, size: None };
        let of = |kind: &str, detail: &str| Wanted::of(&msg(1, Role::User, vec![], None), &part(kind, detail)).unwrap();
        assert_eq!(sticker_of(&of("sticker", "😂, set Fun, id u")), (Some("Fun".into()), Some("😂".into())));
        assert_eq!(sticker_of(&of("sticker", "set Fun, animated")), (Some("Fun".into()), None));
        assert_eq!(sticker_of(&of("sticker", "")), (None, None));
        assert_eq!(sticker_of(&of("photo", "😂, set Fun")), (None, None));
        let refused = fetch_refused(&of("video", "90s"), "could not be fetched (Bad Request: file is too big)").unwrap();
        assert_eq!((refused.status, refused.reason.as_str()), ("too_large", "video, over Telegram's 20 MB download limit"));
        let gone = fetch_refused(&of("photo", ""), "could not be fetched (bad request: Bad Request: invalid file_id)").unwrap();
        assert_eq!((gone.status, gone.reason.as_str()), ("failed", "could not be fetched (bad request: Bad Request: invalid file_id)"));
        assert_eq!(fetch_refused(&of("photo", ""), "could not be downloaded (the download answered 404)").unwrap().status, "failed");
        assert_eq!(fetch_refused(&of("photo", ""), "could not be fetched (rate limited; retry after 3s)"), None);
        assert_eq!(fetch_refused(&of("photo", ""), "not fetched: this turn's request budget is spent"), None);
        assert_eq!(fetch_refused(&of("photo", ""), "photo, 6.0 MB, over this turn's media limit"), None);
    }

    #[test]
    fn an_album_is_one_unit_a_turn_sees_whole_and_a_reply_to_any_item_finds() {
        let album = |seq: i64, g: &str, file: &str| {
            let mut m = msg(seq, Role::User, vec![media("photo", "", file, None)], None);
            m.media_group_id = Some(g.into());
            m
        };
        let mut first = album(1, "g1", "a");
        first.parts.push(M::text("our trip"));
        let mut other = album(3, "g1", "c");
        other.user_id = Some(8); // the same group id from someone else is not the same album
        let mut msgs = vec![first, album(2, "g1", "b"), other, msg(4, Role::Bot, vec![M::text("nice")], None), album(5, "g1", "d")];
        join_albums(&mut msgs);
        assert_eq!(msgs.iter().map(|m| m.seq).collect::<Vec<_>>(), vec![3, 4, 5]);
        let joined = &msgs[2];
        assert_eq!(joined.message_id, Some(101), "the first message's id");
        assert_eq!(joined.album_ids, vec![101, 102, 105]);
        assert_eq!(joined.compact_text(), "[photo] our trip [photo] [photo]");
        // A turn answering the newest item sees the whole album.
        assert_eq!(wanted(&msgs, 4).iter().map(|w| w.file_id.as_str()).collect::<Vec<_>>(), vec!["a", "b", "d"]);
        // A later reply to its second item sends the album again.
        msgs.push(msg(6, Role::User, vec![M::text("and these?")], Some(102)));
        assert_eq!(wanted(&msgs, 5).iter().map(|w| w.file_id.as_str()).collect::<Vec<_>>(), vec!["a", "b", "d"]);
        // Messages outside albums are untouched.
        let mut plain = vec![msg(1, Role::User, vec![M::text("hi")], None)];
        join_albums(&mut plain);
        assert_eq!(plain[0].album_ids, Vec::<i64>::new());
    }

    #[test]
    fn send_sticker_lists_the_known_stickers_of_its_sets_quoted_and_once_per_emoji() {
        let k = |set: &str, emoji: &str, d: &str| KnownSticker { set_name: set.into(), emoji: emoji.into(), description: d.into() };
        let sets = vec!["Fun".to_string()];
        let mut tools = crate::turn::tools::declarations(&sets);
        let long = "x".repeat(500);
        let known = vec![k("fun", "😂", "a cat laughing \"hard\""), k("Fun", "😂", "another"), k("Other", "😺", "not offered"), k("Fun", "❤\u{fe0f}", &long)];
        sticker_catalog(&mut tools, &sets, &known);
        let d = &tools[0].function_declarations.iter().find(|d| d.name == "send_sticker").unwrap().description;
        assert!(d.contains(r#"Fun 😂: "a cat laughing \"hard\"""#), "{d}");
        assert!(!d.contains("another") && !d.contains("not offered"), "{d}");
        assert!(d.contains(&format!("Fun ❤: \"{}\"", "x".repeat(120))), "{d}");
        // Nothing known: the declaration is as it was.
        let mut plain = crate::turn::tools::declarations(&sets);
        sticker_catalog(&mut plain, &sets, &[]);
        assert_eq!(plain, crate::turn::tools::declarations(&sets));
    }
}
