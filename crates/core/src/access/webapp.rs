//! Who opened the Mini App: Telegram's signed init data, checked as Telegram documents
//! ("Validating data received via the Mini App"): the data-check-string is every field but
//! `hash`, sorted by key, as `key=value` lines joined by `\n`; the secret key is
//! HMAC-SHA256 of the bot token keyed with the constant `WebAppData`; the data is Telegram's
//! when the hex HMAC-SHA256 of the data-check-string under that key equals `hash`. On top:
//! a freshness limit on `auth_date` (`MINIAPP_MAX_AGE_SECONDS`), a size cap, and each key at
//! most once. The person is the signed `user.id`, never a value of a request body.
//!
//! Also the opaque start parameter of a group's link (`group_link`): the bot issues it and
//! keeps the mapping to the group; only its form is checked here.
//!
//! Invariants (INVARIANTS.md): "The Mini App trusts only signed init data".

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The longest init data read (Telegram's is a few hundred bytes; a photo URL and a long
/// name stay well under).
pub const MAX_INIT_DATA_BYTES: usize = 4096;
/// A clock skew tolerated for an `auth_date` ahead of the server's clock.
pub const FUTURE_SKEW_SECS: i64 = 60;

/// The person who opened the page, as Telegram signed it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct WebAppUser {
    pub id: i64,
    #[serde(default)]
    pub first_name: String,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub language_code: Option<String>,
}

/// Verified init data.
#[derive(Debug, Clone, PartialEq)]
pub struct InitData {
    pub user: WebAppUser,
    pub auth_date: i64,
    /// `start_param` of a link `t.me/<bot>/<app>?startapp=…` (a group's link).
    pub start_param: Option<String>,
}

/// Why init data is refused (each answers 401; the reason goes to the log, not the page).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    #[error("no init data")]
    Missing,
    #[error("init data over {MAX_INIT_DATA_BYTES} bytes")]
    TooLong,
    #[error("init data is not a query string of unique keys")]
    Malformed,
    #[error("the hash does not match (tampered, or signed for another bot)")]
    BadHash,
    #[error("init data is older than the freshness limit")]
    Stale,
    #[error("init data is dated in the future")]
    Future,
    #[error("init data names no user")]
    NoUser,
    #[error("no bot token is configured: no init data can be checked")]
    NoToken,
}

/// The secret key: HMAC-SHA256 of the bot token, keyed with `WebAppData`.
fn secret_key(bot_token: &str) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(b"WebAppData").expect("any key length");
    mac.update(bot_token.as_bytes());
    mac.finalize().into_bytes().into()
}

/// The decoded fields, each key at most once.
fn fields(raw: &str) -> Result<Vec<(String, String)>, Refusal> {
    let mut out: Vec<(String, String)> = url::form_urlencoded::parse(raw.as_bytes()).into_owned().collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    if out.windows(2).any(|w| w[0].0 == w[1].0) || out.iter().any(|(k, _)| k.is_empty()) {
        return Err(Refusal::Malformed);
    }
    Ok(out)
}

/// The data-check-string of sorted fields (`hash` left out).
fn check_string(sorted: &[(String, String)]) -> String {
    sorted.iter().filter(|(k, _)| k != "hash").map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("\n")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

/// Checks `raw` (the page's `Telegram.WebApp.initData`) against `bot_token` at `now_secs`,
/// refusing data older than `max_age_secs`.
pub fn verify(raw: &str, bot_token: &str, now_secs: i64, max_age_secs: i64) -> Result<InitData, Refusal> {
    // Without the token the key would be derived from "": anyone could sign.
    if bot_token.trim().is_empty() {
        return Err(Refusal::NoToken);
    }
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(Refusal::Missing);
    }
    if raw.len() > MAX_INIT_DATA_BYTES {
        return Err(Refusal::TooLong);
    }
    let sorted = fields(raw)?;
    let get = |k: &str| sorted.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let given = get("hash").and_then(unhex).ok_or(Refusal::BadHash)?;
    let mut mac = HmacSha256::new_from_slice(&secret_key(bot_token)).expect("any key length");
    mac.update(check_string(&sorted).as_bytes());
    // Constant time (`verify_slice`).
    mac.verify_slice(&given).map_err(|_| Refusal::BadHash)?;
    let auth_date: i64 = get("auth_date").and_then(|d| d.parse().ok()).ok_or(Refusal::Malformed)?;
    if auth_date > now_secs + FUTURE_SKEW_SECS {
        return Err(Refusal::Future);
    }
    if now_secs - auth_date > max_age_secs {
        return Err(Refusal::Stale);
    }
    let user: WebAppUser = get("user").and_then(|u| serde_json::from_str(u).ok()).ok_or(Refusal::NoUser)?;
    if user.id <= 0 {
        return Err(Refusal::NoUser);
    }
    Ok(InitData { user, auth_date, start_param: get("start_param").map(str::to_string) })
}

/// Whether verified init data still opens the operator's view: at most `max_age_secs` old
/// (`MINIAPP_OPERATOR_MAX_AGE_SECONDS`), and signed after the last end of operator sessions
/// (`not_before`, seconds; init data of that very second is refused too).
pub fn operator_session_live(init: &InitData, now_secs: i64, max_age_secs: i64, not_before: Option<i64>) -> bool {
    now_secs - init.auth_date <= max_age_secs && not_before.is_none_or(|nb| init.auth_date > nb)
}

/// Signs `fields` as Telegram would for `bot_token`: the query string with its `hash`. For
/// tests and the playground's stand-in (the real client gets it from Telegram).
pub fn sign(fields: &[(&str, &str)], bot_token: &str) -> String {
    let mut sorted: Vec<(String, String)> = fields.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut mac = HmacSha256::new_from_slice(&secret_key(bot_token)).expect("any key length");
    mac.update(check_string(&sorted).as_bytes());
    let hash = hex(&mac.finalize().into_bytes());
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in fields {
        q.append_pair(k, v);
    }
    q.append_pair("hash", &hash);
    q.finish()
}

/// The length of a group link's start parameter (`g` and 24 random URL-safe characters:
/// Telegram allows up to 64 of `A-Za-z0-9_-`).
pub const GROUP_LINK_LEN: usize = 25;

/// Whether `param` has the form of a start parameter the bot issues for a group (it must
/// still be found in the bot's own table to mean anything).
pub fn is_group_link(param: &str) -> bool {
    param.len() == GROUP_LINK_LEN && param.starts_with('g') && param.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A new group link's start parameter from 18 random bytes.
pub fn group_link(random: &[u8; 18]) -> String {
    use base64::Engine;
    format!("g{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "123456789:TEST-token_for-the-fake";
    const USER: &str = r#"{"id":42,"first_name":"Alice","username":"alice"}"#;

    fn signed(auth_date: &str) -> String {
        sign(&[("auth_date", auth_date), ("query_id", "AAH"), ("user", USER)], TOKEN)
    }

    #[test]
    fn telegram_documented_example_checks() {
        // The key derivation and check string as Telegram documents them, computed by hand.
        let raw = signed("1700000000");
        let ok = verify(&raw, TOKEN, 1_700_000_100, 86_400).unwrap();
        assert_eq!(ok.user.id, 42);
        assert_eq!(ok.user.first_name, "Alice");
        assert_eq!(ok.auth_date, 1_700_000_000);
        assert_eq!(ok.start_param, None);
    }

    #[test]
    fn no_token_refuses_everyone_even_data_signed_with_an_empty_token() {
        let forged = sign(&[("auth_date", "1700000000"), ("user", USER)], "");
        assert_eq!(verify(&forged, "", 1_700_000_000, 86_400), Err(Refusal::NoToken));
        assert_eq!(verify(&forged, "  ", 1_700_000_000, 86_400), Err(Refusal::NoToken));
        assert_eq!(verify(&forged, TOKEN, 1_700_000_000, 86_400), Err(Refusal::BadHash));
    }

    #[test]
    fn an_operator_session_lives_its_setting_and_ends_with_a_rotation() {
        let init = verify(&signed("1700000000"), TOKEN, 1_700_000_000, 86_400).unwrap();
        assert!(operator_session_live(&init, 1_700_003_600, 3_600, None));
        assert!(!operator_session_live(&init, 1_700_003_601, 3_600, None), "an hour, then no more");
        assert!(operator_session_live(&init, 1_700_000_100, 3_600, Some(1_699_999_999)));
        assert!(!operator_session_live(&init, 1_700_000_100, 3_600, Some(1_700_000_000)), "signed in the rotation's second");
        assert!(!operator_session_live(&init, 1_700_000_100, 3_600, Some(1_700_000_050)), "signed before the rotation");
    }

    #[test]
    fn tampered_init_data_is_refused() {
        let raw = signed("1700000000").replace("%2242%22", "43").replace("42", "43");
        assert_eq!(verify(&raw, TOKEN, 1_700_000_100, 86_400), Err(Refusal::BadHash));
        let no_hash = "auth_date=1700000000&user=%7B%22id%22%3A42%7D";
        assert_eq!(verify(no_hash, TOKEN, 1_700_000_100, 86_400), Err(Refusal::BadHash));
    }

    #[test]
    fn another_bots_init_data_is_refused() {
        let raw = sign(&[("auth_date", "1700000000"), ("user", USER)], "987654321:another-bot");
        assert_eq!(verify(&raw, TOKEN, 1_700_000_100, 86_400), Err(Refusal::BadHash));
    }

    #[test]
    fn stale_and_future_init_data_are_refused() {
        let raw = signed("1700000000");
        assert_eq!(verify(&raw, TOKEN, 1_700_000_000 + 86_401, 86_400), Err(Refusal::Stale));
        assert!(verify(&raw, TOKEN, 1_700_000_000 + 86_400, 86_400).is_ok());
        assert_eq!(verify(&raw, TOKEN, 1_700_000_000 - 61, 86_400), Err(Refusal::Future));
    }

    #[test]
    fn duplicate_keys_oversize_and_no_user_are_refused() {
        let raw = format!("{}&auth_date=1", signed("1700000000"));
        assert_eq!(verify(&raw, TOKEN, 1_700_000_100, 86_400), Err(Refusal::Malformed));
        assert_eq!(verify(&"a".repeat(5000), TOKEN, 0, 1), Err(Refusal::TooLong));
        assert_eq!(verify("", TOKEN, 0, 1), Err(Refusal::Missing));
        let no_user = sign(&[("auth_date", "1700000000")], TOKEN);
        assert_eq!(verify(&no_user, TOKEN, 1_700_000_100, 86_400), Err(Refusal::NoUser));
    }

    #[test]
    fn the_start_parameter_is_read_and_group_links_have_one_form() {
        let raw = sign(&[("auth_date", "1700000000"), ("start_param", "gAAAAAAAAAAAAAAAAAAAAAAAA"), ("user", USER)], TOKEN);
        assert_eq!(verify(&raw, TOKEN, 1_700_000_100, 86_400).unwrap().start_param.as_deref(), Some("gAAAAAAAAAAAAAAAAAAAAAAAA"));
        let link = group_link(&[7u8; 18]);
        assert!(is_group_link(&link), "{link}");
        assert!(!is_group_link("g123"));
        assert!(!is_group_link(&format!("x{}", &link[1..])));
        assert!(!is_group_link(&format!("g{}", "%".repeat(24))));
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_refused_or_verified_without_panic(raw in ".{0,300}") {
            let _ = verify(&raw, TOKEN, 1_700_000_100, 86_400);
        }
    }
}
