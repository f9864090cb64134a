// Telegram Mini App launch parameters, made locally: init data signed as Telegram documents it
// ("Validating data received via the Mini App": secret_key = HMAC-SHA256 keyed "WebAppData"
// of the bot token; hash = hex HMAC-SHA256 of the sorted key=value lines but hash), so the
// playground (with its stand-in bot token) and the tests open the Mini App as a person would
// from Telegram, and the URL fragment Telegram's clients pass (tgWebAppData, the theme).
import crypto from "node:crypto";

export function signInitData(fields, botToken) {
  const entries = Object.entries(fields).map(([k, v]) => [k, typeof v === "string" ? v : JSON.stringify(v)]);
  const check = [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => `${k}=${v}`).join("\n");
  const secret = crypto.createHmac("sha256", "WebAppData").update(botToken).digest();
  const hash = crypto.createHmac("sha256", secret).update(check).digest("hex");
  const q = new URLSearchParams(entries);
  q.set("hash", hash);
  return q.toString();
}

/** Init data for `user` ({id, first_name, …}) signed now (or at `authDate`, seconds). */
export function initDataFor(user, botToken, { authDate = Math.floor(Date.now() / 1000), extra = {} } = {}) {
  return signInitData({ auth_date: String(authDate), query_id: "AAE" + user.id, user, ...extra }, botToken);
}

/** The Mini App's URL at `workerUrl` as Telegram opens it for `user`. */
export function launchUrl(workerUrl, user, botToken, theme = {}) {
  const hash = new URLSearchParams({ tgWebAppData: initDataFor(user, botToken), tgWebAppVersion: "9.0", tgWebAppPlatform: "web", tgWebAppThemeParams: JSON.stringify(theme) });
  return `${workerUrl.replace(/\/$/, "")}/app#${hash}`;
}
