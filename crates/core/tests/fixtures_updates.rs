//! Every real Telegram update in tests/fixtures/telegram parses and normalises without loss:
//! no panics, no errors, every message has at least one part, and the kinds that matter come
//! out as the bot expects.

use agent_core::conversation::{ChatKind, ConvKey, Inbound, Part};
use agent_core::telegram::normalize::normalize;
use agent_core::telegram::{parse_update, UpdateKind};
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/telegram")
}

fn load(prefix: &str) -> Inbound {
    let path = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with(prefix))
        .unwrap_or_else(|| panic!("no fixture {prefix}"));
    let update = parse_update(&std::fs::read(&path).unwrap()).unwrap();
    normalize(&update)
}

fn message(prefix: &str) -> agent_core::conversation::InboundMessage {
    match load(prefix) {
        Inbound::Message(m) | Inbound::Edited(m) => m,
        other => panic!("{prefix}: expected a message, got {other:?}"),
    }
}

#[test]
fn all_fixtures_parse_and_keep_content() {
    let mut count = 0;
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        count += 1;
        let update = parse_update(&std::fs::read(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Inbound::Message(m) | Inbound::Edited(m) = normalize(&update) {
            assert!(!m.parts.is_empty(), "{}", path.display());
            assert!(!m.speaker.name.is_empty(), "{}", path.display());
        }
    }
    assert_eq!(count, 78);
}

#[test]
fn unknown_and_ignored_kinds() {
    assert_eq!(load("070"), Inbound::Ignored { kind: "new_update_kind".into(), chat_id: None });
    assert!(matches!(load("034"), Inbound::Ignored { ref kind, chat_id: Some(_) } if kind == "channel_post"));
    assert!(matches!(load("055"), Inbound::Ignored { ref kind, .. } if kind == "callback_query"));
    assert!(matches!(load("067"), Inbound::Ignored { ref kind, .. } if kind == "business_message"));
    let raw = std::fs::read(dir().join("070_unknown_update_kind.json")).unwrap();
    assert!(matches!(parse_update(&raw).unwrap().kind, UpdateKind::Other(_)));
}

#[test]
fn a_business_connection_is_typed_and_missing_rights_are_none() {
    let raw = std::fs::read(dir().join("066_business_connection.json")).unwrap();
    let UpdateKind::BusinessConnection(c) = parse_update(&raw).unwrap().kind else { panic!("not a business connection") };
    assert_eq!((c.user.id, c.user_chat_id, c.is_enabled), (5123456789, 5123456789, true));
    assert!(c.rights().can_reply && c.rights().can_read_messages);
    let bare = br#"{"update_id":1,"business_connection":{"id":"x","user":{"id":7,"first_name":"A"},"user_chat_id":7,"date":1,"is_enabled":true}}"#;
    let UpdateKind::BusinessConnection(c) = parse_update(bare).unwrap().kind else { panic!("not a business connection") };
    assert!(!c.rights().can_reply && !c.rights().can_read_messages, "no rights field: no rights");
    let null = br#"{"update_id":1,"business_connection":{"id":"x","user":{"id":7,"first_name":"A"},"user_chat_id":7,"date":1,"rights":null}}"#;
    let UpdateKind::BusinessConnection(c) = parse_update(null).unwrap().kind else { panic!("not a business connection") };
    assert!(!c.is_enabled && !c.rights().can_reply);
    let no_user = br#"{"update_id":1,"business_connection":{"id":"x","user_chat_id":7,"date":1}}"#;
    assert!(parse_update(no_user).is_err(), "a connection without its owner is malformed");
    assert!(matches!(load("066"), Inbound::Ignored { ref kind, .. } if kind == "business_connection"));
}

#[test]
fn malformed_bodies_are_errors_not_panics() {
    assert!(parse_update(b"{not json").is_err());
    assert!(parse_update(b"[]").is_err());
    assert!(parse_update(b"{\"message\":{}}").is_err());
    let e = parse_update(b"{\"update_id\":5,\"message\":{\"text\":\"no chat\"}}").unwrap_err();
    assert_eq!(e.update_id(), Some(5));
}

#[test]
fn group_command_with_mention_keeps_entities() {
    let m = message("005");
    assert_eq!(m.chat.kind, ChatKind::Group);
    let kinds: Vec<_> = m.entities().map(|e| (e.kind.as_str(), e.text.as_str())).collect();
    assert_eq!(kinds, vec![("bot_command", "/my_id"), ("mention", "@nvt_ssh_bot")]);
}

#[test]
fn media_parts_keep_file_ids_and_details() {
    let sticker = message("016");
    let Part::Media { kind, detail, file_unique_id, thumb_file_id, .. } = &sticker.parts[0] else { panic!() };
    assert_eq!(kind, "sticker");
    assert!(detail.contains("😡") && detail.contains("AdvenTimeAnim") && detail.contains("animated"));
    assert!(file_unique_id.is_some());
    // An animated sticker cannot be viewed; its thumbnail can.
    assert_eq!(thumb_file_id.as_deref(), Some("AAMCAgADGQEAARIt0GMwiZ6n4nRbxdpM3pL8vPX6PVAhAAIjAAOw0PgMaabKAcaXKCABAAdtAAMpBA"));

    let photo = message("015");
    assert!(matches!(&photo.parts[0], Part::Media { kind, .. } if kind == "photo"));
    assert!(matches!(&photo.parts[1], Part::Text { entities, .. } if entities.iter().any(|e| e.kind == "url")));

    let poll = message("029");
    assert!(poll.render_compact().contains("[quiz: \"My test poll\" options: No option / Yes option]"));
    assert!(message("031").render_compact().starts_with("[dice: 🎲"));
    assert!(message("027").render_compact().contains("[venue: Title, Address"));
    assert!(message("023").render_compact().contains("[document:"));
    assert!(message("019").render_compact().starts_with("[voice"));
    assert!(message("051").media_group_id.is_some());
    assert!(message("028").render_compact().starts_with("[contact:"));
    assert!(message("008").render_compact().contains("[story: from TON Spin]"));
}

#[test]
fn forum_topics_get_their_own_conversation() {
    let m = message("038");
    assert_eq!(m.conv, ConvKey { chat_id: -1001854699958, thread_id: Some(30) });
    // Replying to the topic root is not a reply.
    assert!(m.reply_to.is_none());
    let created = message("037");
    assert!(created.is_event);
    assert!(matches!(&created.parts[0], Part::Event { kind, .. } if kind == "forum_topic_created"));
}

#[test]
fn replies_forwards_and_service_messages() {
    let r = message("010");
    let reply = r.reply_to.expect("reply");
    assert!(!reply.excerpt.is_empty());
    assert_eq!(message("011").forwarded_from.as_deref(), Some("Thomas Weimann"));
    let anon = message("013");
    assert_eq!(anon.speaker.name, "a (TITLE2)");
    assert!(anon.forwarded_from.is_some());
    assert!(message("041").is_event);
    assert!(message("045").render_compact().contains("[event pinned: Faster than a bullet]"));
    // Someone else's message pinned: its text is not quoted (it may be one the policy refused).
    let path = std::fs::read_dir(dir()).unwrap().map(|e| e.unwrap().path()).find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("045")).unwrap();
    let mut other: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    other["message"]["pinned_message"]["from"]["id"] = serde_json::json!(999);
    let Inbound::Message(m) = normalize(&parse_update(other.to_string().as_bytes()).unwrap()) else { panic!("a message") };
    let compact = m.render_compact();
    assert!(compact.contains("[event pinned") && !compact.contains("Faster than a bullet"), "{compact}");
    assert!(message("047").render_compact().contains("migrated"));
    let edited = message("033");
    assert!(edited.edit_date.is_some());
}

#[test]
fn empty_messages_become_a_placeholder() {
    let m = message("078");
    assert_eq!(m.parts, vec![Part::Unknown { kind: "empty".into() }]);
}

#[test]
fn reactions_normalise() {
    let Inbound::Reaction(r) = load("052") else { panic!() };
    assert_eq!(r.message_id, 35);
    assert_eq!(r.emoji, vec!["🌭".to_string()]);
    assert_eq!(r.speaker.user_id, Some(1459074222));
    let Inbound::Reaction(anon) = load("053") else { panic!() };
    assert!(anon.speaker.user_id.is_none());
}
